"""Reading what a report needs from a workspace (edge module: reads files).

:func:`collect` lists the workspace's archives, applies the config's selection, **verifies** every
selected archive (a missing, changed or extra file, or a manifest that no longer matches its id,
stops the build with an ``ArchiveError`` naming the archive and what changed), then loads each
archive's content and the optional inputs: ``memory.parquet`` (GPU memory samples),
``oracles.json``, ``sweep.json``, ``environment.json``, a matched AR/SD run's ``matched.json`` (with its
``legs.parquet``), ``acceptance.parquet`` (speculative counts per wave), the archive's one verdict
(``harness.evidence.io.archive_verdict``, imported lazily: the findings stored with its ledger rows
when the workspace's ledger holds it, ``source = "ledger"``, else the rules run now, ``source =
"rules"``; its findings are the report's findings) and
the ``historical`` ledger table (``<workspace>/ledgers/historical/*.parquet``), and the wave
timelines of formal matrices and screens (:mod:`harness.report.timelines`, from raw records). Absent optional inputs
are skipped silently. Which archives a resumed run superseded is read from every archive of the
workspace (a run block's ``resumed_from``), selected or not, as the ledger's ``superseded_by`` is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

from harness.errors import ArchiveError
from harness.evidence.verdict import Verdict, decide
from harness.hashing import sha256_file
from harness.report.config import ReportConfig
from harness.report.snapshot import ArchiveContent, freeze, select_archives
from harness.report.snapshot.validity import finding_of
from harness.report.timelines import timeline_entries
from harness.store.archive import MANIFEST, Archive, iter_archives, verify_archive
from harness.store.ledger import data_origin, read_table, rows_iso
from harness.store.view import ArchiveView, verdict_rows

HISTORICAL_LEDGER = Path("ledgers") / "historical"  # a table directory (ledger schema 3)
#: ``findings_source`` of a snapshot whose findings are the archives' verdicts' (each archive's
#: ``findings_source`` says ``ledger`` or ``rules``); an injected ``findings_fn`` gives ``harness.evidence.rules``
VERDICT_SOURCE = "harness.evidence.verdict"
_ID_RE = re.compile(r"[0-9a-f]{16}")

FindingsFn = Callable[[Archive], Sequence[Any]]
VerdictFn = Callable[[Path | None, Archive], Verdict]


def evidence_checker() -> FindingsFn | None:
    """``harness.evidence.io.check_archive`` when that module exists, else ``None``. The report does not
    run it: it reads each archive's verdict (:func:`verdict_reader`), which runs the rules only for an
    archive the workspace's ledger does not hold."""
    try:
        from harness.evidence.io import check_archive
    except ImportError:
        return None
    return check_archive


def verdict_reader() -> VerdictFn | None:
    """``harness.evidence.io.archive_verdict`` when that module exists, else ``None``."""
    try:
        from harness.evidence.io import archive_verdict
    except ImportError:
        return None
    return archive_verdict


def finding_dict(f: Any) -> dict[str, Any]:
    """A Finding (dataclass or mapping) as a plain dict with ``rule, severity, message, remedy,
    archive_id, rows, scope`` (``scope`` ``rows`` when the mapping has none)."""
    d = asdict(f) if is_dataclass(f) and not isinstance(f, type) else dict(f)
    out = {k: d.get(k) for k in ("rule", "severity", "message", "remedy", "archive_id", "rows")}
    out["scope"] = d.get("scope") or "rows"
    return out


def decided(archive: Archive, findings: Sequence[dict[str, Any]]) -> Verdict:
    """The verdict ``findings`` (Finding-shaped dicts, e.g. of an injected ``findings_fn``) decide for
    ``archive``: :func:`harness.evidence.verdict.decide` over its wave and round rows (``source = "rules"``)."""
    return decide(archive.archive_id, data_origin(archive), [finding_of(f, archive.archive_id) for f in findings],
                  *verdict_rows(archive))


def load_content(archive: Archive, *, findings_fn: FindingsFn | None, memory: bool = True,
                 workspace: Path | None = None, verdict_fn: VerdictFn | None = None) -> ArchiveContent:
    """Everything the snapshot needs from one (already verified) archive. Its verdict: ``verdict_fn``
    (``harness.evidence.io.archive_verdict`` of ``workspace``) when given, its findings then the
    verdict's; else, with ``findings_fn``, the verdict those findings decide (:func:`decided`); with
    neither, no verdict and no findings (freeze decides one from none)."""
    f = ArchiveView(archive)  # every file through the archive's typed view, each read once

    def rows(name: str) -> list[dict[str, Any]] | None:
        return f.rows(name) if f.has(name) else None

    results = f.doc("results.json")
    if results is None and f.kind_rows("cells"):  # no results.json: the kind's cell and round tables
        results = {"cells": f.kind_rows("cells"), "rounds": f.kind_rows("rounds")}
    findings: list[dict[str, Any]] | None = None
    verdict: Verdict | None = None
    if verdict_fn is not None:
        verdict = verdict_fn(workspace, archive)
        findings = [finding_dict(x) for x in verdict.findings]
    elif findings_fn is not None:
        findings = [finding_dict(x) for x in findings_fn(archive)]
        verdict = decided(archive, findings)
    matched = f.doc("matched.json")
    return ArchiveContent(
        archive_id=archive.archive_id,
        manifest=archive.manifest,
        manifest_sha256=sha256_file(archive.path / MANIFEST),
        results=results,
        comparison=f.doc("comparison.json"),
        service=f.doc("service.json"),
        corpora=f.doc("corpora.json"),
        spec=f.doc("spec.json"),
        identity_check=f.doc("identity_check.json"),
        oracles=f.doc("oracles.json"),
        memory=rows("memory.parquet") if memory else None,
        findings=findings,
        sweep=f.doc("sweep.json"),
        environment=f.doc("environment.json"),
        external=f.doc("external.json"),
        matched=matched,
        matched_legs=rows("legs.parquet") if matched is not None else None,
        acceptance=rows("acceptance.parquet"),
        energy=f.doc("energy.json"),
        replay=f.doc("replay.json"),
        sla=f.doc("sla.json"),
        verdict=verdict,
    )


