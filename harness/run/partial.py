"""Reading what a killed run left in its ``.partial-*`` directory, and each kind's recovery of it
(edge module: reads and writes the partial's files).

A kind's recovery function (:data:`Recover`, registered in :mod:`harness.run.kinds`) turns a partial
without a manifest into an archive of status ``partial`` labelled ``recovered``, under the kind's own
kind and protocol class: a formal matrix gets its results computed from the streamed records (each
round's status from ``events.jsonl``; a round that never reported an end is ``incomplete``); an
ABBA screen and a matched AR/SD run keep their records without a verdict; a quick screen stays
``quick-bench``; a rate sweep is recovered by :func:`harness.run.sweep.recover_sweep`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from harness.errors import ArchiveError, DsvError
from harness.evidence.rules_client import serves_simulator
from harness.inputs.spec import SPEC_MODELS, CampaignSpec, OneServiceSpec
from harness.run.campaign import MatrixState, finalize_matrix
from harness.run.quick import quick_run_block
from harness.run.session import one_service_run_block, run_labels
from harness.run.skeleton import Finished, finish
from harness.service.identity import identity_hash
from harness.store.archive import ArchiveWriter, find_archive, open_archive, read_json_file
from harness.store.runblock import RunBlock

RECOVERED_ERROR = "dsv4h ended before finalizing this run; recovered from its partial directory"
# (workspace, the reopened partial, its spec.json) -> the finished archive
Recover = Callable[[Path, ArchiveWriter, dict[str, Any]], Finished]


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


def read_json_or(directory: Path, name: str, default: Any) -> Any:
    """``directory/name`` parsed, or ``default`` when it is missing or unreadable."""
    path = directory / name
    if not path.is_file():
        return default
    try:
        return read_json_file(path)
    except ArchiveError:
        return default


def run_start(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``run-start`` event ({} when the run died before writing it)."""
    return next((e for e in events if e.get("event") == "run-start"), {})


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
    plan = read_json_or(d, "plan.json", {})
    events = read_events(d)
    start = run_start(events)
    services = list(read_json_or(d, "service.json", {}).get("services", []))
    oracles = read_json_or(d, "oracles.json", {}).get("results", [])
    cells = [(str(c["cell_id"]), str(c["workload"]), int(c["concurrency"]), int(c["rounds"]))
             for c in plan.get("cells", [])]
    if not (d / "service.json").exists():
        writer.write_json("service.json", {"services": services})
    st = MatrixState(
        plan_id=str(plan.get("plan_id", "")), cells=cells,
        round_status=_round_status(workspace, events, start.get("resumed_from")),
        services=services, governance=read_json_or(d, "governance.json", {}),
        created_wall=str(start.get("wall_iso", "")),
        service_starts=max([int(s.get("start_index") or 0) for s in services] + [len(services)]),
        oracles_failed=sum(1 for r in oracles if not r.get("passed")),
        resumed_from=start.get("resumed_from"), extra_labels=("recovered",))
    done, _ = finalize_matrix(writer, workspace, spec, st, "partial", RECOVERED_ERROR)
    return done


def recover_matrix(workspace: Path, writer: ArchiveWriter, spec: dict[str, Any]) -> Finished:
    """A formal matrix: results from its records; one not readable as a matrix of this version keeps
    its records without results (still kind formal-matrix, protocol class formal)."""
    if (writer.dir / "plan.json").is_file():
        try:
            return _matrix(workspace, writer, spec)
        except (ValidationError, KeyError, TypeError, ValueError):
            pass  # not readable as a matrix of this version: keep its records at least
    return _records_only(workspace, writer, spec, "formal-matrix")


def recover_abba(workspace: Path, writer: ArchiveWriter, spec: dict[str, Any]) -> Finished:
    """An ABBA screen: its records, no verdict."""
    return _records_only(workspace, writer, spec, "abba")


def recover_matched(workspace: Path, writer: ArchiveWriter, spec: dict[str, Any]) -> Finished:
    """A matched AR/SD run: its records, no verdict (kind and protocol class matched-sd)."""
    return _records_only(workspace, writer, spec, "matched-sd")


def recover_quick(workspace: Path, writer: ArchiveWriter, spec: dict[str, Any]) -> Finished:
    """A quick screen (``dsv4h bench``): stays protocol class quick-bench."""
    d = writer.dir
    start = run_start(read_events(d))
    services = list(read_json_or(d, "service.json", {}).get("services", []))
    sim = any(serves_simulator(dict(s)) for s in services if isinstance(s, dict))
    return finish(writer, workspace, "partial", quick_run_block(
        spec, writer.token, str(start.get("wall_iso", "")), simulated=sim, error=RECOVERED_ERROR,
        extra_labels=("recovered",)))


def _records_only(workspace: Path, writer: ArchiveWriter, spec: dict[str, Any], kind: str) -> Finished:
    d = writer.dir
    start = run_start(read_events(d))
    services = list(read_json_or(d, "service.json", {}).get("services", []))
    if kind in ("abba", "matched-sd"):
        roles = ("control", "candidate") if kind == "abba" else ("ar", "sd")
        profiles = [spec.get(roles[0]) or {}, spec.get(roles[1]) or {}]
        backends = sorted({str(p.get("backend", "sim")) for p in profiles})
        service_name = " vs ".join(str(p.get("name", "?")) for p in profiles)
        claim = (str((spec.get("workload") or {}).get("claim_class", "native-ar")) if kind == "abba"
                 else str(spec.get("sd_claim", "speculative-full-target")))
    else:
        svc = spec.get("service") or {}
        backends, service_name = [str(svc.get("backend", "sim"))], str(svc.get("name", "service"))
        claim = str(spec.get("claim_class", "native-ar"))
    labels = [*run_labels([str(x) for x in spec.get("labels") or []], backends, services), "recovered"]
    protocol_class = str(SPEC_MODELS[kind].model_fields["protocol_class"].default)  # fixed by the kind
    run = RunBlock(campaign=str(spec.get("name", "unknown")), kind=kind, claim_class=claim,
                   protocol_class=protocol_class, backend="+".join(backends),
                   service_name=service_name, created_wall=str(start.get("wall_iso", "")), run_token=writer.token,
                   labels=tuple(labels), error=RECOVERED_ERROR, identity_hash=identity_hash(services),
                   resumed_from=start.get("resumed_from"))
    return finish(writer, workspace, "partial", run)


def recovered_run_block(writer: ArchiveWriter, spec: OneServiceSpec, *, plan_id: str | None = None) -> RunBlock:
    """The run block of a one-service run (sweep, trace replay, SLA search) recovered from its partial:
    its services and failed oracles as the partial recorded them, label ``recovered``, the recovery error."""
    d = writer.dir
    services = list(read_json_or(d, "service.json", {}).get("services", []))
    oracles_failed = sum(1 for r in read_json_or(d, "oracles.json", {}).get("results", []) if not r.get("passed"))
    labels = run_labels(spec.labels, [spec.service.backend], services)
    if oracles_failed:
        labels.append("oracle-failed")
    labels.append("recovered")
    return one_service_run_block(spec, writer.token, str(run_start(read_events(d)).get("wall_iso", "")), services,
                                 labels=labels, error=RECOVERED_ERROR, oracles_failed=oracles_failed,
                                 plan_id=plan_id)
