"""Fault injection on whole runs: nothing lost, nothing forged, nothing left running (issue 14).

Real signals at named points of a run and of its finalization (``DSV4H_FAULT``), ``kill -9`` of
dsv4h, a full disk (a real 2 MiB tmpfs when this machine lets the test mount one, else ENOSPC
injected at a named point), a tampered archive given to ``--resume``, and hostile servers.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hostile_server import HostileServer
from ledger_helpers import ledger_df
from testkit import ran, run_cli

from harness.errors import ArchiveError
from harness.run.campaign import run_campaign
from harness.store.archive import iter_archives, iter_partials, open_archive, verify_archive

REPO = Path(__file__).resolve().parents[2]
D512 = REPO / "corpora" / "sim-code-512"
FRANCE = REPO / "oracles" / "france.yaml"


def sim_spec(tmp_path: Path, *, long: bool = False, extra: str = "", name: str = "spec.yaml",
             tiers: str = "[1, 2]", rounds: int = 2, resident_s: float = 0.1, tokens: int = 32) -> Path:
    p = tmp_path / name
    p.write_text(f"""
name: faults
claim_class: native-ar
service: {{name: fault-sim, backend: sim, sim: {{profile: fast}}, startup_timeout_s: 60}}
corpora: {{decode: {D512}}}
decode: {{tiers: {tiers}, rounds: {rounds}, min_resident_seconds: {30 if long else resident_s}, warmup_waves: 0,
         max_new_tokens: {tokens}}}
request_timeout_s: 30
{extra}""")
    return p


def late_cells(ws: Path, archive_id: str) -> set[str]:
    """Row ids a blocking ``sim-lateness`` finding of the archive names (from the findings ledger): a
    busy machine's simulator lost 1% of a window or more there, so those cells are rightly invalid."""
    df = ledger_df(ws, "findings")
    df = df[df.archive_id == archive_id]
    hit = df[(df.rule == "sim-lateness") & (df.severity == "blocking")]
    return {str(r) for rows in hit.rows for r in json.loads(rows)}


def attach_spec(tmp_path: Path, url: str, *, timeout_s: float, oracles: bool = False) -> Path:
    p = tmp_path / "attach.yaml"
    p.write_text(f"""
name: hostile
claim_class: native-ar
service: {{name: hostile, backend: attach, url: "{url}"}}
corpora: {{decode: {D512}}}
decode: {{tiers: [1], rounds: 1, min_resident_seconds: 0.1, warmup_waves: 0, max_new_tokens: 16}}
request_timeout_s: {timeout_s}
{"oracles: [" + str(FRANCE) + "]" if oracles else ""}
""")
    return p


