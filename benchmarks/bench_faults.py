"""Benchmark: faults, tampering and hostile input (issue 14) — what each costs, measured.

Runs the issue's faults against the built-in simulator and the hostile test server
(``tests/hostile_server.py``) and records, for each, what dsv4h did and how long it took:

- a stalled server (accepts, never answers) with a 5 s request timeout and the France sentinel
  before and after measurement: the run's total time (the issue saw 626 s);
- Ctrl-C while a request waits on a stalled server (request timeout 600 s): time to exit;
- an endless stream without ``[DONE]``: time until the client stops reading (160-token cap);
- events that never advance the count: time until the client gives up (5 s silence bound);
- one 192 MB event without an end: wall time, CPU time and peak memory of the process that reads it
  (the issue saw 509 MB peak and 34 s of CPU);
- SIGTERM, SIGHUP and a double Ctrl-C in the middle of a simulator wave: exit status, time to exit,
  whether the server survived, whether the archive verifies;
- ``kill -9`` of dsv4h: the server it leaves, then ``service reap --stop``, ``archive recover`` and
  ``--resume``; whether the ledger's ``valid`` rows count each cell once.

Writes ``benchmarks/results/faults.json`` and prints a table. Usage::

    .venv/bin/python benchmarks/bench_faults.py
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from hostile_server import HostileServer  # noqa: E402 - test helper on the path above

D512 = REPO / "corpora" / "sim-code-512"
FRANCE = REPO / "oracles" / "france.yaml"
PY = sys.executable


def attach_spec(d: Path, url: str, timeout_s: float, oracles: bool) -> Path:
    p = d / "attach.yaml"
    p.write_text(f"name: hostile\nclaim_class: native-ar\nservice: {{name: hostile, backend: attach, url: '{url}'}}\n"
                 f"corpora: {{decode: {D512}}}\ndecode: {{tiers: [1], rounds: 1, min_resident_seconds: 0.1, "
                 f"warmup_waves: 0, max_new_tokens: 160}}\nrequest_timeout_s: {timeout_s}\n"
                 + (f"oracles: [{FRANCE}]\n" if oracles else ""))
    return p


def sim_spec(d: Path, tiers: str = "[1, 2]", mrs: float = 30) -> Path:
    p = d / "sim.yaml"
    p.write_text(f"name: faults\nclaim_class: native-ar\nservice: {{name: fault-sim, backend: sim, "
                 f"sim: {{profile: fast}}, launch: {{startup_timeout_s: 60}}}}\ncorpora: {{decode: {D512}}}\n"
                 f"decode: {{tiers: {tiers}, rounds: 2, "
                 f"min_resident_seconds: {mrs}, warmup_waves: 0, max_new_tokens: 32}}\nrequest_timeout_s: 30\n")
    return p


def dsv4h(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([PY, "-m", "harness.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, cwd=REPO, env=dict(os.environ, PYTHONUNBUFFERED="1") | (env or {}))


def wait_for(cond: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not reached")
        time.sleep(0.05)


def stalled_run() -> dict[str, Any]:
    from harness.run.campaign import run_campaign

    with tempfile.TemporaryDirectory() as d, HostileServer("stall") as srv:
        t = time.monotonic()
        out = run_campaign(attach_spec(Path(d), srv.url, 5.0, True), Path(d) / "ws")
        took = time.monotonic() - t
        checks = out.archive.json("oracles.json")["results"]
    return {"fault": "stalled server, 5 s request timeout, sentinel before and after", "seconds": round(took, 2),
            "status": out.status, "sentinels": [c["error"] for c in checks]}


def ctrl_c_stalled() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d, HostileServer("stall") as srv:
        p = dsv4h("campaign", "run", str(attach_spec(Path(d), srv.url, 600.0, False)), "-w", str(Path(d) / "ws"))
        wait_for(lambda: srv.generate_requests >= 1)
        time.sleep(0.5)
        t = time.monotonic()
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=120)
        took = time.monotonic() - t
    return {"fault": "Ctrl-C during a request to a stalled server (600 s timeout)", "seconds_to_exit": round(took, 2),
            "exit": p.returncode}


def client_case(mode: str, *, max_new_tokens: int = 160, timeout_s: float = 5.0, **kw: Any) -> dict[str, Any]:
    code = ("import json, resource, sys, time\n"
            "from harness.load import LoadClient, WaveRequest, run_sync\n"
            "async def main():\n"
            f"    async with LoadClient(sys.argv[1], concurrency=1, timeout_s={timeout_s}) as c:\n"
            f"        return await c.send(WaveRequest(input_ids=[1, 2, 3], max_new_tokens={max_new_tokens}, rid='b'))\n"
            "t = time.monotonic(); r = run_sync(main()); w = time.monotonic() - t\n"
            "ru = resource.getrusage(resource.RUSAGE_SELF)\n"
            "print(json.dumps({'seconds': round(w, 2), 'cpu_s': round(ru.ru_utime + ru.ru_stime, 2),\n"
            "  'peak_rss_mb': round(ru.ru_maxrss / 1024, 1), 'error': r.error, 'tokens': r.completion_tokens}))\n")
    with HostileServer(mode, **kw) as srv:
        r = subprocess.run([PY, "-c", code, srv.url], capture_output=True, text=True, cwd=REPO, timeout=300, check=True)
        sent = srv.bytes_sent
    row: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    return row | {"server_bytes_sent": sent}


def baseline_rss() -> float:
    code = "import resource; import harness.load; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    return round(int(subprocess.run([PY, "-c", code], capture_output=True, text=True, cwd=REPO,
                                    check=True).stdout) / 1024, 1)


def signal_mid_wave(sig: int, twice: bool = False) -> dict[str, Any]:
    import psutil

    from harness.store.archive import iter_archives, verify_archive

    with tempfile.TemporaryDirectory() as d:
        ws = Path(d) / "ws"
        p = dsv4h("campaign", "run", str(sim_spec(Path(d))), "-w", str(ws))
        wait_for(lambda: len(list(ws.glob("archives/.partial-*/records/*.parquet"))) >= 1)
        rec = json.loads(next((ws / "services" / "launched").glob("*.json")).read_text())["process"]
        t = time.monotonic()
        p.send_signal(sig)
        if twice:
            time.sleep(0.05)
            p.send_signal(sig)
        p.communicate(timeout=120)
        took = time.monotonic() - t
        try:
            alive = abs(psutil.Process(rec["pid"]).create_time() - rec["create_time"]) < 0.05
        except psutil.Error:
            alive = False
        archives = list(iter_archives(ws))
        return {"fault": f"{signal.Signals(sig).name}{' x2' if twice else ''} mid-wave", "exit": p.returncode,
                "seconds_to_exit": round(took, 2), "server_alive_after": alive,
                "archives": [(a.status, verify_archive(a.path) == [], len(a.records())) for a in archives]}


def kill9_then_recover() -> dict[str, Any]:
    import psutil
    from testkit import run_cli

    import harness.ledger as hl
    from harness.store.archive import iter_archives

    with tempfile.TemporaryDirectory() as d:
        ws = Path(d) / "ws"
        spec = sim_spec(Path(d), "[1, 2, 4, 8]", 0.2)
        p = dsv4h("campaign", "run", str(spec), "-w", str(ws))
        wait_for(lambda: len(list(ws.glob("archives/.partial-*/records/*.parquet"))) >= 2)
        rec = json.loads(next((ws / "services" / "launched").glob("*.json")).read_text())["process"]
        p.kill()
        p.communicate(timeout=30)
        left = psutil.pid_exists(rec["pid"])
        reap = run_cli("service", "reap", "--stop", "-w", str(ws))[0]
        gone = not psutil.pid_exists(rec["pid"]) or psutil.Process(rec["pid"]).status() == psutil.STATUS_ZOMBIE
        recover = run_cli("archive", "recover", "-w", str(ws))[0]
        [old] = list(iter_archives(ws))
        resume = run_cli("campaign", "run", str(spec), "-w", str(ws), "--resume", str(old.path.resolve()))[0]
        again = run_cli("campaign", "run", str(spec), "-w", str(ws), "--resume", old.archive_id)[0]
        cells = hl.read(ws, "cells")  # the Delta table (a plain Parquet read of its directory is refused)
        return {"fault": "kill -9 of dsv4h mid-run", "server_left_running": left, "reap_exit": reap,
                "server_gone_after_reap": gone, "recover_exit": recover, "recovered_records": len(old.records()),
                "resume_abs_path_exit": resume, "second_resume_exit": again,
                "valid_cells": int(cells.valid.sum()), "cells_in_plan": 4}


def main() -> None:
    results: list[dict[str, Any]] = [
        stalled_run(),
        ctrl_c_stalled(),
        {"fault": "endless stream, max_new_tokens 160"} | client_case("endless", interval_s=0.001),
        {"fault": "endless events without progress, 5 s bound"} | client_case("endless-flat", interval_s=0.01),
        {"fault": "one 192 MB event without an end"} | client_case("huge-event", event_mb=192)
        | {"baseline_rss_mb": baseline_rss()},
    ]
    for sig, twice in ((signal.SIGTERM, False), (signal.SIGHUP, False), (signal.SIGINT, True)):
        try:
            results.append(signal_mid_wave(sig, twice))
        except TimeoutError as exc:
            results.append({"fault": f"{signal.Signals(sig).name} mid-wave", "error": str(exc)})
    try:
        results.append(kill9_then_recover())
    except TimeoutError as exc:
        results.append({"fault": "kill -9 of dsv4h mid-run", "error": str(exc)})
    out = REPO / "benchmarks" / "results" / "faults.json"
    out.write_text(json.dumps({"machine": os.uname().nodename, "cpus": os.cpu_count(),
                               "maxrss_unit": "MB", "results": results}, indent=1) + "\n")
    for r in results:
        print(json.dumps(r))
    print(f"wrote {out} (rusage self {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MB)")


if __name__ == "__main__":
    main()