def verify_selected(archives: Sequence[Archive]) -> None:
    """Re-hash every selected archive; raise ``ArchiveError`` naming each archive that changed and
    what changed (all problems of all archives in one message)."""
    bad: list[str] = []
    for a in archives:
        problems = verify_archive(a.path)
        if problems:
            bad.append(f"archive {a.archive_id} ({a.path}):\n    " + "\n    ".join(problems))
    if bad:
        raise ArchiveError("cannot build the report: selected archive(s) failed verification:\n  "
                           + "\n  ".join(bad),
                           hint="archives must not be edited; restore them from a copy, re-run the campaign, "
                                "or leave them out of the report config's selection")


def read_historical(workspace: Path) -> list[dict[str, Any]] | None:
    """Rows of the ``historical`` ledger table (wall times as ISO text), or ``None`` when it has none."""
    t = read_table(workspace, "historical")
    return rows_iso(t) if t is not None else None


def _unreadable_archive_dirs(workspace: Path) -> list[Path]:
    """Directories under ``archives/`` named like an archive id (16 hex digits) without a manifest."""
    root = workspace / "archives"
    if not root.is_dir():
        return []
    return sorted(d for d in root.iterdir() if d.is_dir() and _ID_RE.fullmatch(d.name) and not (d / MANIFEST).exists())


def collect(workspace: Path, config: ReportConfig, *,
            findings_fn: FindingsFn | bool | None = True) -> dict[str, Any]:
    """Select, verify and load archives of ``workspace`` and return the frozen snapshot document.

    ``findings_fn``: ``True`` reads each archive's one verdict (:func:`verdict_reader`:
    ``harness.evidence.io.archive_verdict``, the findings stored in the workspace's ledger, else the
    rules run now; skipped when the evidence module is unavailable) and freezes its findings (unless
    the config's ``findings`` is off: the findings list is then not shown, validity still comes from
    the verdict); ``False`` or ``None`` skips findings and verdicts (every row valid unless
    superseded); a callable replaces the findings (tests), the verdict then decided from them
    (:func:`decided`). Raises ``ArchiveError`` when a selected archive is missing or fails
    verification, or when the workspace holds none.
    """
    refs = config.select.archive_ids
    broken = [d for d in _unreadable_archive_dirs(workspace)
              if refs is None or any(d.name.startswith(r) for r in refs)]
    if broken:
        raise ArchiveError("cannot build the report: archive(s) without a manifest: "
                           + ", ".join(f"{d.name} (missing: {MANIFEST})" for d in broken),
                           hint="an archive must not be edited; restore it from a copy or move the directory out "
                                "of archives/")
    all_archives = list(iter_archives(workspace))
    by_id = {a.archive_id: a for a in all_archives}
    if len(by_id) != len(all_archives):
        dirs = sorted(str(a.path) for a in all_archives)
        raise ArchiveError(f"two archive directories claim the same id under {workspace}: {', '.join(dirs)}",
                           hint="run 'dsv4h archive verify' on each and remove the copy")
    ids = select_archives([a.manifest | {"archive_id": a.archive_id} for a in all_archives], config.select)
    if not ids:
        raise ArchiveError(f"no archive of {workspace / 'archives'} matches the report's selection",
                           hint="run a campaign first, or widen the config's select filters")
    selected = [by_id[i] for i in ids]
    verify_selected(selected)
    fn: FindingsFn | None = None
    vfn: VerdictFn | None = None
    if findings_fn is True:
        vfn = verdict_reader()
        source = VERDICT_SOURCE if vfn is not None else "unavailable"
    elif findings_fn is False or findings_fn is None:
        source = "unavailable"
    else:
        fn = findings_fn
        source = "harness.evidence.rules"
    if not config.findings:
        source = "disabled"
    contents = [load_content(a, findings_fn=fn, memory=config.memory, workspace=workspace, verdict_fn=vfn)
                for a in selected]
    historical = read_historical(workspace) if config.historical else None
    snapshot = freeze(contents, config, historical=historical, findings_source=source,
                      superseded=superseded_in(all_archives))
    snapshot["timelines"], snapshot["timelines_omitted"] = timeline_entries(selected, snapshot)
    return snapshot


def superseded_in(archives: Sequence[Archive]) -> dict[str, str]:
    """Archive id -> the id of the archive of ``archives`` that resumed it (the ledger's
    ``superseded_by``); archives whose run block cannot be read are skipped (they fail verification)."""
    out: dict[str, str] = {}
    for a in sorted(archives, key=lambda x: x.archive_id):
        try:
            prev = a.run.resumed_from
        except (ArchiveError, ValueError, TypeError):  # pragma: no cover - an unreadable run block
            continue
        if prev and prev != a.archive_id:
            out.setdefault(prev, a.archive_id)
    return out