def start(spec: Path, ws: Path, *extra: str, fault: str | None = None) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if fault:
        env["DSV4H_FAULT"] = fault
    return subprocess.Popen([sys.executable, "-m", "harness.cli", "campaign", "run", str(spec), "-w", str(ws),
                             *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO)


def wait_for(cond: object, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached")


def parts(ws: Path) -> int:
    return len(list((ws / "archives").glob(".partial-*/records/part-*.parquet"))) if (ws / "archives").exists() else 0


def servers(ws: Path) -> list[tuple[int, float]]:
    out = []
    for rec in (ws / "services" / "launched").glob("*.json") if (ws / "services" / "launched").exists() else []:
        p = json.loads(rec.read_text())["process"]
        out.append((int(p["pid"]), float(p["create_time"])))
    return out


def alive(pid: int, birth: float) -> bool:
    try:
        p = psutil.Process(pid)
        return abs(p.create_time() - birth) < 0.05 and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def finalized(ws: Path) -> list[Path]:
    return [a.path for a in iter_archives(ws)]


@pytest.mark.slow
def test_sigterm_then_ctrl_c_mid_wave_stop_the_server_and_keep_every_wave(tmp_path: Path) -> None:
    # SIGTERM (the issue: exit 143 at once, server left listening), then a quick Ctrl-C during the
    # cleanup (the issue: two quick Ctrl-C presses left the server too)
    ws = tmp_path / "ws"
    proc = start(sim_spec(tmp_path, long=True), ws)
    wait_for(lambda: parts(ws) >= 1)
    [(pid, birth)] = servers(ws)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 143, out
    assert not alive(pid, birth), "the server outlived dsv4h"
    assert servers(ws) == []  # its launch record is gone with it
    [path] = finalized(ws)
    assert open_archive(path).status == "partial" and verify_archive(path) == []
    assert "SIGTERM" in out and "--resume" in out
    assert not list(iter_partials(ws))


@pytest.mark.slow
@pytest.mark.parametrize(("fault", "status"), [("finalize:start:SIGINT", 130),
                                               ("finalize:manifest-written:SIGTERM", 143)])
def test_a_signal_during_finalization_is_held_until_the_archive_is_complete(
        tmp_path: Path, fault: str, status: int) -> None:
    ws = tmp_path / "ws"
    proc = start(sim_spec(tmp_path, tiers="[1]", rounds=1), ws, fault=fault)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == status, out
    [path] = finalized(ws)
    a = open_archive(path)
    assert a.status == "complete" and verify_archive(path) == []
    assert not list(iter_partials(ws))  # nothing stranded
    runs = ledger_df(ws, "runs")
    assert list(runs.archive_id) == [a.archive_id]  # and its ledger rows are all there
    assert a.archive_id in set(ledger_df(ws, "requests").archive_id)
    assert "archive" in out and "ledger rows are complete" in out


@pytest.mark.slow
def test_killed_between_manifest_and_rename_is_rolled_forward(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    proc = start(sim_spec(tmp_path, tiers="[1]", rounds=1), ws, fault="finalize:manifest-written:SIGKILL")
    proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL
    [p] = list(iter_partials(ws))
    assert not p.live and p.has_manifest and finalized(ws) == []
    code, listing, _ = run_cli("archive", "list", "-w", str(ws))
    assert code == 0 and "stranded" in listing
    code, out, err = run_cli("archive", "recover", "-w", str(ws))
    assert code == 0, err
    assert "renamed into archive" in out
    [path] = finalized(ws)
    assert open_archive(path).status == "complete" and verify_archive(path) == []
    assert list(ledger_df(ws, "runs").archive_id) == [path.name]


@pytest.mark.slow
def test_kill_9_then_reap_recover_and_resume_once(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    spec = sim_spec(tmp_path, resident_s=0.5)
    proc = start(spec, ws)
    wait_for(lambda: parts(ws) >= 2)
    [(pid, birth)] = servers(ws)
    proc.kill()  # kill -9: no handler runs
    proc.communicate(timeout=30)
    try:
        assert alive(pid, birth)  # left behind, as the issue saw
        code, out, _ = run_cli("service", "status", "-w", str(ws))
        assert code == 0 and "left-behind" in out and str(pid) in out
        code, out, _ = run_cli("service", "reap", "--stop", "-w", str(ws))
        assert code == 0 and f"pid {pid}" in out
        assert not alive(pid, birth) and servers(ws) == []
    finally:
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).kill()
    code, listing, _ = run_cli("archive", "list", "-w", str(ws))
    assert "stranded" in listing
    code, out, err = run_cli("archive", "recover", "-w", str(ws))
    assert code == 0, err
    [old] = finalized(ws)
    a = open_archive(old)
    assert a.status == "partial" and "recovered" in a.run.labels and verify_archive(old) == []
    n_old = len(a.records())
    assert n_old >= 2  # every streamed wave is kept
    # continue it by absolute path (the crash: "Non-relative patterns are unsupported")
    code, out, err = run_cli("campaign", "run", str(spec), "-w", str(ws), "--resume", str(old.resolve()))
    assert ran(code, out, err), out + err
    new = [p for p in finalized(ws) if p != old]
    assert len(new) == 1
    b = open_archive(new[0])
    assert b.status == "complete" and b.run.resumed_from == a.archive_id and len(b.records()) > n_old
    cells = ledger_df(ws, "cells")
    mine = cells[cells.archive_id == b.archive_id]
    assert sorted(mine.concurrency) == [1, 2]
    valid = cells[cells.valid]  # the README's notebook filter counts every cell once
    # ... every cell of the resumed run, except one a busy machine's simulator ran late in (sim-lateness)
    assert set(valid.cell_id) == set(mine.cell_id) - late_cells(ws, b.archive_id)
    assert set(valid.archive_id) <= {b.archive_id}
    assert (cells[cells.archive_id == a.archive_id].superseded_by == b.archive_id).all()
    # the same archive cannot be resumed a second time
    code, _, err = run_cli("campaign", "run", str(spec), "-w", str(ws), "--resume", a.archive_id)
    assert code == 6 and "already resumed" in err and b.archive_id in err


@pytest.mark.slow
def test_tampered_archive_is_never_resumed_or_checked(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    spec = sim_spec(tmp_path, extra="", name="dying.yaml")
    spec.write_text(spec.read_text().replace("{profile: fast}", "{profile: fast, die_after_requests: 3}"))
    out = run_campaign(spec, ws)
    assert out.status == "failed"
    part = out.archive.path / "records" / "part-000000.parquet"
    t = pq.read_table(part)
    t = t.set_column(t.column_names.index("prompt_tokens"), "prompt_tokens",
                     pa.array([int(x) * 10 for x in t.column("prompt_tokens").to_pylist()], pa.int64()))
    pq.write_table(t, part)
    spec.write_text(spec.read_text().replace(", die_after_requests: 3", ""))
    with pytest.raises(ArchiveError, match=r"changed: records/part-000000\.parquet"):
        run_campaign(spec, ws, resume=out.archive.path)
    assert finalized(ws) == [out.archive.path]  # nothing new was made from it
    for cmd in (["evidence", "check", out.archive.archive_id], ["ledger", "ingest", out.archive.archive_id]):
        code, _, err = run_cli(*cmd, "-w", str(ws))
        assert code == 6 and "part-000000.parquet" in err, (cmd, err)


def mount_tiny_disk(mnt: Path) -> bool:
    """Mount a 2 MiB tmpfs at ``mnt`` when this machine allows it (root, mount available)."""
    mnt.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True,
                          check=False).returncode == 0


def _assert_nothing_half_written(ws: Path) -> None:
    for p in ws.rglob("*.parquet"):
        pq.read_table(p)  # every Parquet file that exists is whole
    for p in ws.rglob("*.jsonl"):
        for line in p.read_text().splitlines():
            json.loads(line)  # no half line
    for p in ws.rglob("*.json"):
        json.loads(p.read_text())


@pytest.mark.slow
def test_disk_full(tmp_path: Path) -> None:
    """A real full disk (a 2 MiB tmpfs) where the machine lets the test mount one; else ENOSPC is
    injected at a named point of finalization (what CI without root runs)."""
    disk = tmp_path / "disk"
    real = mount_tiny_disk(disk)
    try:
        ws = disk / "ws"
        ws.mkdir()
        if real:
            filler = disk / "filler"
            filler.write_bytes(b"\0" * (2 * 1024 * 1024 - 250 * 1024))  # leave ~250 KiB
            proc = start(sim_spec(tmp_path, long=True, tokens=128), ws)
        else:
            proc = start(sim_spec(tmp_path, tiers="[1]", rounds=1), ws, fault="finalize:hashed:ENOSPC")
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode in (1, 6), out
        assert "Traceback" not in out and out.count("error:") == 1 and "hint:" in out
        assert "No space left on device" in out and ("disk is full" in out or "free space" in out)
        assert servers(ws) == []  # a launch record is removed only once its server is stopped
        _assert_nothing_half_written(ws)
        if real:
            filler.unlink()  # free the disk: nothing was lost
        code, _, err = run_cli("archive", "recover", "-w", str(ws))
        assert code == 0, err
        [path] = finalized(ws)
        assert verify_archive(path) == [] and len(open_archive(path).records()) >= 1
    finally:
        if real:
            subprocess.run(["umount", "-l", str(disk)], check=False)


def test_ctrl_c_takes_effect_at_once_on_a_stalled_server(tmp_path: Path) -> None:
    with HostileServer("stall") as srv:
        proc = start(attach_spec(tmp_path, srv.url, timeout_s=600), tmp_path / "ws")
        wait_for(lambda: srv.generate_requests >= 1)
        time.sleep(0.3)
        t = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        took = time.monotonic() - t
    assert proc.returncode == 130, out
    assert took < 2.5, took
    [path] = finalized(tmp_path / "ws")
    assert open_archive(path).status == "partial"


def test_a_stalled_server_costs_the_run_its_own_timeouts_only(tmp_path: Path) -> None:
    # the case: a SIGSTOPped server, 5 s request timeout, 626 s in all. Now the sentinel
    # checks and the wave share the run's request timeout (1 s here).
    with HostileServer("stall") as srv:
        t = time.monotonic()
        out = run_campaign(attach_spec(tmp_path, srv.url, timeout_s=1.0, oracles=True), tmp_path / "ws")
        took = time.monotonic() - t
    assert out.status == "failed"
    assert took < 8.0, took
    checks = out.archive.json("oracles.json")["results"]
    assert [c["when"] for c in checks] == ["before", "after"]
    assert all(not c["passed"] and "timeout" in (c["error"] or "") for c in checks)


def test_an_endless_server_is_cut_at_max_new_tokens_and_found(tmp_path: Path) -> None:
    with HostileServer("endless", interval_s=0.001) as srv:
        t = time.monotonic()
        out = run_campaign(attach_spec(tmp_path, srv.url, timeout_s=30), tmp_path / "ws")
        took = time.monotonic() - t
    assert out.status == "failed" and took < 10
    errors = [r.error for r in out.archive.records() if r.error]
    assert errors and all(e.startswith("token overrun") for e in errors)
    found = [f for f in out.findings if f.rule == "failed-requests"]
    assert found and "token overrun" in found[0].message and found[0].blocking
