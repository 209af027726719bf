"""The SLA-search rules (harness.evidence.rules.sla) on hand-built archive data."""

from __future__ import annotations

from typing import Any

from harness.evidence.findings import ArchiveData
from harness.evidence.rules import check, rule_sla_not_converged, rule_sla_not_monotone, rule_sla_probe_invalid


def data(sla: dict[str, Any] | None, rounds: list[dict[str, Any]] | None = None,
         protocol: str = "sla-search") -> ArchiveData:
    return ArchiveData("a1", {"protocol_class": protocol}, {"schedule_tolerance_ms": 50.0}, rounds=rounds or [],
                       extra={"sla": sla})


def doc(end: str, converged: bool, width: float | None, monotone: bool = True) -> dict[str, Any]:
    return {"end": end, "converged": converged, "width": width, "n_probes": 3,
            "settings": {"precision": 0.5, "relative": False},
            "bracket": {"highest_passing_req_s": 2.0, "lowest_failing_req_s": 4.0, "monotone": monotone}}


def rnd(rid: str, status: str = "ok", kept: bool = True) -> dict[str, Any]:
    cell, k = rid.split(".r", maxsplit=1)
    return {"round_id": rid, "cell_id": cell, "arrival_rate_req_s": float(cell[len("sweep-"):-len("rps")]),
            "round_index": int(k), "status": status, "client_schedule_kept": kept,
            "client_lag_p99_s": 0.012 if kept else 0.25}


def test_not_converged_only_when_the_search_stopped_short() -> None:
    assert rule_sla_not_converged(data(doc("converged", True, 0.4))) == []
    assert rule_sla_not_converged(data(doc("max-rate-passed", False, None))) == []
    [f] = rule_sla_not_converged(data(doc("probe-cap", False, 2.0)))
    assert (f.rule, f.severity, f.scope) == ("sla-not-converged", "warning", "run")
    assert "probe-cap" in f.message and "2 req/s wide" in f.message and "precision 0.5 req/s" in f.message
    [g] = rule_sla_not_converged(data(doc("interrupted", False, None)))
    assert "unbounded" in g.message
    assert "sla-not-converged" not in {f.rule for f in check(data(doc("probe-cap", False, 2.0), protocol="rate-sweep"))}


def test_probe_invalid_for_a_round_not_ok_or_a_schedule_not_kept() -> None:
    got = rule_sla_probe_invalid(data(doc("converged", True, 0.4), [
        rnd("sweep-2rps.r0"), rnd("sweep-4rps.r0", status="failed"), rnd("sweep-8rps.r0", kept=False)]))
    assert [(f.rule, f.severity, f.rows) for f in got] == [
        ("sla-probe-invalid", "blocking", ("sweep-4rps.m0", "sweep-4rps.r0")),
        ("sla-probe-invalid", "blocking", ("sweep-8rps.m0", "sweep-8rps.r0"))]
    assert "round status failed" in got[0].message and "250.0 ms over the tolerance 50 ms" in got[1].message


def test_not_monotone_and_registered() -> None:
    assert rule_sla_not_monotone(data(doc("converged", True, 0.4))) == []
    found = check(data(doc("probe-cap", False, 2.0, monotone=False), [rnd("sweep-4rps.r0", status="failed")]))
    assert {f.rule for f in found} >= {"sla-not-converged", "sla-not-monotone", "sla-probe-invalid"}


def test_not_converged_when_the_result_was_withheld_for_load() -> None:
    why = "the probe at 6 req/s was invalid for load in all 3 measurement(s)"
    [f] = rule_sla_not_converged(data(doc("invalid-load", False, None) | {"withheld": why}))
    assert (f.rule, f.severity, f.scope) == ("sla-not-converged", "warning", "run")
    assert f.message.startswith(f"the search's result is withheld (end invalid-load): {why};")
    assert "search.max_remeasure" in f.remedy


def test_probe_invalid_says_when_the_rate_was_measured_again() -> None:
    probes = [{"arrival_rate_req_s": 8.0, "passed": None}, {"arrival_rate_req_s": 8.0, "passed": True},
              {"arrival_rate_req_s": 4.0, "passed": None}]
    got = rule_sla_probe_invalid(data(doc("invalid-load", False, None) | {"probes": probes}, [
        rnd("sweep-8rps.r0", kept=False) | {"arrival_rate_req_s": 8.0}, rnd("sweep-4rps.r0", kept=False)]))
    assert [f.rows for f in got] == [("sweep-8rps.m0", "sweep-8rps.r0"), ("sweep-4rps.m0", "sweep-4rps.r0")]
    assert got[0].message.endswith("(the search measured this rate again and counted only a valid measurement)")
    assert got[1].message.endswith("is not a measurement of its planned rate")
