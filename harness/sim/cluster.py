"""Several simulator processes behind one port (edge module: processes).

One Python process emits a step's burst of C events serially; past ~50k events/s it cannot keep a
20 ms step. ``serve_cluster`` runs ``processes`` identical ``SimServer`` processes bound to the same
port with ``SO_REUSEPORT`` (the kernel spreads connections over them). Each process schedules its
own share of the streams with the same profile; all use ``time.perf_counter_ns()`` (one monotonic
clock on the host), so every event's ``sim_emit_ns`` is comparable with the client's stamps, and
each process's lateness counters (``/server_info``, answered by whichever process accepts the
connection) show whether it kept up. The step times follow each process's own batch, so use a
profile whose step does not depend on the batch (``scale-20ms``) when the cluster must model one
server exactly.
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.aio import new_event_loop
from harness.sim.options import SimOptions
from harness.sim.runner import serve


def _child(options: SimOptions) -> None:
    loop = new_event_loop()
    try:
        loop.run_until_complete(serve(options))
    except KeyboardInterrupt:
        pass
    finally:
        loop.close()


async def serve_cluster(options: SimOptions, processes: int, *, ready_file: Path | None = None,
                        on_ready: Callable[[str], None] | None = None) -> None:
    """Serve ``options`` from ``processes`` processes on one port until SIGINT/SIGTERM (this process
    is the first; the others are started once it listens and stopped when it returns)."""
    opts = options.model_copy(update={"reuse_port": True})
    if processes <= 1:
        await serve(options, ready_file=ready_file, on_ready=on_ready)
        return
    ctx = mp.get_context("spawn")
    children: list[Any] = []

    def started(url: str) -> None:
        port = int(url.rsplit(":", 1)[1])
        for _ in range(processes - 1):
            proc = ctx.Process(target=_child, args=(opts.model_copy(update={"port": port}),), daemon=True)
            proc.start()
            children.append(proc)
        if on_ready is not None:
            on_ready(url)

    try:
        await serve(opts, ready_file=ready_file, on_ready=started)
    finally:
        for proc in children:
            proc.terminate()
        for proc in children:
            proc.join(5)
