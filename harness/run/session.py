"""What every runner shares while it measures: formal matrices, ABBA screens, rate sweeps, quick
screens (edge module).

- :func:`check_governance`: refuse a closed direction before anything starts;
- :func:`open_writer`: the archive preamble (spec, corpora, environment, governance, run-start);
- :class:`ServiceSession`: start -> verify identity -> sentinels before; sentinels after -> final
  info -> stop (or detach), every service recorded in ``service.json``;
- :func:`record_witness` / memory sampling: what the server said while waves ran (power and
  energy: :mod:`harness.run.energy`);

How a run ends (one critical section: clean up, end events, result tables, finish) is
:func:`harness.run.skeleton.drive`, which every runner calls.

Nothing a run starts outlives it: every service the session starts is tracked from the moment it
exists until it is stopped (:meth:`ServiceSession.stop_all` stops what is left, whatever ended the
run), and stopping a server is a critical section (a second Ctrl-C cannot cut it).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.errors import DsvError, ServiceError
from harness.formats import read_regular
from harness.governance.io import analysis_plan_status, check_direction
from harness.hashing import sha256_bytes
from harness.inputs.spec import ClaimClass, KindSpec, OneServiceSpec, ServiceProfile
from harness.interrupts import critical
from harness.measure import metrics as m
from harness.oracle.model import Oracle
from harness.oracle.sentinels import run_sentinels
from harness.records import RequestRecord
from harness.run.events import Reporter, ServiceReady, ServiceStarting, ServiceStopped
from harness.run.selfcheck import WaveSelfCheck
from harness.run.slurm_script import SCRIPT_ENV
from harness.run.wave import MetricsWitness, witness_summary
from harness.service.devices.memory import MemorySampler
from harness.service.identity.environment import capture_environment, clock_anchor
from harness.service.identity.identity import identity_hash
from harness.service.identity.mapped import HashCache
from harness.service.identity.origin import SIM_LABEL, run_is_simulated
from harness.service.identity.runtime_identity import component_differences
from harness.service.identity.stack import mapped_at_end, stack_at_start, violations
from harness.service.launch.manager import RunningService, start_service, verify_identity
from harness.store.archive import ArchiveWriter, claim_resume
from harness.store.runblock import RunBlock


def check_governance(spec: KindSpec, workspace: Path, source: str,
                     analysis_plan: Path | None = None) -> dict[str, Any]:
    """Refuse a run that tests a closed direction without new evidence (before any service starts);
    returns what is recorded in the archive's ``governance.json`` (direction check, and the
    analysis plan's freeze status when the spec names one)."""
    out: dict[str, Any] = {}
    if spec.direction is not None:
        out["direction"] = check_direction(workspace, spec.direction, spec.reopen.evidence if spec.reopen else None,
                                           spec.reopen.reason if spec.reopen else None, source=source)
    if analysis_plan is not None:
        out["analysis_plan"] = analysis_plan_status(workspace, analysis_plan,
                                                    run_started=clock_anchor()["wall_iso"])
    return out


def open_writer(workspace: Path, token: str, *, spec: KindSpec, spec_bytes: bytes | None,
                corpora: Mapping[str, Any], governance: Mapping[str, Any],
                extra_files: Mapping[str, Any] = {}, resumed_from: str | None = None
                ) -> tuple[ArchiveWriter, dict[str, Any]]:
    """Start a partial archive with the run's preamble; returns the writer and the wall anchor.
    A resumed archive is claimed first (``ArchiveError`` when another run already resumed it)."""
    if resumed_from is not None:
        claim_resume(workspace, resumed_from, token)
    writer = ArchiveWriter(workspace, token=token)
    writer.write_json("spec.json", spec.model_dump(mode="json"))
    if spec_bytes is not None:
        writer.write_bytes("spec.yaml", spec_bytes)
    writer.write_json("corpora.json", dict(corpora))
    writer.write_json("environment.json", capture_environment())
    for name, obj in extra_files.items():
        writer.write_json(name, obj)
    _keep_slurm_script(writer)
    if governance:
        writer.write_json("governance.json", dict(governance))
    anchor = clock_anchor()
    writer.append_event({"event": "run-start", **anchor, "resumed_from": resumed_from})
    return writer, anchor


