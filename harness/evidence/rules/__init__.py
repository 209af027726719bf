"""Evidence rules as findings (pure): inspect an archive's content and say what is wrong.

Each rule returns ``Finding``s with a rule id, a severity (``blocking`` findings make the affected
ledger rows ``valid = false``), a message, a remedy and the ids of the rows it is about. Rules read
plain data (``ArchiveData``), so tests build small archives by hand. Findings are deterministic:
sorted by rule, severity, rows, message.

One module per family registers its rules with ``@rule(ID, ..., kinds=...)`` (:mod:`._registry`):
:mod:`.formal` (formal matrices), :mod:`.waves` (measured waves), :mod:`.instruments` (client and
simulator), :mod:`.identity` (what served the run), :mod:`.claims` (claim class against the served
speculation), :mod:`.abba`, :mod:`.sweep`, :mod:`.provenance`, :mod:`.speculative`, :mod:`.cold`,
:mod:`.replay`, :mod:`.sla`, :mod:`.reported` (counts a server reports, checked as claims). :func:`check`
runs each registered rule only on archives of the kinds it declares (:func:`archive_kind`: the run's
``kind``, else its protocol class's kind); ``REGISTRY`` lists the registrations (function, ids, kinds) by
family in ``FAMILIES`` order, ``RULES`` their functions.
docs/evidence-rules.md's rule id table says, per id, the kinds it applies to.

Rule ids (docs/evidence-rules.md#rule-ids and the record notes):
  formal-rounds        formal cell with fewer than its required ok rounds, or a round not ok
  resident-short       round whose resident windows are shorter than the spec minimum or too few steps
  prefill-cached       prefill request served from the prefix cache (cached_tokens > 0) or unverified
  warmup-in-measured   warmup requests inside measured waves, or a measured wave on a cold shape
  identity-unverified  the server's own configuration was not read, or differs from the profile
  speculative-native   a speculative algorithm is active under a native-ar claim
  claim-vs-server      a speculative claim on a server that does not speculate, or a full-target claim
                       on a server that relaxes verification (claims.py)
  simulated-context    simulator data not labelled simulated
  abba-drift           an ABBA screen whose drift or spread is not smaller than its effect
  failed-requests      failed requests inside a measured wave
  client-lag           client receive lag large enough that the client may have limited the rate
  oracle               oracle sentinel missing or failed
  service-restarts     a formal matrix measured on more than one service start
  concurrency-witness  the server's /metrics did not show C requests running during a resident window
                       (away from its edges: receive lag and one decode step are allowed at each edge)
  warmup-failed        failed requests in warmup waves (blocking when no warmup wave of a cell was clean)
  client-bound         the harness's own event loop was late or saturated during a measured wave (any server)
  client-stalled       the client stalled (loop delay, a loop that ran nothing, or a silent load worker)
                       for longer than the unit's own step scale allows (a sweep/SLA round or a replay:
                       1 s): the unit is invalid
  sim-lateness         the simulator fell behind its model (late steps) during a measured unit, judged per
                       unit for every kind from its wave_checks.jsonl row: a formal/ABBA/matched wave
                       (window: resident or prefill), a sweep or SLA-search round (window: its duration_s;
                       named with its round and cell), a trace replay (window: its duration_s; scope run).
                       From 1% of its window lost the unit and what is built from it are invalid; the
                       run-level warning only for archives without per-unit counters
  sweep-schedule       a rate-sweep round whose client could not keep the planned arrival schedule (sweep.py)
  sweep-rounds         a rate cell with missing or failed rounds
  sweep-saturated      a rate with an over-saturated round (in flight and TTFT kept rising; docs/saturation.md)
  external-claim       an imported peer result: the peer's own numbers, not a measurement (provenance.py)
  token-counts         output tokens counted approximately (no exact per-chunk counts from the server)
  token-count-mismatch a per-chunk count that disagrees with the server's final usage
  sd-reconcile         a matched AR/SD run whose C*a/T_SD disagrees with its resident rate (speculative.py)
  sd-outputs           a full-target matched run whose greedy outputs differ from the AR legs'
  acceptance-sources   a wave whose speculative counts differ between the requests and the /metrics deltas
  reported-counts      a measured request or wave whose reported counts contradict each other or the stream
                       (reported.py, harness.measure.claims): the counts are not used
  mapped-libraries     live workers that, before the service stopped, no longer mapped what the profile requires
  cold-in-measured-wave a measured wave holding a cold or restarted request (first of its shape on its
                       service start; cold.py, docs/coldness.md)
  replay-schedule      a trace replay with a request sent later than its tolerance after its trace time
                       (replay.py, docs/replay.md)
  replay-cache         a trace replay whose reported cached tokens differ from those the trace implies
  replay-saturated     a trace replay during which in flight and TTFT kept rising (the server fell behind)
  sla-not-converged    an SLA search ended with a bracket wider than its precision (sla.py)
  sla-probe-invalid    an SLA-search probe whose rounds were not ok, whose schedule was not kept, or with a
                       blocking sim-lateness or client-stalled round
  sla-not-monotone     an SLA search in which a rate passed above a failing one

Findings about a service or the whole run (identity, claim class, simulator labelling, oracles)
have ``scope = "run"``: when blocking they invalidate every ledger row of the archive. Row findings
name wave, round or cell ids; rules about cells consider only cells that ran (have waves).
"""

