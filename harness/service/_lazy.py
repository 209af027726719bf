"""The lazy public names of the service subpackages (pure): importing a subpackage imports none of its
modules; a name of its ``__all__`` is imported from its module on first use."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_getattr(package: str, home: Mapping[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package``: ``home`` maps each public name to the module (in the
    package) that defines it; any other name raises ``AttributeError``."""

    def getattr_(name: str) -> object:
        if name in home:
            return getattr(importlib.import_module(f"{package}.{home[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return getattr_