def _keep_slurm_script(writer: ArchiveWriter) -> None:
    """Inside a job of ``dsv4h campaign submit`` (``$DSV4H_SLURM_SCRIPT`` names the script Slurm runs):
    keep that script as ``slurm-batch.sh`` and the job's ids as ``slurm-job.json`` (run.slurm_script)."""
    script = os.environ.get(SCRIPT_ENV)
    if not script:
        return
    data = read_regular(Path(script), 1 << 20)
    writer.write_bytes("slurm-batch.sh", data)
    writer.write_json("slurm-job.json", {
        "job_id": os.environ.get("SLURM_JOB_ID"), "cluster": os.environ.get("SLURM_CLUSTER_NAME"),
        "partition": os.environ.get("SLURM_JOB_PARTITION"), "nodes": os.environ.get("SLURM_JOB_NODELIST"),
        "script_sha256": sha256_bytes(data)})


_HASHES = HashCache()
"""Mapped files hashed once per process: keyed by device, inode, size and mtime, so a replaced file is
hashed again (harness.service.identity.mapped.HashCache)."""


@dataclass
class _Started:
    svc: RunningService
    index: int  # position in ServiceSession.services


class ServiceSession:
    """Every service one run starts: launch, identity check, sentinels, stop; ``service.json``
    rewritten after each change (with ``service_json_extra()`` merged in)."""

    def __init__(self, writer: ArchiveWriter, workspace: Path, *, claim_class: ClaimClass,
                 sentinels: Sequence[Oracle], reporter: Reporter,
                 services: Sequence[dict[str, Any]] = (),
                 service_json_extra: Callable[[], dict[str, Any]] = dict,
                 request_timeout_s: float | None = None) -> None:
        self.writer = writer
        self.request_timeout_s = request_timeout_s
        self._running: dict[int, RunningService] = {}
        self.workspace = workspace
        self.claim_class = claim_class
        self.sentinels = list(sentinels)
        self.report = reporter
        self.services: list[dict[str, Any]] = list(services)
        self.oracle_results: list[dict[str, Any]] = []
        self.witness = MetricsWitness()
        self.selfcheck = WaveSelfCheck()
        self._extra = service_json_extra
        self._hashes = _HASHES
        self._live: dict[int, _Started] = {}

    @property
    def oracles_failed(self) -> int:
        """How many sentinel checks failed so far."""
        return sum(1 for r in self.oracle_results if not r["passed"])

    def write_service_json(self) -> None:
        """(Re)write ``service.json`` with every service so far."""
        self.writer.write_json("service.json", {"services": self.services} | self._extra())

    def start(self, profile: ServiceProfile, label: str, meta: Mapping[str, Any], *,
              claim_class: ClaimClass | None = None, **report: Any) -> RunningService:
        """Launch (or attach), verify identity under ``claim_class`` (default: the session's; a
        mismatch stops what was started and raises), record it with ``meta`` (e.g. start index, first
        leg), run the sentinels before measurement."""
        self.report(ServiceStarting(profile, leg=report.get("leg")))
        svc = start_service(profile, self.workspace, label=label)
        self._running[id(svc)] = svc
        self.witness = MetricsWitness()
        try:
            verify_identity(svc, claim_class or self.claim_class)
        except BaseException:
            self._running.pop(id(svc), None)
            with critical():
                svc.stop()
            raise
        try:
            self.take_stack(svc)
        except BaseException:
            self._running.pop(id(svc), None)
            with critical():
                svc.stop()
            raise
        self.services.append(svc.identity() | dict(meta))
        self._live[id(svc)] = _Started(svc, len(self.services) - 1)
        self.write_service_json()
        self.writer.append_event({"event": "service-ready", "url": svc.url, "t_ns": time.perf_counter_ns(),
                                  "pid": svc.process.pid if svc.process else None} | dict(report))
        self.report(ServiceReady(svc, leg=report.get("leg")))
        try:
            self.run_sentinels(svc, "before" if not report.get("leg") else f"before {report['leg']}")
        except BaseException:
            self.stop(svc, sentinels=False)
            raise
        return svc

    def take_stack(self, svc: RunningService) -> None:
        """Record what the service serves (model, source trees, mapped libraries, runtime identity:
        ``harness.service.identity.stack``) and refuse it, before any measurement, when its live workers do not
        map what the profile requires (``ServiceError`` naming the PID and the file)."""
        pid = svc.worker_pid
        svc.stack = stack_at_start(svc.profile, pid, self.workspace, svc.identity(), self._hashes)
        bad = violations(svc.profile, svc.stack["mapped"]["at_start"])
        if bad:
            raise ServiceError(f"service {svc.profile.name}: its live workers do not map what the profile "
                               "requires:\n  " + "\n  ".join(bad[:20]),
                               hint="fix the installation (or the profile's require_libraries / library_dirs); "
                               "nothing was measured on this service")

    def run_sentinels(self, svc: RunningService, when: str) -> None:
        """Check every sentinel oracle on ``svc``; results kept in ``oracles.json``."""
        if not self.sentinels:
            return
        idx = self._live[id(svc)].index + 1 if id(svc) in self._live else len(self.services)
        rows = run_sentinels(svc, self.sentinels, when, f"service#{idx}", timeout_s=self.request_timeout_s)
        self.oracle_results.extend(rows)
        self.writer.write_json("oracles.json", {"results": self.oracle_results})

    def stop(self, svc: RunningService, *, sentinels: bool = True) -> None:
        """Sentinels after measurement (``sentinels``) and final server info while it lives, then stop
        the owned tree (an attached server is only detached from). The tree is stopped whatever
        happens before (a failed check, a full disk, another Ctrl-C), as a critical section."""
        try:
            alive = svc.process is None or svc.process.exit_code() is None
            if alive and sentinels:
                self.after_checks(svc)
            if alive and svc.server_info_at_stop is None:
                try:
                    svc.read_final_info()
                except KeyboardInterrupt:  # another Ctrl-C: skip it, stop the server below
                    svc.server_info_at_stop = None
            if alive and svc.stack is not None and svc.stack["mapped"]["at_end"] is None:
                try:
                    pid = svc.worker_pid
                    svc.stack["mapped"]["at_end"] = mapped_at_end(pid, self._hashes)
                except KeyboardInterrupt:  # skip it, stop the server below
                    pass
            started = self._live.pop(id(svc), None)
            if started is not None:
                old = self.services[started.index]
                self.services[started.index] = svc.identity() | {k: v for k, v in old.items()
                                                                 if k in ("start_index", "first_leg")}
            self.write_service_json()
        finally:
            with critical():
                svc.stop()
                self._running.pop(id(svc), None)
        detached = svc.process is None
        self.writer.append_event({"event": "service-detached" if detached else "service-stopped", "url": svc.url,
                                  "t_ns": time.perf_counter_ns()}
                                 | ({"multinode_stop": svc.nodes.stopped} if svc.nodes is not None else {}))
        self.report(ServiceStopped(svc, detached=detached))

    def after_checks(self, svc: RunningService) -> None:
        """Sentinels after measurement and the server's final information, while it lives; a failed
        check is recorded, and a Ctrl-C skips what is left of them (the service is stopped next)."""
        if svc.process is not None and svc.process.exit_code() is not None:
            return
        try:
            self.run_sentinels(svc, "after")
            svc.read_final_info()
        except (DsvError, KeyboardInterrupt) as exc:
            what = "interrupted" if isinstance(exc, KeyboardInterrupt) else exc.message
            self.writer.append_event({"event": "sentinel-error", "error": what})

    def stop_all(self) -> None:
        """Stop every service this session started and has not stopped yet (no sentinels): the
        cleanup that runs however the run ended."""
        for svc in list(self._running.values()):
            try:
                self.stop(svc, sentinels=False)
            except OSError:  # the archive cannot be written (disk full): the server is stopped anyway
                continue

    def record_check(self, wave_id: str, unit: Mapping[str, Any], edges_ns: Sequence[int] = ()) -> None:
        """Append the self-check of the unit just measured (``selfcheck``: its ``take`` with the client
        instants ``edges_ns`` that define the unit's rate) to ``wave_checks.jsonl`` as one row,
        ``{"wave_id": wave_id} | unit | check``; nothing when no check was taken since the last one.
        ``unit`` names the unit (``cell_id``, ``phase``, ``workload``, ``concurrency``; a sweep round
        or replay also its ``round_id``): the evidence rules key the row by ``wave_id``."""
        check = self.selfcheck.take(edges_ns)
        if check is not None:
            self.writer.append_jsonl("wave_checks.jsonl", {"wave_id": wave_id} | dict(unit) | check)

    def record_witness(self, recs: Sequence[RequestRecord], wave_id: str, concurrency: int) -> None:
        """Append what /metrics reported during the wave's resident window to ``server_metrics.jsonl``
        and the client's self-check of the wave (``selfcheck``) to ``wave_checks.jsonl``."""
        r0 = recs[0] if recs else None
        self.record_check(wave_id, {"cell_id": r0.cell_id if r0 else "", "phase": r0.phase if r0 else "",
                                    "workload": r0.workload if r0 else "", "concurrency": concurrency},
                          _rate_edges(recs))
        samples = self.witness.take()
        if not self.witness.available and not samples:
            return
        win = m.resident_window(recs)
        counters = self.witness.take_counters()
        self.writer.append_jsonl("server_metrics.jsonl", witness_summary(
            wave_id, concurrency, win.start_ns, win.end_ns, samples, counters)
            | {"phase": recs[0].phase if recs else ""})


