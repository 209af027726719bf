"""What a corpus is built from, before any tokenizer is involved: the source files, the prompt template,
the chat encoding hook and the token range.

Contract: pure but for reading the source tree; raises ``SpecError`` for invalid parameters and never
tokenizes. :mod:`harness.inputs.corpus.build` (the build driver) and :mod:`harness.inputs.corpus.train`
(tokenizer training) select files with :func:`list_source_files` and read them with
:func:`read_source_text`, so both see exactly the same text.

File selection: the files under ``source_dir`` whose POSIX path relative to it matches an ``include``
pattern and no ``exclude`` pattern (``fnmatch`` syntax, case-sensitive, ``*`` also matches ``/``), sorted by
that path. Files that are not UTF-8 are skipped; ``\\r\\n`` becomes ``\\n``.
"""

from __future__ import annotations

import fnmatch
import importlib
import os
import string
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness.errors import SpecError

__all__ = [
    "DEFAULT_EXCLUDE",
    "DEFAULT_INCLUDE",
    "DEFAULT_TEMPLATE",
    "STDLIB_EXCLUDE",
    "ChatEncoding",
    "list_source_files",
    "parse_token_range",
    "python_source_revision",
    "read_source_text",
    "resolve_chat_encoding",
    "split_template",
    "stdlib_dir",
]

DEFAULT_TEMPLATE = (
    "Review the following source file excerpt and explain what it does.\n\n```python\n# {path}\n{code}\n```\n"
)
DEFAULT_INCLUDE: tuple[str, ...] = ("*.py",)
DEFAULT_EXCLUDE: tuple[str, ...] = (
    "test/*",
    "tests/*",
    "*/test/*",
    "*/tests/*",
    "__pycache__/*",
    "*/__pycache__/*",
    "site-packages/*",
)
#: The standard-library selection used for the shipped tokenizers and corpora: every ``.py`` file of ``Lib/``
#: except tests, bundled applications (IDLE, lib2to3, turtledemo), data-like modules (codec tables, pydoc
#: topics) and files generated when the interpreter was built (``_sysconfigdata_*``, ``config-*/``), which
#: differ between installations of the same version.
STDLIB_EXCLUDE: tuple[str, ...] = (
    *DEFAULT_EXCLUDE,
    "_sysconfigdata_*",
    "config-*/*",
    "idlelib/*",
    "lib2to3/*",
    "turtledemo/*",
    "pydoc_data/*",
    "encodings/*",
    "__phello__/*",
)

ChatEncoding = Callable[[str], str]


# ----------------------------------------------------------------------------------------------------
# Parameters
# ----------------------------------------------------------------------------------------------------


def parse_token_range(text: str) -> tuple[int, int]:
    """Parse ``"N"`` or ``"N-M"`` (tokens, inclusive) into ``(lo, hi)``; raises ``SpecError`` when invalid."""
    parts = text.strip().split("-")
    try:
        nums = [int(p) for p in parts]
    except ValueError:
        nums = []
    if len(nums) not in (1, 2) or min(nums, default=0) < 1 or nums[0] > nums[-1]:
        raise SpecError(
            f"token range {text!r} is not N or N-M with 1 <= N <= M",
            hint="Write e.g. --tokens 512 or --tokens 511-512.",
        )
    return nums[0], nums[-1]


MOVED_ENCODINGS = {
    "harness.corpus_build:deepseek_v4_chat": "harness.inputs.corpus.build:deepseek_v4_chat",
    "harness.inputs.corpus_build:deepseek_v4_chat": "harness.inputs.corpus.build:deepseek_v4_chat",
}
"""Chat encodings by the names manifests recorded before their module moved (manifests are hashed data
and keep the name they were built with; the function is the same)."""