from __future__ import annotations

import importlib
import pkgutil

from harness.evidence.findings import ArchiveData, Finding
from harness.evidence.rules import (
    abba,
    claims,
    cold,
    formal,
    identity,
    instruments,
    provenance,
    replay,
    reported,
    sla,
    speculative,
    sweep,
    waves,
)
from harness.evidence.rules._registry import (
    ALL,
    KIND_PROTOCOLS,
    AllKinds,
    KindName,
    Kinds,
    Rule,
    RuleFn,
    applicable,
    archive_kind,
    registered,
    rule,
)
from harness.evidence.rules.abba import rule_abba_drift
from harness.evidence.rules.claims import rule_claim_vs_server, rule_mapped_libraries, rule_speculative_native
from harness.evidence.rules.cold import rule_cold_in_measured
from harness.evidence.rules.formal import rule_formal_rounds, rule_resident_short, rule_service_restarts
from harness.evidence.rules.identity import rule_identity, rule_oracle, rule_simulated_context
from harness.evidence.rules.instruments import (
    rule_client_bound,
    rule_client_lag,
    rule_client_stalled,
    rule_sim_lateness,
)
from harness.evidence.rules.provenance import rule_external_claim, rule_token_counts
from harness.evidence.rules.replay import rule_replay_cache, rule_replay_saturated, rule_replay_schedule
from harness.evidence.rules.reported import rule_reported_counts
from harness.evidence.rules.sla import rule_sla_not_converged, rule_sla_not_monotone, rule_sla_probe_invalid
from harness.evidence.rules.speculative import rule_acceptance_sources, rule_sd_outputs, rule_sd_reconcile
from harness.evidence.rules.sweep import rule_sweep_rounds, rule_sweep_saturated, rule_sweep_schedule
from harness.evidence.rules.waves import (
    rule_concurrency_witness,
    rule_failed_requests,
    rule_prefill_cached,
    rule_warmup_failed,
    rule_warmup_in_measured,
)

_ORDERED = (formal, waves, instruments, identity, claims, abba, sweep, provenance, speculative, cold, replay, sla,
            reported)
FAMILIES = (*_ORDERED, *(importlib.import_module(f"{__name__}.{m.name}") for m in sorted(
    pkgutil.iter_modules(__path__), key=lambda m: m.name)
    if not m.name.startswith("_") and f"{__name__}.{m.name}" not in {f.__name__ for f in _ORDERED}))
"""Every family module, in the order of ``REGISTRY``: the families above, then any other module of this
package (a new kind's rules are its own new module here: discovered, imported for its registrations)."""

REGISTRY: tuple[Rule, ...] = tuple(sorted(registered(), key=lambda r: [m.__name__ for m in FAMILIES].index(
    r.fn.__module__)))
"""Every registered rule (function, rule ids, kinds): by family in ``FAMILIES`` order, then in definition
order within its module (a stable sort of the registrations, whatever order the modules were imported in)."""

RULES: tuple[RuleFn, ...] = tuple(r.fn for r in REGISTRY)
"""The rule functions, in registration order."""


def check(d: ArchiveData) -> list[Finding]:
    """Every rule that applies to the archive's kind (:func:`archive_kind`) over its data, sorted (rule,
    severity, rows, message)."""
    out: list[Finding] = []
    for r in applicable(REGISTRY, d):
        out.extend(r.fn(d))
    return sorted(out, key=lambda f: (f.rule, f.severity, f.rows, f.message))


__all__ = [
    "ALL", "FAMILIES", "KIND_PROTOCOLS", "REGISTRY", "RULES", "AllKinds", "KindName", "Kinds", "Rule", "RuleFn",
    "archive_kind", "check", "rule",
    "rule_abba_drift", "rule_acceptance_sources", "rule_claim_vs_server", "rule_client_bound", "rule_client_lag",
    "rule_client_stalled", "rule_cold_in_measured", "rule_concurrency_witness", "rule_external_claim",
    "rule_failed_requests", "rule_formal_rounds", "rule_identity", "rule_mapped_libraries", "rule_oracle",
    "rule_prefill_cached", "rule_replay_cache", "rule_replay_saturated", "rule_replay_schedule",
    "rule_reported_counts", "rule_resident_short", "rule_sd_outputs", "rule_sd_reconcile", "rule_service_restarts",
    "rule_sim_lateness",
    "rule_simulated_context", "rule_sla_not_converged", "rule_sla_not_monotone", "rule_sla_probe_invalid",
    "rule_speculative_native", "rule_sweep_rounds", "rule_sweep_saturated", "rule_sweep_schedule",
    "rule_token_counts", "rule_warmup_failed", "rule_warmup_in_measured",
]
