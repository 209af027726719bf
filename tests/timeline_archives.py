"""A small finalized formal-matrix archive with raw records, for the wave-timeline tests.

Two decode cells (C2, C3), each with one warmup wave and two measured waves of one round; every
request sends 10 ms after the previous one of its wave, streams one token per event every 50 ms
(8 tokens) and ends 10 ms after its last event. In the first measured wave of ``decode-c02`` the
second request fails (``http 500`` after 2 tokens).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from testkit import run_block

from harness.measure.results import CampaignResults, RoundResult, cell_result, results_json
from harness.records import RequestRecord
from harness.store.archive import Archive, ArchiveWriter, open_archive

MS = 1_000_000
TIERS = (2, 3)
FAILED_WAVE = "decode-c02.r0.w0"


def _wave(cell: str, c: int, wave_id: str, phase: str, start_ns: int) -> list[RequestRecord]:
    out = []
    for k in range(c):
        send = start_ns + 10 * MS * k
        n = 8
        error = None
        if wave_id == FAILED_WAVE and k == 1:
            n, error = 2, "http 500"
        events = [send + 100 * MS + 50 * MS * j for j in range(n)]
        out.append(RequestRecord(rid=f"{wave_id}.q{k}", send_ns=send, done_ns=events[-1] + 10 * MS,
                                 event_ns=np.array(events, dtype=np.int64),
                                 event_tokens=np.arange(1, n + 1, dtype=np.int32), error=error,
                                 run_id="timeline-test", cell_id=cell, round_index=-1 if phase == "warmup" else 0,
                                 wave_id=wave_id, wave_index=0, phase=phase, workload="decode", case_id=f"case-{k}",
                                 concurrency=c))
    return out


def write_timeline_archive(workspace: Path, *, campaign: str = "timeline-matrix") -> Archive:
    """The archive described in the module docstring (simulated backend, status complete)."""
    w = ArchiveWriter(workspace)
    t = 5_000 * MS
    rounds = []
    for c in TIERS:
        cid = f"decode-c{c:02d}"
        for wid, phase in ((f"{cid}.warmup.w0", "warmup"), (f"{cid}.r0.w0", "measured"), (f"{cid}.r0.w1", "measured")):
            w.write_wave(_wave(cid, c, wid, phase, t))
            t += 2_000 * MS
        rounds.append(RoundResult(round_id=f"{cid}.r0", cell_id=cid, round_index=0, workload="decode", concurrency=c,
                                  status="ok", n_waves=2, n_requests=2 * c, n_failed=0, rate_tok_s=40.0 * c,
                                  tokens=100, seconds=2.5, http_output_tok_s=30.0 * c, http_tokens=16 * c,
                                  http_seconds=0.5, cache_violations=0))
    cells = tuple(cell_result(r.cell_id, "decode", r.concurrency, [r], 1) for r in rounds)
    w.write_json("results.json", results_json(CampaignResults(waves=(), rounds=tuple(rounds), cells=cells)))
    w.write_json("spec.json", {"name": campaign, "kind": "formal-matrix", "claim_class": "native-ar",
                               "protocol_class": "formal", "decode": {"tiers": list(TIERS), "rounds": 1}})
    block = run_block(campaign=campaign, labels=["simulated", "synthetic"], run_token="timeline")
    return open_archive(w.finalize(status="complete", run=block))