def resolve_chat_encoding(spec: str | ChatEncoding | None) -> tuple[ChatEncoding | None, str | None]:
    """Turn ``"module:function"`` (or a callable) into ``(function, recorded name)``; ``None`` -> no hook.
    A name a manifest recorded before the function moved (:data:`MOVED_ENCODINGS`) resolves to where
    it lives now and is recorded as given.

    Raises ``SpecError`` when the module or attribute cannot be imported or is not callable.
    """
    if spec is None:
        return None, None
    if callable(spec):
        module = getattr(spec, "__module__", None) or "builtins"
        qualname = getattr(spec, "__qualname__", None) or type(spec).__qualname__
        return spec, f"{module}:{qualname}"
    mod_name, sep, attr = MOVED_ENCODINGS.get(spec, spec).partition(":")
    if not sep or not mod_name or not attr:
        raise SpecError(f"chat encoding {spec!r} is not module:function",
                        hint="Example: --chat-encoding harness.inputs.corpus.build:deepseek_v4_chat")
    try:
        obj: Any = importlib.import_module(mod_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise SpecError(f"cannot import chat encoding {spec!r}: {exc}",
                        hint="Check the module is importable from this environment (PYTHONPATH).") from exc
    if not callable(obj):
        raise SpecError(f"chat encoding {spec!r} is not callable", hint="Point at a function str -> str.")
    fn: ChatEncoding = obj
    return fn, spec


def split_template(template: str) -> tuple[str, str]:
    """Validate a prompt template (fields ``{path}`` and exactly one ``{code}``) and split it around
    ``{code}``: returns ``(head, tail)``, both still format strings for ``{path}``.

    Raises ``SpecError`` for a malformed template or one with other fields.
    """
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise SpecError(f"prompt template is malformed: {exc}",
                        hint="Escape literal braces as {{ and }}.") from exc
    bad = sorted({f for f in fields if f not in ("path", "code")})
    if bad or fields.count("code") != 1:
        raise SpecError(
            f"prompt template must use {{code}} exactly once and only {{path}} otherwise (found {fields})",
            hint="Example: 'Explain this code.\\n# {path}\\n{code}\\n'",
        )
    return _split_at_code_field(template)


def _split_at_code_field(template: str) -> tuple[str, str]:
    # Scan rather than str.split: an escaped "{{code}}" may also occur and is literal text.
    i = 0
    while i < len(template):
        if template.startswith("{{", i) or template.startswith("}}", i):
            i += 2
            continue
        if template.startswith("{code}", i):
            return template[:i], template[i + len("{code}"):]
        i += 1
    raise SpecError("prompt template has no {code} field", hint="Add {code} where the excerpt goes.")


# ----------------------------------------------------------------------------------------------------
# Source files
# ----------------------------------------------------------------------------------------------------


def list_source_files(
    source_dir: Path, include: Sequence[str] = DEFAULT_INCLUDE, exclude: Sequence[str] = DEFAULT_EXCLUDE
) -> list[str]:
    """POSIX paths (relative to ``source_dir``) of regular files selected by the patterns, sorted.

    Directories that an exclude pattern ending in ``/*`` covers entirely are not descended into.
    """
    prune = [p[:-2] for p in exclude if p.endswith("/*")]
    out: list[str] = []
    root = str(source_dir)
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
        prefix = "" if rel_dir == "." else rel_dir + "/"
        dirnames[:] = sorted(
            d for d in dirnames if not any(fnmatch.fnmatchcase(prefix + d, p) for p in prune)
        )
        for fname in filenames:
            rel = prefix + fname
            if not any(fnmatch.fnmatchcase(rel, p) for p in include):
                continue
            if any(fnmatch.fnmatchcase(rel, p) for p in exclude):
                continue
            if os.path.isfile(os.path.join(dirpath, fname)):
                out.append(rel)
    return sorted(out)


def read_source_text(path: Path) -> str | None:
    """The file's text with ``\\r\\n`` turned into ``\\n``; ``None`` when it is not UTF-8 or cannot be read."""
    try:
        return path.read_bytes().decode("utf-8").replace("\r\n", "\n")
    except (UnicodeDecodeError, OSError):
        return None


def python_source_revision() -> str:
    """E.g. ``"CPython 3.11.7 Lib/"``: the interpreter whose standard library is the default source."""
    impl = sys.implementation.name
    label = "CPython" if impl == "cpython" else impl
    v = sys.version_info
    return f"{label} {v.major}.{v.minor}.{v.micro} Lib/"


def stdlib_dir() -> Path:
    """This interpreter's standard-library source directory (``Lib/`` of the installed CPython)."""
    import sysconfig

    return Path(sysconfig.get_paths()["stdlib"])
