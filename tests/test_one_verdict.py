"""One verdict everywhere (harness.evidence.verdict): every registered run kind, run on the simulator
with a blocking finding injected into the evidence stage, shows the same validity, origin and verdict
on the console (and exits as ``dsv4h evidence check`` does), in ``archive show``, ``archive list
--json``, its kind's ledger tables and the report; a real fault (the simulator's stalled loop) in a
formal matrix does the same without any injection.

The finding is injected where the rules run (``harness.evidence.io.check``), so the run's own finish,
``evidence check`` and every reader that falls back to the rules see the same one. It names a unit of
the kind where the kind has units (a formal cell, a sweep round and its rate, an SLA probe) and the
whole run otherwise (a screen, a matched run, a replay, a quick screen, an import)."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from ledger_helpers import ledger_table
from testkit import LOAD_COMPANIONS, LOAD_RULES, only_archive, run_cli, tiny_sweep_spec

import harness.evidence.io as evidence_io
from harness.evidence.findings import ArchiveData, Finding, make_finding
from harness.evidence.io import stored_findings
from harness.evidence.verdict import BLOCKING_EXIT, WITHHELD, concerned
from harness.run.kinds import KINDS

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "corpora" / "sim-code-512"
RULE = "injected-fault"
SIM = {"profile": "fast", "time_scale": 3}  # decode steps of 15-54 ms: a busy machine keeps the model's time
pytestmark = pytest.mark.slow

Chooser = Callable[[ArchiveData], Finding]


def _first_cell(d: ArchiveData) -> Finding:
    cell = min(d.cells, key=lambda c: (int(c.get("concurrency") or 0), str(c["cell_id"])))
    return make_finding(d.archive_id, RULE, "blocking", f"injected: {cell['cell_id']}", "none", [str(cell["cell_id"])])


def _first_round(d: ArchiveData) -> Finding:
    r = min(d.rounds, key=lambda r: str(r["round_id"]))
    return make_finding(d.archive_id, RULE, "blocking", f"injected: {r['round_id']}", "none",
                        [str(r["round_id"]), str(r["cell_id"])])


def _whole(d: ArchiveData) -> Finding:
    return make_finding(d.archive_id, RULE, "blocking", "injected: the whole run", "none", scope="run")


@contextmanager
def injected(monkeypatch: pytest.MonkeyPatch, choose: Chooser) -> Iterator[None]:
    """Every rule run adds ``choose``'s blocking finding to the rules' own."""
    real = evidence_io.check  # type: ignore[attr-defined]

    def check(d: ArchiveData) -> list[Finding]:
        return sorted([*real(d), choose(d)])

    monkeypatch.setattr(evidence_io, "check", check)
    yield


def _write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def formal_spec(tmp: Path, **sim: Any) -> Path:
    return _write(tmp / "formal.yaml", {
        "name": "t-formal", "claim_class": "native-ar",
        "service": {"backend": "sim", "sim": SIM | sim, "startup_timeout_s": 60},
        "corpora": {"decode": str(CORPUS)},
        "decode": {"tiers": [1, 2], "rounds": 3, "min_resident_seconds": 0.2, "warmup_waves": 1,
                   "max_new_tokens": 32}})


def abba_spec(tmp: Path) -> Path:
    profile = {"backend": "sim", "sim": SIM, "startup_timeout_s": 60}
    _write(tmp / "control.yaml", profile | {"name": "ctl"})
    _write(tmp / "candidate.yaml", profile | {"name": "cand"})
    _write(tmp / "workload.yaml", {"name": "t-abba-w", "claim_class": "native-ar", "corpus": str(CORPUS),
                                   "concurrency": 4, "waves_per_leg": 1, "warmup_waves": 1, "max_new_tokens": 32,
                                   "boundary": "resident", "declared_change": []})
    return _write(tmp / "abba.yaml", {"name": "t-abba", "kind": "abba", "control": "control.yaml",
                                      "candidate": "candidate.yaml", "workload": "workload.yaml"})


def matched_spec(tmp: Path) -> Path:
    spec = {"draft_tokens": 3, "accept_probs": [0.8, 0.6, 0.4], "verify_cost": 1.25}
    return _write(tmp / "matched.yaml", {
        "name": "t-matched", "kind": "matched-sd",
        "ar": {"name": "ar", "backend": "sim", "sim": SIM, "startup_timeout_s": 60},
        "sd": {"name": "sd", "backend": "sim", "sim": SIM | {"speculative": spec}, "startup_timeout_s": 60},
        "workload": {"corpus": str(CORPUS), "concurrency": 2, "waves_per_leg": 1, "warmup_waves": 1,
                     "max_new_tokens": 48}})


def sla_spec(tmp: Path) -> Path:
    return _write(tmp / "sla.yaml", {
        "name": "t-sla", "kind": "sla-search", "claim_class": "native-ar",
        "service": str(ROOT / "campaigns/profiles/sim-single-slot.yaml"), "corpus": str(CORPUS),
        "arrivals": {"process": "constant", "count": 8}, "rounds": 1, "warmup_requests": 1, "max_new_tokens": 10,
        "use_case_output_lengths": False, "ignore_eos": True, "limits": {"ttft_ms": 60},
        "search": {"start_req_s": 3, "precision_req_s": 4, "max_probes": 3}, "schedule_tolerance_ms": 200})


def replay_spec(tmp: Path) -> Path:
    trace = ROOT / "tests" / "fixtures" / "traces" / "mooncake-small.jsonl"
    code, out, err = run_cli("corpus", "import-trace", str(trace), "--block-size", "512", "--out", str(tmp / "mc"))
    assert code == 0, out + err
    return _write(tmp / "replay.yaml", {
        "name": "t-replay", "kind": "trace-replay", "claim_class": "native-ar",
        "service": {"backend": "sim", "sim": {"profile": "fast"}, "startup_timeout_s": 60},
        "corpus": str(tmp / "mc"), "trace": str(trace), "speed": 0.5, "lateness_tolerance_ms": 1000})


def _run(*args: str) -> str:
    code, out, err = run_cli(*args)
    assert code == BLOCKING_EXIT, f"exit {code}\n{out[-3000:]}\n{err}"
    assert RULE in out and "blocking" in err
    return out


def _show(ws: Path, aid: str) -> str:
    code, out, err = run_cli("archive", "show", aid, "-w", str(ws))
    assert code == 0, out + err
    return out


def _listed(ws: Path, aid: str) -> dict[str, Any]:
    code, out, err = run_cli("archive", "list", "-w", str(ws), "--json")
    assert code == 0, out + err
    (row,) = [r for r in json.loads(out) if r.get("archive_id") == aid]
    return dict(row)


def _ledger(ws: Path, table: str, aid: str) -> list[dict[str, Any]]:
    t = ledger_table(ws, table)
    return [r for r in (t.to_pylist() if t is not None else []) if r["archive_id"] == aid]


def _report(ws: Path, tmp: Path) -> dict[str, Any]:
    code, out, err = run_cli("report", "build", "-w", str(ws), "--out", str(tmp / "report"), "--jobs", "1")
    assert code == 0, out + err
    return dict(json.loads((tmp / "report" / "results.json").read_text()))


def _common(ws: Path, tmp: Path, origin: str = "simulated") -> tuple[str, dict[str, Any]]:
    """The checks every kind shares: ``archive list --json`` and the runs row say invalid with the
    decided origin; ``archive show`` names the rule; the report's archive entry is invalid too."""
    aid = only_archive(ws).name
    listed = _listed(ws, aid)
    assert (listed["valid"], listed["data_origin"]) == (False, origin), listed
    (run,) = _ledger(ws, "runs", aid)
    assert (run["valid"], run["data_origin"]) == (False, origin)
    show = _show(ws, aid)
    assert "INVALID" in show and RULE in show
    assert ("SIMULATED" in show) == (origin == "simulated")
    snap = _report(ws, tmp)
    (entry,) = [a for a in snap["archives"] if a["archive_id"] == aid]
    assert entry["valid"] is False
    return aid, snap


