"""The one definition of simulator data (pure).

Data is simulated when the built-in simulator served it: a backend ``sim`` (owned), a run labelled
``simulated``, or a server that identified itself as the dsv4h simulator in its ``/server_info``
(the ``dsv4h_simulator`` block the simulator always sends, or a ``sim-`` version, as older
simulators and tools that saved only the version show it), e.g. an attached ``dsv4h sim serve``.
Every caller (run block, ledger ``data_origin``, evidence rules, reports, imports, quick bench) asks
these functions; an attached server that reports nothing is not simulated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

SIM_BACKEND = "sim"
SIM_LABEL = "simulated"
SIM_VERSION_PREFIX = "sim-"


def server_is_simulator(server_info: object) -> bool:
    """Whether a server's ``/server_info`` says it is the dsv4h simulator (False for no mapping)."""
    if not isinstance(server_info, Mapping):
        return False
    version = server_info.get("version")
    return "dsv4h_simulator" in server_info or (isinstance(version, str) and version.startswith(SIM_VERSION_PREFIX))


def service_is_simulated(service: Mapping[str, Any]) -> bool:
    """Whether one ``service.json`` entry was the simulator: backend ``sim`` or a simulator server_info."""
    return service.get("backend") == SIM_BACKEND or server_is_simulator(service.get("server_info"))


def backends_of(backend: str) -> list[str]:
    """The backends of a run block's ``backend`` (``a+b`` for an ABBA screen of two backends)."""
    return backend.split("+")


def run_is_simulated(backends: Iterable[str], labels: Iterable[str] = (),
                     services: Iterable[object] = ()) -> bool:
    """Whether a run's data is simulated: a ``sim`` backend, the ``simulated`` label, or any service
    entry (a mapping; anything else is ignored) that was the simulator."""
    return (SIM_BACKEND in list(backends) or SIM_LABEL in list(labels)
            or any(isinstance(s, Mapping) and service_is_simulated(s) for s in services))
