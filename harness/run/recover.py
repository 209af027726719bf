"""Roll forward what an interrupted dsv4h left behind, so no measured wave is ever stranded (edge module).

A ``.partial-<token>`` directory whose lock is free was left by a dsv4h that ended before it
finalized (``kill -9``, a power cut, a full disk). :func:`recover_partial` turns it into an archive:

- it holds a manifest that matches every file (the run stopped between writing the manifest and
  the rename): it is renamed into place as it is;
- it holds no manifest: it is finalized now with status ``partial`` and the label ``recovered``. A
  formal matrix gets its results computed from the streamed records, with each round's status
  from ``events.jsonl`` (a round that never reported an end is ``incomplete``); an ABBA screen
  keeps its records without a verdict. The run block comes from ``spec.json``, ``plan.json`` and
  the run-start event. A partial of ``dsv4h import`` (it holds ``import.json``,
  ``harness.store.peers.IMPORT_MARKER``) stays what it is: kind, claim and protocol class ``external``,
  status ``partial``, labelled ``recovered``; never a measurement. A quick screen (``dsv4h bench``,
  spec kind ``quick-bench``) stays protocol class ``quick-bench`` (harness.run.quick), never formal.

Either way the archive is then appended to the ledgers and checked by the evidence rules, as a
run's own finish does, and a formal matrix can be resumed from it like any partial archive.
:func:`recover_workspace` does this for every stranded partial of a workspace and also settles
finalized archives that never reached the ledgers (the process died between the rename and the
ledger append). A partial whose manifest does not match its files is left untouched and reported.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from harness.errors import ArchiveError, DsvError
from harness.evidence.rules_client import serves_simulator
from harness.inputs.spec import CampaignSpec
from harness.run.campaign import MatrixState, finalize_matrix
from harness.run.quick import quick_run_block
from harness.run.session import Finished, finish, run_labels, settle
from harness.service.identity import identity_hash
from harness.store.archive import (
    ArchiveWriter,
    Partial,
    find_archive,
    iter_archives,
    iter_partials,
    open_archive,
    read_json_file,
)
from harness.store.ledger import ingested_ids
from harness.store.peers import IMPORT_MARKER, recovered_import_run
from harness.store.runblock import RunBlock

RECOVERED_ERROR = "dsv4h ended before finalizing this run; recovered from its partial directory"


@dataclass(frozen=True)
class Recovered:
    """A partial directory rolled forward: how (``renamed`` or ``finalized``) and the result."""

    partial: Path
    how: str
    done: Finished


@dataclass
class RecoveryReport:
    """What :func:`recover_workspace` did."""

    recovered: list[Recovered] = field(default_factory=list)
    settled: list[str] = field(default_factory=list)  # finalized archives appended to the ledgers now
    live: list[Path] = field(default_factory=list)  # partials still written by a running dsv4h
    refused: list[tuple[Path, str]] = field(default_factory=list)  # left as they are, with the reason

    @property
    def empty(self) -> bool:
        """True when nothing needed doing."""
        return not (self.recovered or self.settled or self.live or self.refused)


def read_events(directory: Path) -> list[dict[str, Any]]:
    """The run's events; a last line cut short by a crash is skipped."""
    path = directory / "events.jsonl"
    out: list[dict[str, Any]] = []
    if not path.is_file():
        return out
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            row = json.loads(line)
            if isinstance(row, dict):
                out.append(row)
    return out


def _json(directory: Path, name: str, default: Any) -> Any:
    path = directory / name
    if not path.is_file():
        return default
    try:
        return read_json_file(path)
    except ArchiveError:
        return default


def _round_status(workspace: Path, events: list[dict[str, Any]], resumed_from: str | None) -> dict[str, str]:
    status: dict[str, str] = {}
    if resumed_from:  # the rounds the resumed run inherited
        with contextlib.suppress(DsvError, OSError):
            prev = open_archive(find_archive(resumed_from, workspace))
            for r in prev.json("results.json").get("rounds", []):
                status[str(r["round_id"])] = str(r["status"])
    for ev in events:
        if ev.get("event") == "round" and ev.get("round_id"):
            status[str(ev["round_id"])] = str(ev.get("status", "incomplete"))
    return status


