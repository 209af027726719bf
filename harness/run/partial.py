"""Reading what a killed run left in its ``.partial-*`` directory: the pieces every kind's recovery
reads (edge module: reads the partial's files; imports no kind's runner).

A kind's recovery function (:data:`Recover`, registered in :mod:`harness.run.kinds`, defined beside
the kind's runner) turns a partial without a manifest into an archive of status ``partial`` labelled
``recovered``, under the kind's own kind and protocol class. Here: the readers of a partial's files
(:func:`read_events`, :func:`read_jsonl`, :func:`read_json_or`, :func:`run_start`), the run block of a
recovered one-service run (:func:`recovered_run_block`) and the recovery that keeps a partial's
records without a verdict (:func:`recover_records_only`: ABBA screens, matched runs, a formal matrix
not readable as one).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.errors import ArchiveError
from harness.inputs.spec import SPEC_MODELS, OneServiceSpec
from harness.run.session import one_service_run_block, run_labels
from harness.run.skeleton import Finished, finish
from harness.service.identity.identity import identity_hash
from harness.store.archive import ArchiveWriter, read_json_file
from harness.store.runblock import RunBlock

RECOVERED_ERROR = "dsv4h ended before finalizing this run; recovered from its partial directory"
# (workspace, the reopened partial, its spec.json) -> the finished archive
Recover = Callable[[Path, ArchiveWriter, dict[str, Any]], Finished]


def read_jsonl(directory: Path, name: str) -> list[Any]:
    """Every line of ``directory/name`` that parses as JSON, in order (none when the file is missing; a
    line cut short by a crash is skipped)."""
    path = directory / name
    out: list[Any] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if path.is_file() else []:
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out


def read_events(directory: Path) -> list[dict[str, Any]]:
    """The run's events (``events.jsonl``); a last line cut short by a crash is skipped."""
    return [row for row in read_jsonl(directory, "events.jsonl") if isinstance(row, dict)]


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


def recover_records_only(workspace: Path, writer: ArchiveWriter, spec: dict[str, Any], kind: str, *,
                         roles: tuple[str, str] | None = None, claim: str | None = None) -> Finished:
    """Finalize a partial of ``kind`` with its records and no results or verdict (status ``partial``,
    label ``recovered``, the kind's own protocol class): an ABBA screen, a matched AR/SD run, a formal
    matrix not readable as one of this version. ``roles``: the spec keys of a two-profile kind's
    profiles (its service is both, by name); ``claim``: its claim class (else the spec's)."""
    d = writer.dir
    start = run_start(read_events(d))
    services = list(read_json_or(d, "service.json", {}).get("services", []))
    if roles is not None:
        profiles = [spec.get(roles[0]) or {}, spec.get(roles[1]) or {}]
        backends = sorted({str(p.get("backend", "sim")) for p in profiles})
        service_name = " vs ".join(str(p.get("name", "?")) for p in profiles)
        claim = claim or str(spec.get("claim_class", "native-ar"))
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