PROFILE_COMPONENTS = ("launch", "served_config", "speculation", "patches")
"""Runtime-identity components that follow from the service profile (argv, environment, the server's
resolved configuration, speculation, the patch series): the profile comparison of ABBA screens and
matched runs already allows or refuses their differences key by key."""


def stack_differences(a: Mapping[str, Any], b: Mapping[str, Any], declared_change: Sequence[str]) -> list[str]:
    """The differences between two running services' stacks (model, source trees, packages, mapped
    libraries: ``harness.service.identity.runtime_identity.component_differences``) that ``declared_change``
    does not declare; an entry ``identity.X`` there declares component (or component entry) ``X``,
    e.g. ``identity.mapped.libccl.so*``. Services without a recorded stack differ in nothing."""
    if not (isinstance(a.get("stack"), Mapping) and isinstance(b.get("stack"), Mapping)):
        return []
    declared = [*PROFILE_COMPONENTS, *(d.removeprefix("identity.") for d in declared_change
                                      if d.startswith("identity."))]
    _, undeclared = component_differences(a, b, declared)
    return undeclared


def spec_counters(writer: ArchiveWriter) -> dict[str, Mapping[str, Any]]:
    """Per wave id, vLLM's speculative counters read before and after the wave (the ``spec_counters``
    that :meth:`ServiceSession.record_witness` stored in ``server_metrics.jsonl``); a line that does
    not parse is skipped (the file is the run's own)."""
    path = writer.dir / "server_metrics.jsonl"
    out: dict[str, Mapping[str, Any]] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if path.is_file() else []:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and isinstance(row.get("spec_counters"), dict):
            out[str(row.get("wave_id"))] = row["spec_counters"]
    return out


