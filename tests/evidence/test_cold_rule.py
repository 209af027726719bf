"""The ``cold-in-measured-wave`` rule (harness.evidence.rules.cold) on hand-built archive data."""

from __future__ import annotations

from typing import Any

from harness.evidence.findings import ArchiveData
from harness.evidence.rules import check, rule_cold_in_measured
from harness.evidence.rules.cold import RULE


def data(waves: list[dict[str, Any]] | None) -> ArchiveData:
    extra = {"coldness": {"waves": waves}} if waves is not None else {}
    return ArchiveData("a1", {"protocol_class": "formal"}, {}, extra=extra)


def wave(wid: str, phase: str, workload: str, cold: int = 1, restarted: int = 0) -> dict[str, Any]:
    return {"wave_id": wid, "cell_id": wid.split(".", maxsplit=1)[0], "phase": phase, "workload": workload,
            "cold": cold, "restarted": restarted}


def test_no_coldness_file_or_only_warmups_no_finding() -> None:
    assert rule_cold_in_measured(data(None)) == []
    assert rule_cold_in_measured(data([wave("d.warmup1.w000", "warmup", "decode")])) == []


def test_cold_decode_wave_warns_and_cold_prefill_wave_blocks() -> None:
    got = rule_cold_in_measured(data([
        wave("d.warmup1.w000", "warmup", "decode"), wave("d.r0.w000", "measured", "decode", cold=1),
        wave("d.r1.w000", "measured", "decode", cold=0, restarted=2), wave("p.r0.w000", "measured", "prefill")]))
    assert [(f.rule, f.severity, f.rows) for f in got] == [
        (RULE, "blocking", ("p.r0.w000",)), (RULE, "warning", ("d.r0.w000", "d.r1.w000"))]
    assert got[0].message.startswith("1 cold request(s) in 1 measured wave(s) (e.g. p.r0.w000)")
    assert got[1].message.startswith("1 cold and 2 restarted request(s) in 2 measured wave(s)")


def test_registered() -> None:
    found = check(data([wave("d.r0.w000", "measured", "decode")]))
    assert [f.rule for f in found if f.rule == RULE] == [RULE]
