"""Stage 7, evidence: :mod:`.rules` (pure: every evidence rule as findings over an archive's plain
data; a package, one module per family, each rule registered with the run kinds it applies to),
:mod:`.findings` (pure: ``Finding``, ``ArchiveData``), :mod:`.verdict` (pure: the one verdict of an
archive), :mod:`.guard` (pure: refuse comparisons across claim or protocol classes), :mod:`.io` (load a
typed archive for the rules, ``check_archive``, write verdicts back into the ledgers).

May import: ``store`` and every earlier stage.

Public surface (``__all__``): the names other packages of ``harness`` import from this one, re-exported
here; they may equally be imported from their defining modules (``harness.evidence.io.check_archive``).
Everything else is the package's own: tests may reach into the modules, other packages should not.
``harness.evidence.rules_client`` is a deprecated alias kept for ``serves_simulator``.
"""

from harness.evidence.findings import Finding
from harness.evidence.guard import LabeledRate, change_pct
from harness.evidence.io import apply_findings, archive_verdict, check_archive, ingest_checked, verdict_of_view
from harness.evidence.rules.instruments import CLIENT_CPU_SHARE, SIM_LATENESS_FRACTION, STALL_FLOOR_S, serves_simulator
from harness.evidence.verdict import WITHHELD, Verdict, decide

__all__ = [
    "CLIENT_CPU_SHARE",
    "SIM_LATENESS_FRACTION",
    "STALL_FLOOR_S",
    "WITHHELD",
    "Finding",
    "LabeledRate",
    "Verdict",
    "apply_findings",
    "archive_verdict",
    "change_pct",
    "check_archive",
    "decide",
    "ingest_checked",
    "serves_simulator",
    "verdict_of_view",
]
