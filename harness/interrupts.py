"""How dsv4h ends: one path for every stopping signal, blocks no signal may cut, named fault points.

- :func:`install` (the CLI calls it once): SIGTERM and SIGHUP take the path of Ctrl-C. They are
  handed to whatever handles SIGINT at that moment, so inside a running event loop asyncio's
  runner cancels the run gracefully and elsewhere ``KeyboardInterrupt`` is raised; the run then
  keeps every finished wave, stops the services it owns and finalizes its archive.
  :func:`exit_status` gives the conventional status of the signal that ended the run (130, 143, 129).
- :func:`critical`: a block that a stopping signal must not cut in half (finalizing an archive,
  committing ledger rows, stopping an owned server). Signals that arrive inside are held and
  delivered when the outermost block ends. Only the main thread receives signals, so elsewhere it
  is a no-op.
- :func:`fault_point`: a named point where tests inject a fault, either in process
  (:func:`set_fault_hook`) or in a child process through ``DSV4H_FAULT=point:ACTION[,...]`` where
  ACTION is a signal name (``SIGINT``, ``SIGTERM``, ``SIGHUP``, ``SIGKILL``) sent to this process,
  or an errno name (``ENOSPC``, ``EIO``) raised as ``OSError``. Unset, a fault point costs one
  dictionary lookup.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

__all__ = ["critical", "exit_status", "fault_point", "in_critical", "install", "received"]

FAULT_ENV = "DSV4H_FAULT"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_state: dict[str, int | None] = {"depth": 0, "pending": None, "last": None}
_hook: list[Callable[[str], None]] = []


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _deliver(signum: int, frame: FrameType | None) -> None:
    """Act on a stopping signal as SIGINT's current handler would."""
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler) and handler is not _hold:
        handler(signal.SIGINT, frame)
        return
    raise KeyboardInterrupt


def _on_stop_signal(signum: int, frame: FrameType | None) -> None:
    _state["last"] = signum
    if _state["depth"]:
        _state["pending"] = _state["pending"] or signum
        return
    _deliver(signum, frame)


def _hold(signum: int, frame: FrameType | None) -> None:
    _state["last"] = signum
    _state["pending"] = _state["pending"] or signum


def install() -> None:
    """Route SIGTERM and SIGHUP to the SIGINT path (main thread only; idempotent)."""
    if not _main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_stop_signal)


def received() -> int | None:
    """The last stopping signal received (None when none was)."""
    return _state["last"]


def exit_status(default: int = 130) -> int:
    """128 + the number of the last stopping signal (130 for SIGINT, 143 SIGTERM, 129 SIGHUP)."""
    last = _state["last"]
    return 128 + int(last) if last is not None else default


def in_critical() -> bool:
    """True inside a critical section (and off the main thread, where signals are not handled)."""
    return not _main_thread() or bool(_state["depth"])


def depth() -> int:
    """How many critical sections are open now (0 outside; tests check they never nest)."""
    return int(_state["depth"] or 0)


def reset() -> None:
    """Forget received signals (tests)."""
    _state.update(depth=0, pending=None, last=None)


class Held:
    """What a critical section held: the first stopping signal that arrived inside (or None)."""

    signal: int | None = None


@contextlib.contextmanager
def critical(*, deliver: bool = True) -> Iterator[Held]:
    """Hold stopping signals for the duration of the block. At its end the first one held is
    delivered (``deliver``), or only reported in the yielded :class:`Held` for the caller to act on."""
    held = Held()
    if not _main_thread():
        yield held
        return
    outer = not _state["depth"]
    previous = signal.getsignal(signal.SIGINT) if outer else None
    if outer:
        signal.signal(signal.SIGINT, _hold)
    _state["depth"] = int(_state["depth"] or 0) + 1
    try:
        yield held
    finally:
        _state["depth"] = int(_state["depth"] or 1) - 1
        if outer:
            signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)
            pending, _state["pending"] = _state["pending"], None
            held.signal = pending
            if pending is not None and deliver:
                _deliver(pending, None)


# ----------------------------------------------------------------------------------------------------
# Fault points (tests)


def set_fault_hook(hook: Callable[[str], None] | None) -> None:
    """Call ``hook(name)`` at every fault point (None removes it); for in-process tests."""
    _hook.clear()
    if hook is not None:
        _hook.append(hook)


def fault_point(name: str) -> None:
    """A named point of a multi-step operation where a test may inject a fault (module docstring)."""
    for hook in _hook:
        hook(name)
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    for item in spec.split(","):
        point, _, action = item.strip().rpartition(":")
        if point == name:
            _act(action, name)


def _act(action: str, name: str) -> None:
    if action.startswith("SIG") and hasattr(signal, action):
        os.kill(os.getpid(), getattr(signal, action))
        return
    code = getattr(errno, action, None)
    if isinstance(code, int):
        raise OSError(code, f"{os.strerror(code)} (fault injected at {name})")
    raise ValueError(f"{FAULT_ENV}: unknown action {action!r} at {name}")
