"""Every evidence rule: one small archive that triggers it, one that does not."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from testkit import run_block

from harness.evidence import rules as ev
from harness.evidence.findings import ArchiveData
from harness.evidence.io import apply_findings, check_archive
from harness.evidence.rules import check
from harness.records import RequestRecord
from harness.store.archive import ArchiveWriter, open_archive
from harness.store.ledger import ingest_archive, read_table

SVC = {"start_index": 1, "url": "http://127.0.0.1:1", "server_info": {"tp_size": 8, "_source": "/server_info"},
       "profile": {"expect": {"tp_size": 8}}}
CELL = {"cell_id": "decode-c08-x", "round_status": ["ok", "ok", "ok"], "rounds_required": 3}
ROUND = {"round_id": "decode-c08-x.r0", "status": "ok", "workload": "decode", "seconds": 31.0}
WAVE = {"wave_id": "decode-c08-x.r0.w000", "cell_id": "decode-c08-x", "phase": "measured", "workload": "decode",
        "concurrency": 8, "resident_tokens": 8 * 500, "resident_seconds": 12.0, "resident_output_tok_s": 333.0,
        "lag_p50_s": 0.0001, "lag_p99_s": 0.001}
WARM = WAVE | {"wave_id": "decode-c08-x.warmup.w000", "phase": "warmup"}
REQ = {"rid": "q", "wave_id": "decode-c08-x.r0.w000", "phase": "measured", "workload": "decode",
       "cached_tokens": 0, "ok": True, "error": None, "round_index": 0}

CLEAN = ArchiveData(
    extra={"server_metrics": [{"wave_id": "decode-c08-x.r0.w000", "phase": "measured", "concurrency": 8,
                               "samples_in_window": 10, "running_min_in_window": 8.0}]},
    archive_id="a1", run={"protocol_class": "formal", "claim_class": "native-ar", "backend": "sglang",
                          "labels": [], "service_starts": 1},
    spec={"decode": {"min_resident_seconds": 30}, "oracles": ["france"]},
    cells=[CELL], rounds=[ROUND], waves=[WAVE, WARM], requests=[REQ], services=[SVC],
    oracles=[{"oracle": "france", "service": "s", "passed": True}],
)


def rules_hit(d: ArchiveData, severity: str | None = None) -> set[str]:
    return {f.rule for f in check(d) if severity is None or f.severity == severity}


def test_clean_archive_has_no_findings() -> None:
    assert check(CLEAN) == []


@pytest.mark.parametrize(("rule", "bad", "severity"), [
    ("formal-rounds", replace(CLEAN, cells=[CELL | {"round_status": ["ok", "ok", "failed"]}],
                              rounds=[ROUND | {"status": "failed"}]), "blocking"),
    ("resident-short", replace(CLEAN, rounds=[ROUND | {"seconds": 12.0}]), "blocking"),
    ("resident-short", replace(CLEAN, waves=[WAVE | {"resident_tokens": 8 * 5}, WARM]), "warning"),
    ("prefill-cached", replace(CLEAN, requests=[REQ | {"workload": "prefill", "cached_tokens": 128}]), "blocking"),
    ("prefill-cached", replace(CLEAN, requests=[REQ | {"workload": "prefill", "cached_tokens": None}]), "warning"),
    ("warmup-in-measured", replace(CLEAN, requests=[REQ | {"phase": "warmup"}]), "blocking"),
    ("warmup-in-measured", replace(CLEAN, waves=[WAVE]), "warning"),
    ("identity-unverified", replace(CLEAN, services=[SVC | {"server_info": {}}]), "blocking"),
    ("identity-unverified", replace(CLEAN, services=[SVC | {"server_info": {"tp_size": 4}}]), "blocking"),
    # the sectioned profile of an archive of format 4 (SVC's is the flat one of format 1-3)
    ("identity-unverified", replace(CLEAN, services=[SVC | {"server_info": {"tp_size": 4},
                                                            "profile": {"identity": {"expect": {"tp_size": 8}}}}]),
     "blocking"),
    ("speculative-native", replace(CLEAN, services=[SVC | {"server_info": {"tp_size": 8,
                                                                         "speculative_algorithm": "EAGLE"}}]),
     "blocking"),
    ("simulated-context", replace(CLEAN, services=[SVC | {"server_info": {"tp_size": 8, "version": "sim-0.1.0"}}]),
     "blocking"),
    ("abba-drift", replace(CLEAN, comparison={"result": {"change_pct": 1.0, "drift_pct": -2.0, "spread_pct": 0.1}}),
     "warning"),
    ("failed-requests", replace(CLEAN, requests=[REQ | {"ok": False, "error": "http 500"}]), "blocking"),
    ("client-lag", replace(CLEAN, waves=[WAVE | {"lag_p99_s": 0.02}, WARM]), "warning"),
    ("oracle", replace(CLEAN, oracles=[{"oracle": "france", "service": "s", "passed": False,
                                        "first_divergence": 3}]), "blocking"),
    ("oracle", replace(CLEAN, oracles=None), "blocking"),
    ("service-restarts", replace(CLEAN, run=CLEAN.run | {"service_starts": 2}), "warning"),
])
def test_rule_triggers(rule: str, bad: ArchiveData, severity: str) -> None:
    found = [f for f in check(bad) if f.rule == rule]
    assert found, f"{rule} did not trigger"
    assert any(f.severity == severity for f in found)
    assert all(f.remedy for f in found)


def test_rules_that_do_not_trigger_on_their_neighbours() -> None:
    # a declared candidate effect larger than drift: no abba finding
    ok_abba = replace(CLEAN, comparison={"result": {"change_pct": 10.0, "drift_pct": -0.5, "spread_pct": 0.2}})
    assert "abba-drift" not in rules_hit(ok_abba)
    # simulated data properly labelled
    sim = replace(CLEAN, run=CLEAN.run | {"backend": "sim", "labels": ["simulated"]},
                  services=[SVC | {"server_info": {"tp_size": 8, "version": "sim-0.1.0"}}])
    assert "simulated-context" not in rules_hit(sim)
    # speculative algorithm under a speculative claim is fine
    spec = replace(CLEAN, run=CLEAN.run | {"claim_class": "speculative-full-target"},
                   services=[SVC | {"server_info": {"tp_size": 8, "speculative_algorithm": "EAGLE"}}])
    assert "speculative-native" not in rules_hit(spec)
    # screens are not formal: no formal-rounds / restart findings
    screen = replace(CLEAN, run=CLEAN.run | {"protocol_class": "abba-screen", "service_starts": 4},
                     cells=[CELL | {"round_status": []}])
    assert not rules_hit(screen) & {"formal-rounds", "service-restarts", "resident-short"}
    # no oracle declared and none ran: only an info finding
    none = replace(CLEAN, spec={"decode": {"min_resident_seconds": 30}}, oracles=None)
    assert rules_hit(none, "blocking") == set() and "oracle" in rules_hit(none, "info")


def test_findings_are_deterministic_and_cite_rows() -> None:
    bad = replace(CLEAN, requests=[REQ | {"ok": False, "error": "x", "wave_id": "w2"},
                                   REQ | {"ok": False, "error": "y", "wave_id": "w1"}])
    a, b = check(bad), check(bad)
    assert a == b
    f = next(f for f in a if f.rule == "failed-requests")
    assert f.rows == ("w1", "w2")


def test_blocking_findings_mark_ledger_rows_invalid(tmp_path: Path) -> None:
    w = ArchiveWriter(tmp_path)
    w.write_json("spec.json", {"decode": {"min_resident_seconds": 0}})
    w.write_json("service.json", {"services": [SVC]})
    w.write_wave([RequestRecord(rid="r", send_ns=0, done_ns=9, event_ns=np.array([1, 2]), event_tokens=np.array([1, 2]),
                                wave_id="decode-c08-x.r0.w000", cell_id="decode-c08-x", round_index=0,
                                error="http 500")])
    w.write_table("waves.parquet", pa.Table.from_pylist([WAVE, WARM]))
    w.write_table("cells.parquet", pa.Table.from_pylist([CELL]))
    path = w.finalize(status="failed", run=run_block(protocol_class="formal", claim_class="native-ar",
                                                      backend="sglang", labels=[]))
    a = open_archive(path)
    ingest_archive(tmp_path, a)
    findings = check_archive(a)
    assert "failed-requests" in {f.rule for f in findings}
    changed = apply_findings(tmp_path, a.archive_id, findings)
    assert changed.get("waves") == 1
    waves = read_table(tmp_path, "waves")
    assert waves is not None
    valid = dict(zip(waves.column("wave_id").to_pylist(), waves.column("valid").to_pylist(), strict=True))
    assert valid == {"decode-c08-x.r0.w000": False, "decode-c08-x.warmup.w000": True}
    stored = read_table(tmp_path, "findings")
    assert stored is not None and "failed-requests" in stored.column("rule").to_pylist()
    # re-applying is idempotent
    apply_findings(tmp_path, a.archive_id, findings)
    stored2 = read_table(tmp_path, "findings")
    assert stored2 is not None and stored2.num_rows == stored.num_rows


def test_rule_registry_complete() -> None:
    assert len(ev.RULES) == len(set(ev.RULES)) == 35  # issue 37 added reported-counts
    # every rule id the rules emit is documented in the module docstring
    documented = {line.split()[0] for line in (ev.__doc__ or "").splitlines() if line.startswith("  ") and
                  not line.startswith("   ")}
    assert {"warmup-failed", "client-bound", "sim-lateness", "concurrency-witness", "sla-not-converged",
            "sla-probe-invalid", "sla-not-monotone"} <= documented


def test_concurrency_witness_rule() -> None:
    seen = {"wave_id": WAVE["wave_id"], "phase": "measured", "concurrency": 8, "samples_in_window": 40,
            "running_min_in_window": 8.0}
    ok = replace(CLEAN, extra={"server_metrics": [seen]})
    assert "concurrency-witness" not in rules_hit(ok)
    bad = replace(CLEAN, extra={"server_metrics": [seen | {"running_min_in_window": 5.0}]})
    f = next(f for f in check(bad) if f.rule == "concurrency-witness")
    assert f.severity == "warning" and f.rows == (WAVE["wave_id"],)
    unseen = replace(CLEAN, extra={"server_metrics": []})
    assert "concurrency-witness" in rules_hit(unseen, "info")


def test_the_rules_read_the_archives_spec_beside_the_requests_reported_counts(tmp_path: Path) -> None:
    # the reported spec_* counts joined onto each request row once shadowed the spec document, so every
    # rule reading d.spec (resident-short's minimum, among others) read one record's counts instead
    from testkit import quick_decode_run

    from harness.evidence.io import archive_data

    out, _ = quick_decode_run(tmp_path, "spec-beside", 1)
    d = archive_data(out.archive)
    assert d.spec == out.archive.json("spec.json") and d.spec.get("decode") is not None
    assert d.requests and all("spec_steps" in r for r in d.requests)
