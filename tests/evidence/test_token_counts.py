"""The token-count rules: approximate counting is said once; a chunk count that disagrees with the
server's final usage is a warning on the waves it touched; exact counts raise nothing."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from test_evidence import CLEAN, REQ, rules_hit

from harness.evidence.rules import check


def with_requests(*reqs: dict[str, Any]) -> Any:
    return replace(CLEAN, requests=list(reqs))


def test_exact_counts_raise_nothing() -> None:
    d = with_requests(REQ | {"count_method": "server-cumulative", "completion_tokens": 9, "n_tokens": 9},
                      REQ | {"rid": "u", "count_method": "usage-per-chunk", "completion_tokens": 4, "n_tokens": 4})
    assert not {"token-counts", "token-count-mismatch"} & rules_hit(d)
    assert not {"token-counts"} & rules_hit(CLEAN)  # archives before record schema 3 say nothing


def test_reconciled_chunks_are_approximate_info_only() -> None:
    d = with_requests(REQ | {"count_method": "chunks-reconciled", "completion_tokens": 64, "n_tokens": 64})
    found = [f for f in check(d) if f.rule.startswith("token-")]
    assert [(f.rule, f.severity, f.scope) for f in found] == [("token-counts", "info", "run")]
    assert "chunks-reconciled" in found[0].message


def test_mismatch_is_a_warning_on_its_waves() -> None:
    d = with_requests(REQ | {"count_method": "chunks", "completion_tokens": 64, "n_tokens": 96},
                      REQ | {"rid": "ok", "wave_id": "other", "count_method": "chunks", "completion_tokens": 8,
                             "n_tokens": 8})
    (mis,) = [f for f in check(d) if f.rule == "token-count-mismatch"]
    assert mis.severity == "warning" and mis.rows == ("decode-c08-x.r0.w000",)
    assert "counted 96 output tokens" in mis.message and "says 64" in mis.message
