"""Ways to run a simulator: in a background thread (tests, notebooks) or as a foreground service."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from harness.aio import new_event_loop
from harness.errors import ServiceDied, ServiceError
from harness.formats import atomic_write
from harness.sim.board import ClusterBoard
from harness.sim.options import SimOptions
from harness.sim.server import SimServer


@contextlib.contextmanager
def running_simulator(**options: Any) -> Iterator[str]:
    """Run a ``SimServer`` with these ``SimOptions`` fields in a background thread with its own event
    loop; yields the base URL and stops the server cleanly on exit.

    Timing is only as good as the GIL allows: heavy Python work in the calling thread delays the
    simulator's steps (it then reports late steps in ``/server_info``).  For timing-critical work run
    the server in its own process (``dsv4h sim serve``) or in the caller's event loop (``SimServer``).
    """
    opts = SimOptions.build(**options)
    loop = new_event_loop()
    server = SimServer(opts)
    ready = threading.Event()
    box: dict[str, Any] = {}

    def _thread() -> None:
        asyncio.set_event_loop(loop)
        try:
            box["url"] = loop.run_until_complete(server.start())
        except BaseException as exc:  # reported to the caller below
            box["error"] = exc
            ready.set()
            loop.close()
            return
        ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(server.stop())
            loop.close()

    thread = threading.Thread(target=_thread, name="dsv4h-sim", daemon=True)
    thread.start()
    ready.wait()
    if "error" in box:
        thread.join()
        exc = box["error"]
        raise ServiceError(f"the simulator could not start: {exc}", hint="check host/port options") from exc
    try:
        yield str(box["url"])
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)


async def serve(
    options: SimOptions,
    *,
    ready_file: Path | None = None,
    on_ready: Callable[[str], None] | None = None,
    board: ClusterBoard | None = None,
    slot: int = 0,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM.  Once listening, writes the URL to ``ready_file`` (atomically) and
    calls ``on_ready(url)``.  A simulated death raises ``ServiceDied`` after cleanup.  ``board``/``slot``:
    this process's row of a cluster's counters (``harness.sim.cluster``). ``stop``: an event that also stops
it (``harness.sim.rendezvous``: a lost rank)."""
    server = SimServer(options, board=board, slot=slot)
    url = await server.start()
    # Everything allocated so far lives as long as the process: keep it out of the collector's full
    # passes, whose pauses (tens of ms over the imported modules) would make model steps late.
    gc.freeze()
    loop = asyncio.get_running_loop()
    stop = stop if stop is not None else asyncio.Event()
    installed: list[signal.Signals] = []
    # Signal handlers can only be installed from the main thread; running_simulator() serves from a
    # worker thread and stops through its own event instead.
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
    try:
        if ready_file is not None:
            atomic_write(ready_file, (url + "\n").encode())
        if on_ready is not None:
            on_ready(url)
        stop_wait = asyncio.ensure_future(stop.wait())
        died_wait = asyncio.ensure_future(server.died.wait())
        await asyncio.wait({stop_wait, died_wait}, return_when=asyncio.FIRST_COMPLETED)
        for fut in (stop_wait, died_wait):
            fut.cancel()
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
        await server.stop()
    if server.death_reason is not None:
        raise ServiceDied(
            f"the simulator {server.death_reason} (simulated death)",
            hint="this is the die_after_requests / die_after_s fault; restart the server",
        )
