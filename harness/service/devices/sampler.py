"""The background sampling loop every GPU sampler shares (edge module: a thread, the monotonic clock).

:class:`Sampler` runs :meth:`Sampler.read` in a daemon thread: a first sample when the thread starts,
one every ``interval_s`` seconds on a fixed schedule (no drift; a slow read skips the missed ticks
rather than bursting) and a last one at :meth:`Sampler.stop`. A failed read is counted
(``error_count``; the first :data:`MAX_ERRORS_KEPT` messages in ``errors``) and sampling goes on.
Subclasses say what one read gives (a list of samples) and, optionally, what to close at stop:
:class:`harness.service.devices.memory.MemorySampler`, :class:`harness.service.devices.power.PowerSampler`. This
module imports no pydantic (it runs on device images without it).
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from types import TracebackType
from typing import Final, Generic, Self, TypeVar

#: Most error messages kept (the count of failed reads is kept in full).
MAX_ERRORS_KEPT: Final = 20

T = TypeVar("T")


class Sampler(ABC, Generic[T]):
    """Sample in a daemon thread named ``thread_name``: ``start()``, ``stop()``, then ``samples()``. Also a
    context manager. Subclasses implement :meth:`read` (one read's samples; an exception is a failed
    read) and may override :meth:`close` (called once at stop, after the last sample)."""

    thread_name = "dsv4h-sampler"

    def __init__(self, interval_s: float) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        self.interval_s = float(interval_s)
        self._samples: list[T] = []
        self.errors: list[str] = []
        self.error_count = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @abstractmethod
    def read(self) -> list[T]:
        """One read's samples (raises on a failed read)."""

    def close(self) -> None:
        """Release the source (called once by :meth:`stop`); nothing by default."""

    def sample_once(self) -> list[T]:
        """Read now and keep the samples; returns them (empty when the read failed, which is counted)."""
        try:
            new = self.read()
        except Exception as exc:  # a background sampler must outlive any one bad read
            with self._lock:
                self.error_count += 1
                if len(self.errors) < MAX_ERRORS_KEPT:
                    self.errors.append(str(exc))
            return []
        with self._lock:
            self._samples.extend(new)
        return new

    def _run(self) -> None:
        t0 = time.monotonic()
        k = 0
        self.sample_once()
        while True:
            k += 1
            delay = t0 + k * self.interval_s - time.monotonic()
            if delay < 0:  # a slow read: skip the missed ticks rather than bursting
                k += int(-delay // self.interval_s) + 1
                delay = t0 + k * self.interval_s - time.monotonic()
            if self._stop.wait(max(delay, 0.0)):
                return
            self.sample_once()

    def start(self) -> Self:
        """Start the sampling thread (once); returns self."""
        if self._thread is not None:
            raise RuntimeError(f"{type(self).__name__} already started")
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def stop(self, *, final_sample: bool = True, timeout_s: float = 60.0) -> None:
        """Stop the thread (waits up to ``timeout_s`` for a read in progress), take one last sample
        unless ``final_sample`` is False, then :meth:`close`. Safe to call twice."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        thread.join(timeout_s)
        if final_sample:
            self.sample_once()
        self.close()

    @property
    def running(self) -> bool:
        """True while the sampling thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def samples(self) -> list[T]:
        """A copy of every sample so far, in the order taken."""
        with self._lock:
            return list(self._samples)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
