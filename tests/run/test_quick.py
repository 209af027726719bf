"""Quick screens (harness.run.quick): URL checks, the closed loop's bound, recovery of a killed screen
and the hashing of its frozen prompts."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from sim_helpers import run, serving

from harness.errors import ArchiveError, SpecError
from harness.inputs.corpus.random_ids import RandomPrompts, draw
from harness.load.driver import LoadClient, WaveRequest
from harness.records import RequestRecord
from harness.run.quick import DEFAULT_URL, check_url, closed_loop, detect
from harness.run.recover import recover_partial
from harness.store.archive import ArchiveWriter, open_verified, verify_archive
from harness.store.ledger import read_table


def test_check_url() -> None:
    assert check_url(DEFAULT_URL) == "http://127.0.0.1:30000"
    assert check_url(" http://10.0.0.5:8000/ ") == "http://10.0.0.5:8000"
    assert check_url("https://example.test/prefix") == "https://example.test/prefix"
    for bad in ("127.0.0.1:30000", "ftp://127.0.0.1", "http://", "http://h:1/?a=b", "http://u:p@h:1", "http://h#x"):
        with pytest.raises(SpecError, match="--url"):
            check_url(bad)


def _max_overlap(spans: list[tuple[int, int]]) -> int:
    edges = sorted([(s, 1) for s, _ in spans] + [(d, -1) for _, d in spans], key=lambda e: (e[0], e[1]))
    live = best = 0
    for _, step in edges:
        live += step
        best = max(best, live)
    return best


def test_closed_loop_keeps_at_most_c_in_flight_and_detects_the_simulator() -> None:
    async def main() -> tuple[list[RequestRecord], str, bool]:
        async with serving() as (server, _session):
            url = server.url
            detected = await asyncio.to_thread(detect, url, "auto")
            reqs = [WaveRequest(input_ids=ids, max_new_tokens=n, rid=f"q{i}", ignore_eos=True)
                    for i, (ids, n) in enumerate(draw(RandomPrompts(10, 16, 8, seed=1)))]
            async with LoadClient(url, protocol="sglang", concurrency=3) as client:
                recs = await closed_loop(client, reqs, 3)
            return recs, detected.protocol, detected.simulated

    recs, protocol, simulated = run(main())
    assert protocol == "sglang" and simulated
    assert [r.rid for r in recs] == [f"q{i}" for i in range(10)]
    assert all(r.ok and r.n_tokens == 8 for r in recs)
    spans = [(r.send_ns, r.done_ns) for r in recs]
    assert _max_overlap(spans) == 3


def test_a_killed_quick_screen_is_recovered_as_quick_bench(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    w = ArchiveWriter(ws, token="killedquick")
    w.write_json("spec.json", {"kind": "quick-bench", "name": "qb", "url": "http://127.0.0.1:1",
                               "claim_class": "native-ar"})
    w.write_json("service.json", {"services": [{"url": "http://127.0.0.1:1",
                                                "server_info": {"dsv4h_simulator": {"profile": "fast"}}}]})
    w.append_event({"event": "run-start", "wall_iso": "2026-12-02T00:00:00+0000", "wall_ns": 1, "perf_counter_ns": 1})
    w.close()
    got = recover_partial(ws, w.dir)
    run_block = got.done.archive.run
    assert (run_block.kind, run_block.protocol_class) == ("quick-bench", "quick-bench")
    assert set(run_block.labels) == {"simulated", "recovered"}
    runs = read_table(ws, "runs")
    assert runs is not None and runs.column("protocol_class").to_pylist() == ["quick-bench"]


def test_a_nested_manifest_is_hashed_like_every_file(tmp_path: Path) -> None:
    w = ArchiveWriter(tmp_path, token="nested")
    (w.dir / "prompts").mkdir()
    (w.dir / "prompts" / "manifest.json").write_text('{"a": 1}\n')
    from testkit import run_block

    path = w.finalize(status="complete", run=run_block())
    assert "prompts/manifest.json" in json.loads((path / "manifest.json").read_text())["files"]
    assert verify_archive(path) == []
    (path / "prompts" / "manifest.json").write_text('{"a": 2}\n')
    assert any("changed: prompts/manifest.json" in p for p in verify_archive(path))
    with pytest.raises(ArchiveError, match=r"prompts/manifest\.json"):
        open_verified(path)