def _rate_edges(recs: Sequence[RequestRecord]) -> list[int]:
    """The client instants that define a wave's rate: the resident window's edges (decode) or the
    prefill window's (first send, last first token); none when the wave has no such window."""
    if not recs:
        return []
    win = m.prefill_window(recs) if recs[0].workload == "prefill" else m.resident_window(recs)
    return [win.start_ns, win.end_ns] if win.contributes else []


def run_labels(labels: Sequence[str], backends: Sequence[str], services: Sequence[Mapping[str, Any]]) -> list[str]:
    """The run's labels: the spec's, plus ``simulated`` when a backend is the built-in simulator or
    any server identified itself as the dsv4h simulator (e.g. an attached ``dsv4h sim serve``)."""
    out = list(labels)
    if run_is_simulated(backends, (), services) and SIM_LABEL not in out:
        out.append(SIM_LABEL)
    return out


def start_memory_sampler(profile: ServiceProfile) -> MemorySampler | None:
    """Sample GPU memory every ``memory_sample_interval_s`` while the service runs (GPU backends)."""
    if not profile.checks_gpus:
        return None
    devices = profile.devices
    sampler = MemorySampler(interval_s=devices.memory_sample_interval_s, source=devices.gpu_owners_source)
    sampler.start()
    return sampler


def write_memory(writer: ArchiveWriter, sampler: MemorySampler) -> None:
    """Stop the sampler; store its samples (``memory.parquet``) and their summary ("peak observed
    in samples")."""
    sampler.stop()
    samples = sampler.samples()
    if samples:
        writer.write_table("memory.parquet", sampler.table())
    writer.write_json("memory.json", {
        "summary": [asdict(s) for s in sampler.summary()], "interval_s": sampler.interval_s,
        "errors": sampler.errors[:20], "error_count": sampler.error_count,
        "note": "peak observed in samples, not an allocator peak"})


def one_service_run_block(spec: OneServiceSpec, token: str, created_wall: str, services: Sequence[Mapping[str, Any]],
                          *, labels: Sequence[str], error: str | None, oracles_failed: int,
                          plan_id: str | None = None) -> RunBlock:
    """The run block of a run on one service started once (rate sweeps, trace replays, SLA searches):
    kind and protocol class the spec's, the identity hash of its services."""
    return RunBlock(campaign=spec.name, kind=spec.kind, claim_class=spec.claim_class,
                    protocol_class=spec.protocol_class, backend=spec.service.backend,
                    service_name=spec.service.name, created_wall=created_wall, run_token=token,
                    labels=tuple(labels), error=error, oracles_failed=oracles_failed,
                    identity_hash=identity_hash(list(services)), direction=spec.direction, plan_id=plan_id,
                    service_starts=1)
