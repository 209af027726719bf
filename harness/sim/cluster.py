"""Several simulator processes behind one port, on one step grid (edge module: processes, clock).

One Python process emits a step's burst of C events serially; past ~20k events/s it cannot keep a
20 ms step. ``serve_cluster`` runs ``processes`` ``SimServer`` processes bound to the same port with
``SO_REUSEPORT`` (the kernel spreads connections over them); each schedules the streams it was given.

- **one step grid**: the parent takes ``t0 = time.perf_counter_ns()`` (the host's one
  ``CLOCK_MONOTONIC``) and every process ends each forward on an instant ``t0 + k*step``, ``step``
  being the profile's one decode step (``batching.grid_step_s``), so all processes emit a step's
  events at the same instant, as one server of the whole batch would. Only a profile whose decode
  step does not depend on the batch can be spread so (``scale-20ms``); any other is refused with a
  ``SpecError`` (each process's batch is only its share of the streams);
- **one set of counters**: every process writes its counters into a shared table
  (``harness.sim.board``) after each forward; ``/server_info``, whichever process answers it,
  reports the sums over all processes in ``internal_states[0]`` (late steps, model time lost, steps,
  tokens, running requests; maxima of the ``_max_`` lateness) and each process's row after it, so
  the harness's per-wave ``sim-lateness`` evidence sees every process;
- **ready when all listen**: the URL is announced (``ready_file``, ``on_ready``) only once every
  process listens, so no client connection (kept alive across waves) is made before the kernel can
  spread it over all of them.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.aio import new_event_loop
from harness.errors import ServiceError
from harness.formats import atomic_write
from harness.sim.batching import grid_step_s
from harness.sim.board import ClusterBoard
from harness.sim.options import SimOptions
from harness.sim.runner import serve

__all__ = ["serve_cluster"]

MAX_PROCESSES = 64
START_TIMEOUT_S = 120.0


def _child(options: SimOptions, board: ClusterBoard, slot: int) -> None:
    loop = new_event_loop()
    try:
        loop.run_until_complete(serve(options, board=board, slot=slot))
    except KeyboardInterrupt:
        pass
    finally:
        loop.close()


def cluster_options(options: SimOptions, processes: int) -> SimOptions:
    """The options every process of a cluster of ``processes`` runs with: the shared port option and
    one grid anchor taken now. Raises ``SpecError`` when the profile's step depends on the batch."""
    from harness.errors import SpecError

    if not 1 <= processes <= MAX_PROCESSES:
        raise SpecError(f"simulator processes must be 1..{MAX_PROCESSES}, not {processes}",
                        hint="one process per ~20k events/s is enough (C1024 at a 20 ms step: 3-4)")
    grid_step_s(options.resolved_profile, step_factor=options.step_factor, time_scale=options.time_scale)
    return options.model_copy(update={"reuse_port": True, "grid_t0_ns": time.perf_counter_ns()})


async def serve_cluster(options: SimOptions, processes: int, *, ready_file: Path | None = None,
                        on_ready: Callable[[str], None] | None = None) -> None:
    """Serve ``options`` from ``processes`` processes on one port and one step grid until SIGINT/SIGTERM
    (this process is the first; the others are started once it listens and stopped when it returns).
    One process serves ``options`` unchanged. Raises ``SpecError`` for a profile that cannot be spread."""
    if processes == 1:
        await serve(options, ready_file=ready_file, on_ready=on_ready)
        return
    opts = cluster_options(options, processes)
    ctx = mp.get_context("spawn")
    board = ClusterBoard(processes, ctx)
    children: list[Any] = []

    def started(url: str) -> None:
        port = int(url.rsplit(":", 1)[1])
        for slot in range(1, processes):
            proc = ctx.Process(target=_child, args=(opts.model_copy(update={"port": port}), board, slot), daemon=True)
            proc.start()
            children.append(proc)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not all(row["pid"] for row in board.rows()):  # blocks this loop: nothing is served yet
            dead = [p for p in children if p.exitcode is not None]
            if dead or time.monotonic() > deadline:
                why = f"exited with code {dead[0].exitcode}" if dead else f"did not listen in {START_TIMEOUT_S:.0f} s"
                raise ServiceError(f"a simulator cluster process {why}", hint="run it alone (--processes 1) to "
                                   "see its error")
            time.sleep(0.02)
        if ready_file is not None:
            atomic_write(ready_file, (url + "\n").encode())
        if on_ready is not None:
            on_ready(url)

    try:
        await serve(opts, on_ready=started, board=board, slot=0)
    finally:
        for proc in children:
            proc.terminate()
        for proc in children:
            proc.join(5)
