"""Signals that end dsv4h take Ctrl-C's path; critical sections hold them; fault points fire (issue 14)."""

from __future__ import annotations

import errno
import os
import signal
from collections.abc import Iterator

import pytest

from harness import interrupts


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    old = {s: signal.getsignal(s) for s in interrupts.STOP_SIGNALS}
    interrupts.reset()
    yield
    for s, h in old.items():
        signal.signal(s, h)
    interrupts.reset()
    interrupts.set_fault_hook(None)


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_and_sighup_raise_keyboard_interrupt(sig: signal.Signals, status: int) -> None:
    interrupts.install()
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(sig)  # the handler runs before raise_signal returns
    assert interrupts.received() == sig
    assert interrupts.exit_status() == status


def test_critical_section_holds_signals_until_it_ends() -> None:
    interrupts.install()
    done: list[str] = []

    def section() -> None:
        with interrupts.critical():
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGTERM)  # a second, quick signal is held too
            with interrupts.critical():  # nested: still held
                done.append("inner")
            done.append("outer")

    with pytest.raises(KeyboardInterrupt):
        section()
    assert done == ["inner", "outer"]  # the whole block ran before the signal took effect
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_critical_section_can_report_instead_of_deliver() -> None:
    interrupts.install()
    with interrupts.critical(deliver=False) as held:
        os.kill(os.getpid(), signal.SIGTERM)
    assert held.signal == signal.SIGTERM
    assert interrupts.exit_status() == 143


def test_fault_points_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    interrupts.set_fault_hook(seen.append)
    interrupts.fault_point("a")
    monkeypatch.setenv(interrupts.FAULT_ENV, "x:ENOSPC,b:EIO")
    with pytest.raises(OSError, match="fault injected at b") as info:
        interrupts.fault_point("b")
    assert info.value.errno == errno.EIO
    interrupts.fault_point("c")  # not named: nothing happens
    assert seen == ["a", "b", "c"]
    monkeypatch.setenv(interrupts.FAULT_ENV, "d:BOGUS")
    with pytest.raises(ValueError, match="unknown action"):
        interrupts.fault_point("d")
