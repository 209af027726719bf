"""What every run's command prints after its own tables (formal matrices, ABBA screens, matched AR/SD
runs, rate sweeps): the energy of each measurement window, the evidence findings, a leg-run verdict
(withheld when a blocking finding invalidated the run), the archive and ledger lines."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from rich.table import Table

from harness.cli.common import console, esc
from harness.cli.render import fmt
from harness.errors import ArchiveError, DsvError, EvidenceError
from harness.evidence.findings import Finding
from harness.evidence.verdict import Verdict
from harness.store.archive import Archive
from harness.store.view import ArchiveView


def _float(v: Any) -> float:
    return math.nan if v is None else float(v)


def energy_table(doc: Mapping[str, Any], simulated: bool) -> Table:
    """Energy of each measurement window of ``energy.json`` (docs/metrics.md, Power and energy): a
    resident window per measured wave, or a round window per sweep round."""
    info = doc.get("sampler") or {}
    rows = list(doc.get("waves") or [])
    kinds = sorted({str(w.get("window") or "resident") for w in rows}) or ["resident"]
    t = Table(title=f"energy per {'/'.join(kinds)} window, source {info.get('source', '?')}"
              + (" (SIMULATED)" if simulated else ""), title_justify="left",
              caption="J and W over every sampled device; a window the samples do not bracket has no figure "
              "(never estimated)", caption_justify="left")
    for col in ("wave", "C", "seconds", "energy J", "mean W", "tokens", "tokens/J", "method"):
        t.add_column(col, justify="left" if col in ("wave", "method") else "right")
    for w in rows:
        t.add_row(str(w.get("wave_id")), str(w.get("concurrency")), fmt(_float(w.get("seconds")), 3),
                  fmt(_float(w.get("energy_j")), 1), fmt(_float(w.get("mean_power_w")), 1), str(w.get("tokens")),
                  fmt(_float(w.get("tokens_per_joule")), 4), str(w.get("method") or w.get("reason") or "—"))
    return t


def print_energy(archive: Archive, simulated: bool) -> None:
    """Print the archive's energy table when it has ``energy.json``."""
    files = ArchiveView(archive)
    if files.has("energy.json"):
        console.print(energy_table(files.doc("energy.json"), simulated))


def print_findings(findings: Sequence[Finding], *, all_severities: bool = False) -> None:
    """The evidence findings (those above ``info`` unless ``all_severities``), when there are any; the
    count of those left out is said, so the console's count is the ledger's."""
    shown = [f for f in findings if all_severities or f.severity != "info"]
    hidden = len(findings) - len(shown)
    if shown:
        from harness.cli.evidence_cmd import findings_table
        console.print(findings_table(shown, "evidence findings"))
    if hidden:
        console.print(f"{hidden} info finding(s) not shown ('dsv4h evidence check ARCHIVE' lists every one)")


def end_run(verdict: Verdict | None, *, error: DsvError | None, status: str, archive_id: str) -> None:
    """End a run's command the one way every kind ends: raise the run's own ``error``; else
    ``ArchiveError`` for an archive that is not complete; else, when a blocking finding
    invalidated rows, ``EvidenceError`` (the exit status of ``dsv4h evidence check``)."""
    if error is not None:
        raise error
    if status != "complete":
        raise ArchiveError(f"archive {archive_id} is {status}")
    if verdict is not None and verdict.blocking:
        rules = ", ".join(sorted({f.rule for f in verdict.blocking}))
        raise EvidenceError(f"archive {archive_id}: {len(verdict.blocking)} blocking finding(s) ({rules}): the rows "
                            "they name are invalid in every table, ledger and report",
                            hint=f"read them above ('dsv4h evidence check {archive_id}' again); the archive is "
                            "complete and kept, its invalid rows marked")


def print_verdict(blocking: Sequence[Finding], verdict: str, reason: str, styles: Mapping[str, str], *,
                  what: str, withheld_tail: str = "") -> None:
    """The verdict line of a leg run: ``withheld`` (naming the blocking rules, and what the run read as
    measured) when any finding blocks, else the verdict in its style (``styles``: verdict -> colour;
    yellow otherwise)."""
    if blocking:
        rules = ", ".join(sorted({f.rule for f in blocking}))
        console.print(f"verdict: [bold red]withheld[/] — {what} is invalid ({esc(rules)}, blocking); as "
                      f"measured {verdict}: {esc(reason)}{withheld_tail}")
    else:
        console.print(f"verdict: [bold {styles.get(verdict, 'yellow')}]{verdict}[/] — {esc(reason)}")


def print_archive(archive: Archive, status: str, ledger_rows: Mapping[str, int] | None = None) -> None:
    """The archive line (id, status, path) and, when given, the ledger rows added."""
    console.print(f"archive {archive.archive_id} ({status}) at {archive.path}")
    if ledger_rows:
        console.print("ledgers: " + ", ".join(f"{k} +{v}" for k, v in sorted(ledger_rows.items())))