BUSY_RULES = LOAD_RULES | LOAD_COMPANIONS | {"sweep-schedule", "replay-schedule", "sweep-saturated"}
"""Blocking rules a busy test machine can raise beside the injected finding (the simulator or the client
fell behind: its schedule not kept, its rounds over-saturated)."""


def _load_named(ws: Path, aid: str) -> set[str]:
    """The row ids the archive's other blocking findings invalidate (the one spread,
    :func:`harness.evidence.verdict.concerned`); each must be one of :data:`BUSY_RULES`: on a busy
    machine such rows are rightly invalid beside the injected ones. Skips the test when such a finding
    covers the whole run (nothing is left to tell the injected finding's rows apart)."""
    rows = [f for f in _ledger(ws, "findings", aid) if f["severity"] == "blocking" and f["rule"] != RULE]
    assert {f["rule"] for f in rows} <= BUSY_RULES, rows
    for f in rows:
        if f["scope"] == "run":
            pytest.skip(f"the machine was too busy for the simulator ({f['rule']} for the whole run)")
    found = stored_findings(pa.Table.from_pylist(rows)) if rows else []
    assert found is not None
    rounds = [r for t in ("rounds", "sweep_rounds", "sla_rounds") for r in _ledger(ws, t, aid)]
    whole, ids = concerned(found, _ledger(ws, "waves", aid), rounds)
    assert not whole
    return set(ids)


