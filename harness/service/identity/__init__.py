"""What was served.

- :mod:`.identity`: the hash of the served configuration (``identity_hash``, the fingerprint without
  port or PID).
- :mod:`.stack`: the stack one service served, taken at start and end; made of
  :mod:`.model_identity`, :mod:`.source_trees`, :mod:`.mapped` (with the pure :mod:`.mapped_rules`)
  and :mod:`.runtime_identity` (pure).
- :mod:`.speculative_identity`: the served speculative configuration; :mod:`.witness`: backend
  witnesses written by the patch series, compared with the profile.
- :mod:`.environment`: host, versions, clock anchor; :mod:`.origin`: the one definition of simulator
  data (pure); :mod:`.record_shape`: a read-back ``service.json`` in the shapes dsv4h writes (pure).

Imports :mod:`harness.service.devices` (the environment's visible GPUs), never
:mod:`harness.service.launch`.

Public surface (``__all__``): the names other packages import from these modules, re-exported here
lazily (importing the package imports none of its modules); they may equally be imported from their
defining modules. ``model_identity`` and ``runtime_identity`` are not re-exported: they are also the
names of their modules (``harness.service.identity.model_identity.model_identity``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.service._lazy import lazy_getattr

if TYPE_CHECKING:
    from harness.service.identity.environment import capture_environment, clock_anchor
    from harness.service.identity.identity import identity_hash
    from harness.service.identity.mapped import HashCache
    from harness.service.identity.mapped_rules import library_workers
    from harness.service.identity.model_identity import model_statement
    from harness.service.identity.origin import (
        SIM_LABEL,
        backends_of,
        run_is_simulated,
        server_is_simulator,
        service_is_simulated,
    )
    from harness.service.identity.record_shape import clean_service_doc
    from harness.service.identity.runtime_identity import (
        COMPONENTS,
        component_differences,
        entry_differences,
        identity_diff,
    )
    from harness.service.identity.speculative_identity import SPECULATIVE_CLAIMS, claim_conflicts, served_speculation
    from harness.service.identity.stack import mapped_at_end, stack_at_start, violations
    from harness.service.identity.witness import compare_witnesses, read_witnesses

_HOME: dict[str, str] = {
    "COMPONENTS": "runtime_identity",
    "SIM_LABEL": "origin",
    "SPECULATIVE_CLAIMS": "speculative_identity",
    "HashCache": "mapped",
    "backends_of": "origin",
    "capture_environment": "environment",
    "claim_conflicts": "speculative_identity",
    "clean_service_doc": "record_shape",
    "clock_anchor": "environment",
    "compare_witnesses": "witness",
    "component_differences": "runtime_identity",
    "entry_differences": "runtime_identity",
    "identity_diff": "runtime_identity",
    "identity_hash": "identity",
    "library_workers": "mapped_rules",
    "mapped_at_end": "stack",
    "model_statement": "model_identity",
    "read_witnesses": "witness",
    "run_is_simulated": "origin",
    "served_speculation": "speculative_identity",
    "server_is_simulator": "origin",
    "service_is_simulated": "origin",
    "stack_at_start": "stack",
    "violations": "stack",
}
"""Each public name and the module that defines it."""

__all__ = [
    "COMPONENTS",
    "SIM_LABEL",
    "SPECULATIVE_CLAIMS",
    "HashCache",
    "backends_of",
    "capture_environment",
    "claim_conflicts",
    "clean_service_doc",
    "clock_anchor",
    "compare_witnesses",
    "component_differences",
    "entry_differences",
    "identity_diff",
    "identity_hash",
    "library_workers",
    "mapped_at_end",
    "model_statement",
    "read_witnesses",
    "run_is_simulated",
    "served_speculation",
    "server_is_simulator",
    "service_is_simulated",
    "stack_at_start",
    "violations",
]


__getattr__ = lazy_getattr(__name__, _HOME)  # a public name imported from its module on first use
