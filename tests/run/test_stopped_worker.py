"""Issue 23, case 4: a load worker SIGSTOPped in a measured wave neither hangs the run nor gets its
wave counted."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from harness.load import workers
from harness.run.campaign import run_campaign
from harness.run.events import Event, WarmupDone

ROOT = Path(__file__).resolve().parents[2]


def _spec(tmp: Path) -> Path:
    spec = tmp / "s.yaml"
    spec.write_text(f"""
name: stopped-worker
claim_class: native-ar
service: {{backend: sim, sim: {{profile: fast}}, startup_timeout_s: 60}}
corpora: {{decode: {ROOT / 'corpora' / 'sim-code-512'}}}
decode: {{tiers: [4], rounds: 2, min_resident_seconds: 0.2, warmup_waves: 1, max_new_tokens: 300,
          ignore_eos: true}}
load: {{workers: 2}}
request_timeout_s: 5
client: {{deadline_grace_s: 2, deadline_factor: 2}}
""")
    return spec


def _stopper(cont_after_s: float | None) -> tuple[Any, list[int]]:
    """A reporter that SIGSTOPs load worker 1 0.3 s into the first measured wave (SIGCONT after
    ``cont_after_s`` when given); the pids it stopped."""
    stopped: list[int] = []

    def stop() -> None:
        time.sleep(0.3)
        (w,) = [p for p in mp.active_children() if p.name == "dsv4h-load-1"]
        assert w.pid is not None
        os.kill(w.pid, signal.SIGSTOP)
        stopped.append(w.pid)
        if cont_after_s is not None:
            time.sleep(cont_after_s)
            with contextlib.suppress(ProcessLookupError):
                os.kill(w.pid, signal.SIGCONT)

    def report(event: Event) -> None:
        if isinstance(event, WarmupDone) and not stopped:
            threading.Thread(target=stop, daemon=True).start()

    return report, stopped


def test_stopped_worker_fails_its_wave_within_the_deadline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workers, "WORKER_SILENCE_S", 1.0)
    report, stopped = _stopper(None)
    t0 = time.monotonic()
    try:
        out = run_campaign(_spec(tmp_path), tmp_path / "ws", reporter=report)
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
    assert time.monotonic() - t0 < 60
    assert stopped
    assert out.status == "failed" and out.error is not None and "failed in wave 0" in out.error.message
    recs = out.archive.records()
    bad = [r for r in recs if not r.ok]
    assert bad and all("was silent" in str(r.error) and "killed it" in str(r.error) for r in bad)
    wave = bad[0].wave_id
    assert any(r.ok and r.wave_id == wave for r in recs)  # the other worker's records are kept
    rules = {(f.rule, f.severity) for f in out.findings if wave in f.rows}
    assert ("failed-requests", "blocking") in rules
    assert ("client-stalled", "blocking") in rules
    assert any(f.rule == "formal-rounds" and f.severity == "blocking" for f in out.findings)  # cell invalid


def test_short_stop_completes_but_the_wave_is_invalid(tmp_path: Path) -> None:
    """The issue's run: the worker is continued later, the run completes, and the stalled wave is a
    blocking finding instead of a counted number."""
    report, stopped = _stopper(2.0)
    out = run_campaign(_spec(tmp_path), tmp_path / "ws", reporter=report)
    assert stopped
    assert out.status == "complete", out.error
    stalled = [f for f in out.findings if f.rule == "client-stalled"]
    assert stalled and stalled[0].severity == "blocking"
    assert stalled[0].rows  # names the wave(s); their round and cell are invalid with them