def _split(rows: list[dict[str, Any]], key: str, bad: set[str]) -> None:
    """Rows named by a blocking finding are invalid, every other row valid."""
    assert rows
    assert {r[key] for r in rows if not r["valid"]} == bad, [(r[key], r["valid"]) for r in rows]


def test_every_registered_kind_is_covered_here() -> None:
    covered = {"formal-matrix", "abba", "rate-sweep", "matched-sd", "trace-replay", "sla-search", "quick-bench",
               "external"}
    assert set(KINDS) == covered


def test_formal_matrix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    with injected(monkeypatch, _first_cell):
        out = _run("campaign", "run", str(formal_spec(tmp_path)), "-w", str(ws))
        aid, _ = _common(ws, tmp_path)
    cells = _ledger(ws, "cells", aid)
    bad = {min(cells, key=lambda c: c["concurrency"])["cell_id"]}
    bad |= _load_named(ws, aid) & {c["cell_id"] for c in cells}
    _split(cells, "cell_id", bad)
    assert "INVALID" in out and all(c in out for c in bad)  # Table 2's caption names the cells
    # every export format: the same cell invalid with the rule, the others valid, the origin decided
    code, _, err = run_cli("export", aid, "--format", "sglang-bench", "--out", str(tmp_path / "x.jsonl"), "-w", str(ws))
    assert code == 0, err
    lines = [json.loads(x) for x in (tmp_path / "x.jsonl").read_text().splitlines()]
    assert {(x["dsv4h_cell"], x["dsv4h_valid"]) for x in lines} == {(c["cell_id"], c["cell_id"] not in bad)
                                                                   for c in cells}
    injected_cell = min(cells, key=lambda c: c["concurrency"])["cell_id"]
    assert all(RULE in x["dsv4h_invalid_rules"] for x in lines if x["dsv4h_cell"] == injected_cell)
    assert {x["dsv4h_data_origin"] for x in lines} == {"simulated"}
    code, _, err = run_cli("export", aid, "--format", "csv", "--out", str(tmp_path / "x.csv"), "-w", str(ws))
    assert code == 0, err
    with (tmp_path / "x.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert {(r["cell_id"], r["valid"]) for r in rows} == {(c["cell_id"], str(c["cell_id"] not in bad).lower())
                                                          for c in cells}
    # evidence check decides the same again (from the same rules) and exits the same way
    with injected(monkeypatch, _first_cell):
        code, _, _ = run_cli("evidence", "check", aid, "-w", str(ws))
    assert code == BLOCKING_EXIT
    _split(_ledger(ws, "cells", aid), "cell_id", bad)


def test_formal_matrix_with_a_stalled_simulator_needs_no_injection(tmp_path: Path) -> None:
    """The README's main job under a real blocking sim-lateness, shrunk: every request stalls the
    simulator's loop for 400 ms, so every measured wave loses far more than 1% of its window."""
    ws = tmp_path / "ws"
    code, out, err = run_cli("campaign", "run", str(formal_spec(tmp_path, fault="stall_loop:400")), "-w", str(ws))
    assert code == BLOCKING_EXIT, out[-3000:] + err
    aid = only_archive(ws).name
    code2, _, _ = run_cli("evidence", "check", aid, "-w", str(ws))
    assert code2 == code
    bad = {c["cell_id"] for c in _ledger(ws, "cells", aid) if not c["valid"]}
    assert bad and all(c in out for c in bad) and "sim-lateness" in out
    show = _show(ws, aid)
    assert "INVALID" in show and "sim-lateness" in show