def _matrix(workspace: Path, writer: ArchiveWriter, spec_json: dict[str, Any]) -> Finished:
    spec = CampaignSpec.model_validate(spec_json)
    d = writer.dir
    plan = _json(d, "plan.json", {})
    events = read_events(d)
    start = next((e for e in events if e.get("event") == "run-start"), {})
    services = list(_json(d, "service.json", {}).get("services", []))
    oracles = _json(d, "oracles.json", {}).get("results", [])
    cells = [(str(c["cell_id"]), str(c["workload"]), int(c["concurrency"]), int(c["rounds"]))
             for c in plan.get("cells", [])]
    if not (d / "service.json").exists():
        writer.write_json("service.json", {"services": services})
    st = MatrixState(
        plan_id=str(plan.get("plan_id", "")), cells=cells,
        round_status=_round_status(workspace, events, start.get("resumed_from")),
        services=services, governance=_json(d, "governance.json", {}),
        created_wall=str(start.get("wall_iso", "")),
        service_starts=max([int(s.get("start_index") or 0) for s in services] + [len(services)]),
        oracles_failed=sum(1 for r in oracles if not r.get("passed")),
        resumed_from=start.get("resumed_from"), extra_labels=("recovered",))
    done, _ = finalize_matrix(writer, workspace, spec, st, "partial", RECOVERED_ERROR)
    return done


def _generic(workspace: Path, writer: ArchiveWriter, spec: dict[str, Any]) -> Finished:
    """A partial that is not a readable formal matrix (an ABBA screen): its records, no verdict."""
    d = writer.dir
    events = read_events(d)
    start = next((e for e in events if e.get("event") == "run-start"), {})
    services = list(_json(d, "service.json", {}).get("services", []))
    if spec.get("kind") == "quick-bench":
        sim = any(serves_simulator(dict(s)) for s in services if isinstance(s, dict))
        return finish(writer, workspace, "partial", quick_run_block(
            spec, writer.token, str(start.get("wall_iso", "")), simulated=sim, error=RECOVERED_ERROR,
            extra_labels=("recovered",)))
    kind = "abba" if spec.get("kind") == "abba" else "formal-matrix"
    if kind == "abba":
        profiles = [spec.get("control") or {}, spec.get("candidate") or {}]
        backends = sorted({str(p.get("backend", "sim")) for p in profiles})
        service_name = " vs ".join(str(p.get("name", "?")) for p in profiles)
        claim = str((spec.get("workload") or {}).get("claim_class", "native-ar"))
    else:
        svc = spec.get("service") or {}
        backends, service_name = [str(svc.get("backend", "sim"))], str(svc.get("name", "service"))
        claim = str(spec.get("claim_class", "native-ar"))
    labels = [*run_labels([str(x) for x in spec.get("labels") or []], backends, services), "recovered"]
    run = RunBlock(campaign=str(spec.get("name", "unknown")), kind=kind, claim_class=claim,
                   protocol_class="abba-screen" if kind == "abba" else "formal", backend="+".join(backends),
                   service_name=service_name, created_wall=str(start.get("wall_iso", "")), run_token=writer.token,
                   labels=tuple(labels), error=RECOVERED_ERROR, identity_hash=identity_hash(services),
                   resumed_from=start.get("resumed_from"))
    return finish(writer, workspace, "partial", run)


def recover_partial(workspace: Path, partial: Path) -> Recovered:
    """Roll one partial directory forward (module docstring). ``ArchiveError`` when it is still
    written by a running dsv4h or its manifest does not match its files."""
    writer = ArchiveWriter.reopen(partial)  # takes the lock: refuses a live partial
    try:
        if (partial / "manifest.json").is_file():
            path = writer.publish_existing_manifest()
            return Recovered(partial, "renamed", settle(workspace, path))
        marker = _json(partial, IMPORT_MARKER, None)
        if isinstance(marker, dict) and marker.get("kind") == "external":  # a killed `dsv4h import`
            run = recovered_import_run(marker, writer.token, RECOVERED_ERROR)
            return Recovered(partial, "finalized", finish(writer, workspace, "partial", run))
        spec = _json(partial, "spec.json", {})
        if spec.get("kind", "formal-matrix") == "formal-matrix" and (partial / "plan.json").is_file():
            try:
                return Recovered(partial, "finalized", _matrix(workspace, writer, spec))
            except (ValidationError, KeyError, TypeError, ValueError):
                pass  # not readable as a matrix of this version: keep its records at least
        return Recovered(partial, "finalized", _generic(workspace, writer, spec))
    finally:
        writer.close()


def recover_workspace(workspace: Path) -> RecoveryReport:
    """Roll forward every stranded partial of ``workspace`` and settle finalized archives missing
    from the ledgers; partials still being written are only listed."""
    report = RecoveryReport()
    partials: list[Partial] = list(iter_partials(workspace))
    for p in partials:
        if p.live:
            report.live.append(p.path)
            continue
        try:
            report.recovered.append(recover_partial(workspace, p.path))
        except ArchiveError as exc:
            report.refused.append((p.path, exc.message))
    if (workspace / "ledgers").is_dir() or report.recovered:
        known = ingested_ids(workspace)
        for a in iter_archives(workspace):
            if a.archive_id not in known:
                try:
                    settle(workspace, a.path)
                    report.settled.append(a.archive_id)
                except DsvError as exc:
                    report.refused.append((a.path, exc.message))
    return report
