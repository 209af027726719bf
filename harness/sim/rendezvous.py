"""SGLang's multi-node launch, simulated (edge module: TCP on the rendezvous address, an HTTP server).

A real multi-node SGLang service runs the same command on every node with ``--nnodes N --node-rank R
--dist-init-addr HOST:PORT``; the ranks meet at ``HOST:PORT`` (node 0), node 0 serves HTTP once the
whole group is up, and the service is down as soon as one rank is gone. The simulator does the same:

- **rank 0** listens at ``dist_init_addr`` and waits for the other ``N-1`` ranks to join (each sends one
  line ``join R``; rank 0 answers ``ok``); only then does it start the HTTP server (``serve``). A joined
  rank whose connection closes takes the service down: rank 0 logs ``node rank R lost`` and exits
  non-zero (``ServiceDied``), as a real node 0 does when an NCCL peer dies;
- **ranks > 0** connect to rank 0 (retrying until ``join_timeout_s``), join, and stay connected, serving
  nothing; when rank 0 goes away they log ``rank 0 ... gone`` and exit non-zero.

Lines printed (the harness reads them): ``dsv4h-sim rank 0 waiting for N-1 rank(s) at HOST:PORT``,
``dsv4h-sim rank R joined HOST:PORT``, then rank 0's usual ``dsv4h-sim listening on URL``.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from harness.errors import ServiceDied, ServiceError, SpecError
from harness.sim.options import SimOptions
from harness.sim.runner import serve

__all__ = ["serve_multinode"]

JOIN_TIMEOUT_S = 600.0
RETRY_S = 0.2


def split_addr(addr: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` too) -> (host, port); ``SpecError`` otherwise."""
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SpecError(f"dist_init_addr {addr!r} is not HOST:PORT", hint="e.g. --dist-init-addr 127.0.0.1:25000")
    return host.strip("[]"), int(port)


def check_ranks(nnodes: int, node_rank: int, dist_init_addr: str | None) -> tuple[str, int]:
    """Validate the multi-node flags; returns the rendezvous (host, port)."""
    if nnodes < 2:
        raise SpecError(f"--nnodes {nnodes}: a multi-node service needs at least 2 nodes", hint="drop --nnodes")
    if not 0 <= node_rank < nnodes:
        raise SpecError(f"--node-rank {node_rank} is outside 0..{nnodes - 1}", hint="use a rank below --nnodes")
    if not dist_init_addr:
        raise SpecError("--nnodes > 1 needs --dist-init-addr HOST:PORT (rank 0's rendezvous)",
                        hint="e.g. --dist-init-addr 127.0.0.1:25000")
    return split_addr(dist_init_addr)


def _say(line: str) -> None:
    print(line, flush=True)  # the launcher reads these lines


def _stop_event() -> asyncio.Event:
    stop = asyncio.Event()
    if threading.current_thread() is threading.main_thread():
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
    return stop