def test_abba_screen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    with injected(monkeypatch, _whole):
        out = _run("campaign", "run", str(abba_spec(tmp_path)), "-w", str(ws))
        aid, snap = _common(ws, tmp_path)
    assert "withheld" in out
    (row,) = _ledger(ws, "comparisons", aid)
    assert row["verdict"] == WITHHELD and row["verdict_as_measured"] not in (None, WITHHELD) and not row["valid"]
    assert all(not w["valid"] for w in _ledger(ws, "waves", aid))
    (screen,) = snap["screens"]
    assert screen["valid"] is False


def test_matched_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    with injected(monkeypatch, _whole):
        out = _run("campaign", "run", str(matched_spec(tmp_path)), "-w", str(ws))
        aid, snap = _common(ws, tmp_path)
    assert "withheld" in out
    (row,) = _ledger(ws, "matched_sd", aid)
    assert row["verdict"] == WITHHELD and row["verdict_as_measured"] in ("sd-faster", "sd-slower", "inconclusive")
    (entry,) = snap["speculative"]["matched"]
    assert entry["valid"] is False


def test_rate_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    with injected(monkeypatch, _first_round):
        out = _run("sweep", "run", str(tiny_sweep_spec(tmp_path)), "-w", str(ws))
        aid, _ = _common(ws, tmp_path)
    rounds = _ledger(ws, "sweep_rounds", aid)
    first = min(rounds, key=lambda r: r["round_id"])
    load = _load_named(ws, aid)
    _split(rounds, "round_id", {first["round_id"]} | load & {r["round_id"] for r in rounds})
    cells = _ledger(ws, "sweep_cells", aid)
    _split(cells, "cell_id", {first["cell_id"]} | load & {c["cell_id"] for c in cells})
    assert "INVALID" in out


def test_sla_search_probes_live_in_their_own_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    with injected(monkeypatch, _first_round):
        _run("sla", "run", str(sla_spec(tmp_path)), "-w", str(ws))
        aid, _ = _common(ws, tmp_path)
    assert _ledger(ws, "sweep_cells", aid) == [] and _ledger(ws, "sweep_rounds", aid) == []  # never sweep rates
    rounds = _ledger(ws, "sla_rounds", aid)
    first = min(rounds, key=lambda r: r["round_id"])
    load = _load_named(ws, aid)
    _split(rounds, "round_id", {first["round_id"]} | load & {r["round_id"] for r in rounds})
    probes = _ledger(ws, "sla_probes", aid)
    # a finding on a round reaches its measurement's probe row (probe_id), never the rate's other attempts
    assert first["probe_id"] == f"{first['cell_id']}.m0"
    _split(probes, "probe_id", {first["probe_id"]} | load & {p["probe_id"] for p in probes})


def test_trace_replay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    spec = replay_spec(tmp_path)
    with injected(monkeypatch, _whole):
        _run("replay", "run", str(spec), "-w", str(ws))
        aid, _ = _common(ws, tmp_path)
    (row,) = _ledger(ws, "replay_runs", aid)
    assert row["valid"] is False


def test_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    src = ROOT / "tests" / "fixtures" / "peers" / "sglang-bench-0.5.23.jsonl"
    with injected(monkeypatch, _whole):
        _run("import", str(src), "--tool", "sglang-bench", "-w", str(ws))
        aid = only_archive(ws).name
        listed = _listed(ws, aid)
    assert listed["valid"] is False and listed["data_origin"] == _ledger(ws, "runs", aid)[0]["data_origin"]
    assert "INVALID" in _show(ws, aid)


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    from sim_helpers import spawned

    with spawned("--profile", "fast") as (_proc, url):
        yield url


@pytest.mark.parametrize("backend", ["sglang", "openai"])
def test_quick_bench_on_both_protocol_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sim_url: str,
                                            backend: str) -> None:
    """The attached simulator is decided simulated from the server itself on either path."""
    ws = tmp_path / "ws"
    with injected(monkeypatch, _whole):
        out = _run("bench", "--url", sim_url, "--backend", backend, "--num-prompts", "4", "--random-input-len", "16",
                   "--random-output-len", "8", "-w", str(ws))
        aid, _ = _common(ws, tmp_path)
    assert "SIMULATED" in out
    assert all(not r["valid"] for r in _ledger(ws, "requests", aid))
