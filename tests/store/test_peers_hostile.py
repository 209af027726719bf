"""Peer import as a total function (issue 23, seen 6 and 7; build 4 and 6): every hostile result file
is refused with one ``error:`` line naming the file, the field and the reason; nothing is written;
a failed or killed import leaves nothing that recovery could label a measurement."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from testkit import run_cli

from harness.errors import ArchiveError
from harness.interrupts import set_fault_hook
from harness.run.recover import recover_workspace
from harness.store.archive import iter_archives
from harness.store.ledger import read_table
from harness.store.peers import IMPORT_MARKER, import_peer
from harness.store.peers.docs import MAX_LENGTH

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "peers"
SGLANG = FIX / "sglang-bench-0.5.23.jsonl"
VLLM = FIX / "vllm-bench-0.32.0.json"
GUIDELLM = FIX / "guidellm-0.8.1.json"
AIPERF = FIX / "aiperf-0.13.0"

Doc = dict[str, Any]


def _sglang() -> Doc:
    return dict(json.loads(SGLANG.read_text().splitlines()[-1]))


def _vllm() -> Doc:
    return dict(json.loads(VLLM.read_text()))


def _guidellm() -> Doc:
    return dict(json.loads(GUIDELLM.read_text()))


def _aiperf() -> list[Doc]:
    return [json.loads(line) for line in (AIPERF / "profile_export.jsonl").read_text().splitlines()]


def _set(doc: Doc, path: str, value: Any) -> Doc:
    """``doc`` with the value at a dotted path (integers index lists) replaced."""
    *parents, last = [int(p) if p.lstrip("-").isdigit() else p for p in path.split(".")]
    node: Any = doc
    for p in parents:
        node = node[p]
    node[last] = value
    return doc


def _bench(tool: str, edit: Callable[[Doc], Any]) -> tuple[str, bytes]:
    doc = _sglang() if tool == "sglang-bench" else _vllm()
    out = edit(doc)
    return tool, (json.dumps(doc if out is None else out) + "\n").encode()


def _g(edit: Callable[[Doc], Any]) -> tuple[str, bytes]:
    doc = _guidellm()
    out = edit(doc)
    return "guidellm", json.dumps(doc if out is None else out).encode()


def _a(edit: Callable[[list[Any]], Any], *, summary: Callable[[Doc], Any] | None = None) -> tuple[str, bytes]:
    recs: list[Any] = _aiperf()
    edit(recs)
    text = "".join(json.dumps(r) + "\n" for r in recs).encode()
    if summary is not None:  # the summary rides along as the second part, split off in the test
        doc = json.loads((AIPERF / "profile_export_aiperf.json").read_text())
        out = summary(doc)
        return "aiperf", text + b"\x00SUMMARY\x00" + json.dumps(doc if out is None else out).encode()
    return "aiperf", text


def _raw(tool: str, data: bytes) -> tuple[str, bytes]:
    return tool, data


_SG_LINE = SGLANG.read_bytes().rstrip(b"\n")

# (case id, (tool, file bytes), text the error must contain: the field or the reason)
HOSTILE: list[tuple[str, tuple[str, bytes], str]] = [
    ("ttfts-dict", _bench("sglang-bench", lambda d: _set(d, "ttfts", {})), "ttfts"),
    ("ttfts-text", _bench("sglang-bench", lambda d: _set(d, "ttfts", "abc")), "ttfts"),
    ("ttfts-bools", _bench("vllm-bench", lambda d: _set(d, "ttfts", [True] * 12)), "ttfts.0"),
    ("ttfts-null", _bench("vllm-bench", lambda d: _set(d, "ttfts", None)), "ttfts"),
    ("ttfts-nan", _bench("sglang-bench", lambda d: _set(d, "ttfts.0", float("nan"))), "ttfts.0"),
    ("ttfts-inf", _bench("vllm-bench", lambda d: _set(d, "ttfts.3", float("inf"))), "ttfts.3"),
    ("ttfts-negative", _bench("vllm-bench", lambda d: _set(d, "ttfts.1", -0.5)), "ttfts.1"),
    ("ttfts-short", _bench("vllm-bench", lambda d: _set(d, "ttfts", d["ttfts"][:5])), "ttfts has 5"),
    ("ttfts-empty-completed", _bench("sglang-bench", lambda d: d | {k: [] for k in
                                     ("ttfts", "input_lens", "output_lens", "itls", "errors")}), "ttfts is empty"),
    ("completed-text", _bench("sglang-bench", lambda d: {"completed": "x"}), "completed"),
    ("completed-only", _bench("vllm-bench", lambda d: {"completed": 3}), "ttfts"),
    ("completed-bool", _bench("vllm-bench", lambda d: _set(d, "completed", True)), "completed"),
    ("completed-disagrees", _bench("sglang-bench", lambda d: _set(d, "completed", 99)), "completed is 99"),
    ("failed-disagrees", _bench("vllm-bench", lambda d: _set(d, "failed", 5)), "failed (5)"),
    ("input-len-1e300", _bench("sglang-bench", lambda d: _set(d, "input_lens.0", 1e300)), "input_lens.0"),
    ("input-len-negative", _bench("vllm-bench", lambda d: _set(d, "input_lens.2", -5)), "input_lens.2"),
    ("input-len-huge-int", _bench("vllm-bench", lambda d: _set(d, "input_lens.0", MAX_LENGTH + 1)), "input_lens.0"),
    ("output-len-fraction", _bench("vllm-bench", lambda d: _set(d, "output_lens.4", 3.5)), "output_lens.4"),
    ("input-lens-dict", _bench("sglang-bench", lambda d: _set(d, "input_lens", {"a": 1})), "input_lens"),
    ("itls-text", _bench("sglang-bench", lambda d: _set(d, "itls.0", "abc")), "itls.0"),
    ("itls-text-items", _bench("vllm-bench", lambda d: _set(d, "itls.1", ["0.1", "0.2"])), "itls.1.0"),
    ("itls-negative", _bench("sglang-bench", lambda d: _set(d, "itls.2.3", -1.0)), "itls.2.3"),
    ("itls-1e300", _bench("vllm-bench", lambda d: _set(d, "itls.0.0", 1e300)), "itls.0.0"),
    ("itls-short", _bench("sglang-bench", lambda d: _set(d, "itls", d["itls"][:-1])), "itls has 11"),
    ("latency-neg-inf", _bench("vllm-bench", lambda d: _set(d, "latencies.0", float("-inf"))), "latencies.0"),
    ("start-times-text", _bench("vllm-bench", lambda d: _set(d, "start_times.0", "noon")), "start_times.0"),
    ("errors-ints", _bench("sglang-bench", lambda d: _set(d, "errors", list(range(12)))), "errors.0"),
    ("errors-dict", _bench("vllm-bench", lambda d: _set(d, "errors", {})), "errors"),
    ("top-level-list", _bench("vllm-bench", lambda d: [1, 2, 3]), "completed"),
    ("top-level-text", _bench("sglang-bench", lambda d: "x"), "completed"),
    ("empty-file", _raw("vllm-bench", b""), "empty"),
    ("blank-lines", _raw("sglang-bench", b"\n\n  \n"), "empty"),
    ("truncated", _raw("vllm-bench", VLLM.read_bytes()[: len(VLLM.read_bytes()) // 2]), "JSON"),
    ("invalid-utf8", _raw("sglang-bench", _SG_LINE.replace(b'"sglang"', b'"sgl\xff\xfeang"', 1) + b"\n"), "UTF-8"),
    ("lone-surrogate-extra", _raw("sglang-bench", _SG_LINE.replace(b'"sglang"', b'"\\ud800"', 1) + b"\n"),
     "surrogate"),
    ("lone-surrogate-error", _bench("vllm-bench", lambda d: _set(d, "errors.0", "\ud800")), "surrogate"),
    ("deep-nesting", _raw("vllm-bench", b"[" * 100_000 + b"]" * 100_000), "recursion"),
    ("g-benchmarks-dict", _g(lambda d: _set(d, "benchmarks", {})), "benchmarks"),
    ("g-benchmarks-empty", _g(lambda d: _set(d, "benchmarks", [])), "no requests"),
    ("g-benchmark-int", _g(lambda d: _set(d, "benchmarks.0", 5)), "benchmarks.0"),
    ("g-successful-text", _g(lambda d: _set(d, "benchmarks.0.requests.successful", "abc")),
     "benchmarks.0.requests.successful"),
    ("g-prompt-tokens-1e300", _g(lambda d: _set(d, "benchmarks.0.requests.successful.0.prompt_tokens", 1e300)),
     "successful.0.prompt_tokens"),
    ("g-latency-negative", _g(lambda d: _set(d, "benchmarks.0.requests.successful.2.request_latency", -1.0)),
     "successful.2.request_latency"),
    ("g-ttft-text", _g(lambda d: _set(d, "benchmarks.0.requests.successful.1.time_to_first_token_ms", "fast")),
     "successful.1.time_to_first_token_ms"),
    ("g-output-tokens-null", _g(lambda d: _set(d, "benchmarks.0.requests.successful.0.output_tokens", None)),
     "successful.0.output_tokens"),
    ("g-totals-disagree", _g(lambda d: _set(d, "benchmarks.0.metrics.request_totals.successful", 2)),
     "request_totals.successful"),
    ("g-stats-nan", _g(lambda d: _set(d, "benchmarks.0.metrics.request_latency.successful.mean", float("nan"))),
     "request_latency.successful.mean"),
    ("a-metrics-list", _a(lambda r: _set(r[0], "metrics", [])), "line 1: field metrics"),
    ("a-ttft-text", _a(lambda r: _set(r[1], "metrics.time_to_first_token.value", "abc")),
     "line 2: field metrics.time_to_first_token.value"),
    ("a-isl-1e300", _a(lambda r: _set(r[0], "metrics.input_sequence_length.value", 1e300)),
     "metrics.input_sequence_length.value"),
    ("a-osl-negative", _a(lambda r: _set(r[3], "metrics.output_sequence_length.value", -3)),
     "line 4: field metrics.output_sequence_length.value"),
    ("a-icl-text", _a(lambda r: _set(r[0], "metrics.inter_chunk_latency.value", ["a"])),
     "metrics.inter_chunk_latency.value"),
    ("a-unit-unknown", _a(lambda r: _set(r[0], "metrics.time_to_first_token.unit", "parsecs")),
     "metrics.time_to_first_token.unit"),
    ("a-value-nan", _a(lambda r: _set(r[5], "metrics.request_latency.value", float("nan"))),
     "line 6: field metrics.request_latency.value"),
    ("a-no-metrics", _a(lambda r: r.__setitem__(2, {"metadata": {}})), "line 3: field metrics"),
    ("a-garbage-line", _a(lambda r: r.__setitem__(4, "not json")), "line 5"),
    ("a-lone-surrogate", _a(lambda r: _set(r[0], "error", "\udc80")), "surrogate"),
    ("a-count-disagrees", _a(lambda r: None, summary=lambda s: _set(s, "request_count.avg", 99)), "request_count"),
    ("a-summary-list", _a(lambda r: None, summary=lambda s: [1]), "summary is a JSON list"),
]


def _write_case(tmp_path: Path, tool: str, data: bytes) -> Path:
    if tool == "aiperf":
        d = tmp_path / "aiperf-artifacts"
        d.mkdir()
        records, _, summary = data.partition(b"\x00SUMMARY\x00")
        (d / "profile_export.jsonl").write_bytes(records)
        if summary:
            (d / "profile_export_aiperf.json").write_bytes(summary)
        return d
    src = tmp_path / ("result.jsonl" if tool == "sglang-bench" else "result.json")
    src.write_bytes(data)
    return src


def _nothing_written(ws: Path) -> None:
    assert not (ws / "archives").exists() or list((ws / "archives").iterdir()) == []
    assert not (ws / "ledgers").exists()


def test_the_hostile_corpus_is_large_enough() -> None:
    assert len(HOSTILE) >= 39 and len({c[0] for c in HOSTILE}) == len(HOSTILE)


@pytest.mark.parametrize(("case", "made", "needle"), HOSTILE, ids=[c[0] for c in HOSTILE])
def test_hostile_file_is_refused_with_one_error_line(case: str, made: tuple[str, bytes], needle: str,
                                                     tmp_path: Path) -> None:
    tool, data = made
    src = _write_case(tmp_path, tool, data)
    ws = tmp_path / "ws"
    code, out, err = run_cli("import", str(src), "--tool", tool, "-w", str(ws))  # an unmapped error raises here
    assert code == ArchiveError.exit_code, (case, out, err)
    lines = err.splitlines()
    assert lines[0].startswith("error: ") and [ln for ln in lines if ln.startswith("error:")] == [lines[0]]
    assert len(lines) == 2 and lines[1].startswith("hint: "), err
    assert str(src) in lines[0] and needle in lines[0], lines[0]
    assert "imported" not in out
    _nothing_written(ws)


def test_valid_fixtures_still_import_through_the_cli(tmp_path: Path) -> None:
    for tool, src in (("sglang-bench", SGLANG), ("vllm-bench", VLLM), ("guidellm", GUIDELLM), ("aiperf", AIPERF)):
        code, out, err = run_cli("import", str(src), "--tool", tool, "-w", str(tmp_path / "ws"))
        assert code == 0 and "external archive" in " ".join(out.split()), err
    assert len(list(iter_archives(tmp_path / "ws"))) == 4


def test_summary_nan_is_kept_as_null_and_named(tmp_path: Path) -> None:
    doc = _sglang() | {"std_ttft_ms": float("nan")}
    src = tmp_path / "nan.jsonl"
    src.write_text(json.dumps(doc) + "\n")
    arch = import_peer(src, "sglang-bench", tmp_path / "ws")
    ext = arch.json("external.json")
    assert ext["summary"]["std_ttft_ms"] is None and "summary.std_ttft_ms" in ext["derived"]


def test_special_files_are_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(ArchiveError, match=r"not a regular file \(a FIFO\)"):
        import_peer(fifo, "vllm-bench", tmp_path / "ws")
    with pytest.raises(ArchiveError, match="a device"):
        import_peer(Path("/dev/zero"), "sglang-bench", tmp_path / "ws")
    with pytest.raises(ArchiveError, match="a directory"):
        import_peer(tmp_path, "guidellm", tmp_path / "ws")
    _nothing_written(tmp_path / "ws")


def test_size_limit_names_the_limit_and_the_flag(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    size = VLLM.stat().st_size
    code, _, err = run_cli("import", str(VLLM), "--tool", "vllm-bench", "-w", str(ws), "--max-bytes", "1000")
    assert code == ArchiveError.exit_code and f"{size} bytes, over the import limit of 1000 bytes" in err
    assert f"--max-bytes {size}" in err
    _nothing_written(ws)
    code, out, _ = run_cli("import", str(VLLM), "--tool", "vllm-bench", "-w", str(ws), "--max-bytes", str(size))
    assert code == 0 and "external archive" in " ".join(out.split())


def test_refusals_in_a_child_process_print_no_traceback(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    for case, (tool, data), _ in [c for c in HOSTILE if c[0] in ("ttfts-text", "invalid-utf8", "a-isl-1e300")]:
        (tmp_path / case).mkdir()
        src = _write_case(tmp_path / case, tool, data)
        proc = subprocess.run([sys.executable, "-m", "harness.cli", "import", str(src), "--tool", tool, "-w", str(ws)],
                              capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)
        assert proc.returncode == ArchiveError.exit_code and "Traceback" not in proc.stderr, proc.stderr
        assert [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")] == [proc.stderr.splitlines()[0]]
    _nothing_written(ws)


@pytest.mark.parametrize("point", ["import:marked", "import:sources-copied", "import:written", "finalize:hashed"])
def test_a_failed_import_leaves_no_partial(point: str, tmp_path: Path) -> None:
    ws = tmp_path / "ws"

    def hook(name: str) -> None:
        if name == point:
            raise OSError(28, "No space left on device (injected)")

    set_fault_hook(hook)
    try:
        with pytest.raises(OSError, match="injected"):
            import_peer(VLLM, "vllm-bench", ws)
    finally:
        set_fault_hook(None)
    assert list((ws / "archives").iterdir()) == []  # no partial directory, no lock file
    assert recover_workspace(ws).empty
    assert list(iter_archives(ws)) == []


def test_a_killed_import_is_recovered_as_external(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    env = os.environ | {"DSV4H_FAULT": "import:sources-copied:SIGKILL"}
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "import", str(VLLM), "--tool", "vllm-bench",
                           "-w", str(ws), "--name", "killed"], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env=env, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    (partial,) = [p for p in (ws / "archives").iterdir() if p.is_dir()]
    assert partial.name.startswith(".partial-") and (partial / IMPORT_MARKER).is_file()
    code, _, err = run_cli("archive", "recover", "-w", str(ws))
    assert code == 0, err
    (arch,) = list(iter_archives(ws))
    run = arch.run
    assert (run.kind, run.claim_class, run.protocol_class, run.backend) == ("external",) * 4
    assert arch.status == "partial" and run.campaign == "killed" and "recovered" in run.labels
    assert "simulated" not in run.labels and "vllm-bench" in run.labels
    runs = read_table(ws, "runs")
    assert runs is not None and set(runs.column("claim_class").to_pylist()) == {"external"}
    assert not {"formal", "abba-screen"} & set(runs.column("protocol_class").to_pylist())