async def serve_rank0(options: SimOptions, nnodes: int, addr: tuple[str, int], *,
                      ready_file: Path | None = None, on_ready: Callable[[str], None] | None = None,
                      join_timeout_s: float = JOIN_TIMEOUT_S) -> None:
    """Rank 0: gather every other rank at ``addr``, then serve HTTP until a signal; a lost rank raises
    ``ServiceDied`` naming it."""
    joined: dict[int, asyncio.StreamWriter] = {}
    all_in = asyncio.Event()
    lost: list[int] = []
    lost_event = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = (await asyncio.wait_for(reader.readline(), 30.0)).decode("ascii", "replace").split()
        except (TimeoutError, OSError):
            writer.close()
            return
        rank = int(line[1]) if len(line) == 2 and line[0] == "join" and line[1].isdigit() else -1
        if not 0 < rank < nnodes or rank in joined:
            writer.write(b"refused\n")
            writer.close()
            return
        joined[rank] = writer
        writer.write(b"ok\n")
        with contextlib.suppress(OSError):
            await writer.drain()
        _say(f"dsv4h-sim rank {rank} joined {addr[0]}:{addr[1]}")
        if len(joined) == nnodes - 1:
            all_in.set()
        with contextlib.suppress(OSError):
            while await reader.read(4096):
                pass
        lost.append(rank)
        lost_event.set()

    server = await asyncio.start_server(handle, addr[0], addr[1], reuse_address=True)
    stop = _stop_event()
    try:
        _say(f"dsv4h-sim rank 0 waiting for {nnodes - 1} rank(s) at {addr[0]}:{addr[1]}")
        waiting = asyncio.ensure_future(all_in.wait())
        stopped = asyncio.ensure_future(stop.wait())
        await asyncio.wait({waiting, stopped}, timeout=join_timeout_s, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        stopped.cancel()
        if stop.is_set():
            return
        if not all_in.is_set():
            raise ServiceError(f"only {len(joined)} of {nnodes - 1} rank(s) joined {addr[0]}:{addr[1]} within "
                               f"{join_timeout_s:.0f} s", hint="start every rank with the same --dist-init-addr")
        if lost:
            raise ServiceDied(f"node rank {lost[0]} lost (its connection to rank 0 closed) before serving",
                              hint="every rank must stay up; read that rank's log")
        # a lost rank sets serve's stop event: it closes what is in flight the way a signal does
        await serve(options, ready_file=ready_file, on_ready=on_ready, stop=lost_event)
        if not lost:
            return
        _say(f"dsv4h-sim rank 0: node rank {lost[0]} lost (its connection closed); the service is down")
        raise ServiceDied(f"node rank {lost[0]} of {nnodes} lost (its connection to rank 0 closed); the "
                          "multi-node service is down", hint="read that rank's log; restart the whole service")
    finally:
        server.close()
        for w in joined.values():
            w.close()


async def serve_rank(options: SimOptions, nnodes: int, node_rank: int, addr: tuple[str, int], *,
                     join_timeout_s: float = JOIN_TIMEOUT_S) -> None:
    """A rank > 0: join rank 0 at ``addr`` and stay connected until a signal (returns) or until rank 0
    goes away (``ServiceDied``)."""
    del options  # a rank > 0 serves nothing; its options are rank 0's
    loop = asyncio.get_running_loop()
    deadline = loop.time() + join_timeout_s
    while True:
        try:
            reader, writer = await asyncio.open_connection(addr[0], addr[1])
            break
        except OSError:
            if loop.time() > deadline:
                raise ServiceError(f"rank {node_rank}: nothing listens at {addr[0]}:{addr[1]} after "
                                   f"{join_timeout_s:.0f} s",
                                   hint="start rank 0 with the same --dist-init-addr") from None
            await asyncio.sleep(RETRY_S)
    writer.write(f"join {node_rank}\n".encode())
    await writer.drain()
    answer = (await reader.readline()).strip()
    if answer != b"ok":
        writer.close()
        raise ServiceError(f"rank 0 at {addr[0]}:{addr[1]} refused rank {node_rank} ({answer!r})",
                           hint=f"each rank 1..{nnodes - 1} joins once; check --node-rank and --nnodes")
    _say(f"dsv4h-sim rank {node_rank} joined {addr[0]}:{addr[1]}")
    stop = _stop_event()
    gone = asyncio.ensure_future(reader.read())  # EOF when rank 0 goes away
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({gone, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        stopped.cancel()
        writer.close()
    if not stop.is_set():
        _say(f"dsv4h-sim rank {node_rank}: rank 0 at {addr[0]}:{addr[1]} is gone; exiting")
        raise ServiceDied(f"rank 0 at {addr[0]}:{addr[1]} is gone (rank {node_rank} exits)",
                          hint="the multi-node service is down; restart the whole service")


async def serve_multinode(options: SimOptions, nnodes: int, node_rank: int, dist_init_addr: str | None, *,
                          ready_file: Path | None = None, on_ready: Callable[[str], None] | None = None) -> None:
    """One rank of a simulated multi-node service (see the module docstring)."""
    addr = check_ranks(nnodes, node_rank, dist_init_addr)
    if node_rank == 0:
        await serve_rank0(options, nnodes, addr, ready_file=ready_file, on_ready=on_ready)
    else:
        await serve_rank(options, nnodes, node_rank, addr)
    sys.stdout.flush()
