"""The continuous-batching step scheduler: one asyncio task owns all request state.

Model (docs/simulator.md#scheduler-model): requests wait in arrival order; a prefill forward admits at most
``prefill_admission`` requests and ``chunk_budget`` uncached prompt tokens (a long prompt is chunked
over several forwards) while at most ``max_running`` requests are resident; prefill has priority over
decode whenever a waiting request can be admitted.  The forward that finishes a prompt produces its
first output token; each decode step gives every running request one token (with a profile's
``speculative:`` block each decode step is a verify step lasting ``verify_cost`` x the native step and
emitting 1 + accepted drafts per request in one chunk: ``harness.sim.speculation``).  Durations come from
``harness.sim.batching``.  An idle scheduler waits ``gather_s`` (wall time) after the first arrival
before forming its first batch, so requests sent together are batched together.  Within one forward,
final chunks are delivered after all other chunks, so a request's last event never precedes tokens
its batch-mates produced in the same step (resident windows end on a step boundary).

Forwards run on absolute deadlines of ``time.perf_counter()`` (next deadline = previous deadline +
model duration), so sleep overshoot never accumulates.  When the loop falls behind by more than
``max(JITTER_TOLERANCE_S, half the next forward)`` it does not burst to catch up: it restarts the
timeline at "now" and counts a late step and the model time lost (``stats``).

With a step grid (``grid=(t0, step)``, shared by the processes of ``harness.sim.cluster``) every
forward ends on a grid instant ``t0 + k*step`` (``batching.next_grid_instant``), so the bursts of all
processes leave together, as one server's would; a forward is then late only when it misses its grid
instant, and the model time lost is the grid steps it skipped (``_end_of``).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from harness.sim.batching import decode_step_s, next_grid_instant, plan_prefill_forward, prefill_forward_s
from harness.sim.cold import ColdShapes
from harness.sim.profiles import SimProfile
from harness.sim.radix import RadixCache, SaltKey
from harness.sim.speculation import SpecTally, SpecTotals, accepted_drafts, request_key
from harness.sim.tokens import EOS_ID, OutputPlan

JITTER_TOLERANCE_S = 0.002
"""Lateness (s) always absorbed by the absolute timeline (timer granularity), never counted as late."""

_TOKEN_BLOCK = 64
FinishReason = dict[str, Any]


class DuplicateRid(Exception):
    """A request id is already in flight."""


@dataclass(frozen=True)
class Chunk:
    """What one streamed event carries: new token IDs and, on the last one, the finish reason and
    (speculative profiles) the request's speculative counts."""

    token_ids: list[int]
    finish: FinishReason | None
    spec: SpecTally | None = None


@dataclass(eq=False)
class SimRequest:
    """One generate request as the scheduler sees it.  ``arrival`` is ``time.perf_counter()`` (s)."""

    rid: str
    input_ids: npt.NDArray[np.int32]
    max_new_tokens: int
    ignore_eos: bool
    stop_ids: frozenset[int]
    salt_key: SaltKey
    stream: bool
    interval: int
    plan: OutputPlan
    arrival: float
    queue: asyncio.Queue[Chunk] = field(default_factory=asyncio.Queue)
    sink: Callable[[Chunk], None] | None = None  # set: non-final chunks are written by it at once
    cached_tokens: int = 0
    prefill_left: int = 0
    n_out: int = 0
    finished: bool = False
    retract_steps: int = 0  # fault ``retract``: leave the running batch for this many decode steps
    held_left: int = 0
    pending: list[int] = field(default_factory=list)
    spec: SpecTally | None = None  # speculative profiles: set when the prompt is prefilled
    _block: list[int] = field(default_factory=list)
    _block_start: int = 0

    @property
    def prompt_len(self) -> int:
        """Prompt length in tokens."""
        return len(self.input_ids)

    @property
    def reserve(self) -> int:
        """Tokens of capacity this request holds while resident (prompt + max new tokens)."""
        return self.prompt_len + self.max_new_tokens

    def next_token(self) -> int:
        """The greedy token at position ``n_out`` (does not advance ``n_out``)."""
        k = self.n_out - self._block_start
        if not 0 <= k < len(self._block):
            self._block_start = self.n_out
            self._block = self.plan.tokens(self.n_out, _TOKEN_BLOCK)
            k = 0
        return self._block[k]


@dataclass
class SchedulerStats:
    """Counters exposed in ``/server_info`` ``internal_states`` and ``/metrics``.  Seconds are wall."""

    prefill_forwards: int = 0
    decode_steps: int = 0
    late_steps: int = 0
    late_decode_steps: int = 0  # the late steps that were decode steps (those move a resident rate)
    lateness_total_s: float = 0.0
    decode_lateness_total_s: float = 0.0  # the model time the late decode steps lost
    wake_lateness_max_s: float = 0.0
    wake_lateness_sum_s: float = 0.0
    emit_lateness_max_s: float = 0.0  # longest time from a forward's end to its last event written
    prompt_tokens_total: int = 0
    generation_tokens_total: int = 0
    cached_tokens_total: int = 0
    last_gen_throughput: float = 0.0
    decode_model_s_total: float = 0.0  # the model durations of every decode (or verify) step planned
    cold_compiles: int = 0  # profiles with ``cold_shape``: shapes compiled (first forwards of a shape)
    cold_compile_s_total: float = 0.0  # the model seconds those first forwards paid extra
    spec: SpecTotals | None = None  # speculative profiles: lifetime verify counts


@dataclass
class _Forward:
    kind: str
    duration: float
    batch: list[tuple[SimRequest, int]]


async def _sleep_until(deadline: float) -> None:
    while (delay := deadline - time.perf_counter()) > 0:
        await asyncio.sleep(delay)


class Scheduler:
    """Owns waiting/running requests and the radix cache; ``run()`` is the one scheduler task."""

    def __init__(
        self, profile: SimProfile, *, step_factor: float = 1.0, time_scale: float = 1.0,
        disable_radix_cache: bool = False, grid: tuple[float, float] | None = None,
        on_forward: Callable[[], None] | None = None, on_resident: Callable[[int], None] | None = None,
    ) -> None:
        """``grid``: (t0, step) in ``time.perf_counter()`` seconds; ``on_forward`` is called after every
        forward's events are out (the cluster publishes its counters there); ``on_resident(n)`` after
        every change of the resident count, with the new count (the power meter integrates there)."""
        self.profile = profile
        self.grid = grid
        self.on_forward = on_forward
        self.on_resident = on_resident
        self.step_factor = step_factor
        self.time_scale = time_scale
        self.disable_radix_cache = disable_radix_cache
        self.cache = RadixCache(profile.max_total_num_tokens)
        self.spec = profile.speculative
        self.cold = ColdShapes(profile.cold_shape) if profile.cold_shape is not None else None
        self.stats = SchedulerStats(spec=SpecTotals(self.spec.draft_tokens) if self.spec is not None else None)
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.chunked: SimRequest | None = None
        self.resident: dict[str, SimRequest] = {}
        self.inflight: dict[str, SimRequest] = {}
        self.held: list[SimRequest] = []  # retracted: waiting to be admitted again
        self._reserved = 0
        self._wake = asyncio.Event()

    # ----- called by the HTTP layer -------------------------------------------------------------
    def submit(self, req: SimRequest) -> None:
        """Queue a request; raises ``DuplicateRid`` if its rid is in flight."""
        if req.rid in self.inflight:
            raise DuplicateRid(req.rid)
        self.inflight[req.rid] = req
        self.waiting.append(req)
        self._wake.set()

    def abort(self, rid: str, message: str | None = None) -> None:
        """Drop a request; with ``message`` its stream gets a final abort chunk."""
        req = self.inflight.get(rid)
        if req is None:
            return
        if req in self.waiting:
            self.waiting.remove(req)
        if req in self.held:
            self.held.remove(req)
        if req in self.running:
            self.running.remove(req)
        if self.chunked is req:
            self.chunked = None
        self._finish(req)
        if message is not None:
            req.queue.put_nowait(Chunk(req.pending, {"type": "abort", "message": message}))
            req.pending = []

    def abort_all(self, message: str) -> None:
        """Abort every request in flight, each with a final abort chunk."""
        for rid in list(self.inflight):
            self.abort(rid, message)

    def flush_cache(self) -> bool:
        """Clear the prefix cache unless requests are in flight; returns whether it was cleared."""
        if self.inflight:
            return False
        self.cache.clear()
        return True

    @property
    def num_running(self) -> int:
        """Resident requests (prefilling or decoding)."""
        return len(self.resident)

    @property
    def num_waiting(self) -> int:
        """Requests waiting for admission (retracted ones included)."""
        return len(self.waiting) + len(self.held)

    def token_usage(self) -> float:
        """Fraction of ``max_total_num_tokens`` held by resident prompts and outputs."""
        used = sum(r.prompt_len + r.n_out for r in self.resident.values())
        return used / self.profile.max_total_num_tokens

    # ----- the scheduler task -------------------------------------------------------------------
    async def run(self) -> None:
        """Run forwards forever (cancel to stop)."""
        clock = time.perf_counter
        start: float | None = None
        while True:
            if not (self.waiting or self.resident or self.held):
                self._wake.clear()
                await self._wake.wait()
                start = clock() + self.profile.gather_s
                await _sleep_until(start)
            assert start is not None
            fwd = self._plan()
            if fwd is None:
                continue
            end = self._end_of(fwd, start, clock())
            await _sleep_until(end)
            late = clock() - end
            self.stats.wake_lateness_sum_s += late
            self.stats.wake_lateness_max_s = max(self.stats.wake_lateness_max_s, late)
            if fwd.kind == "prefill":
                self._complete_prefill(fwd)
            else:
                self._complete_decode(fwd)
            self.stats.emit_lateness_max_s = max(self.stats.emit_lateness_max_s, clock() - end)
            if self.on_forward is not None:
                self.on_forward()
            start = end

    def _end_of(self, fwd: _Forward, start: float, now: float) -> float:
        """When ``fwd``, due to start at ``start``, ends, given that the loop reaches it at ``now``; counts
        a late step and the model time lost when it cannot end where an on-time start would have.
        Without a grid: late when behind by more than ``max(JITTER_TOLERANCE_S, half the forward)``, and
        the timeline restarts at ``now``. On a grid: late only when restarting at ``now`` moves the end
        to a later grid instant (a prefill planned a few ms late still ends on its instant); the time
        lost is the grid steps skipped."""
        if self.grid is None:
            behind = now - start
            if behind <= max(JITTER_TOLERANCE_S, 0.5 * fwd.duration):
                return start + fwd.duration
            lost, end = behind, now + fwd.duration
        else:
            on_time = next_grid_instant(*self.grid, start, fwd.duration)
            end = next_grid_instant(*self.grid, now, fwd.duration)
            if end <= on_time + 1e-9:
                return on_time
            lost = end - on_time
        self.stats.late_steps += 1
        self.stats.late_decode_steps += int(fwd.kind == "decode")
        self.stats.lateness_total_s += lost
        if fwd.kind == "decode":
            self.stats.decode_lateness_total_s += lost
        return end

    def _lookup(self, req: SimRequest) -> int:
        if self.disable_radix_cache:
            return 0
        hit = min(self.cache.match(req.salt_key, req.input_ids), req.prompt_len - 1)
        page = self.profile.page_size
        return hit // page * page

    def _candidates(self) -> Iterator[tuple[int, int]]:
        for req in self.waiting:
            req.cached_tokens = self._lookup(req)
            req.prefill_left = req.prompt_len - req.cached_tokens
            yield req.prefill_left, req.reserve

    def _plan(self) -> _Forward | None:
        if self.waiting or self.chunked is not None:
            chunked = self.chunked
            take, grants = plan_prefill_forward(
                self.profile,
                chunked_remaining=chunked.prefill_left if chunked is not None else 0,
                resident=len(self.resident),
                kv_free=self.profile.max_total_num_tokens - self._reserved,
                waiting=self._candidates(),
            )
            if take or grants:
                batch: list[tuple[SimRequest, int]] = [(chunked, take)] if chunked is not None and take else []
                for grant in grants:
                    req = self.waiting.popleft()
                    self.resident[req.rid] = req
                    self._reserved += req.reserve
                    self._resident_changed()
                    batch.append((req, grant))
                tokens = sum(t for _, t in batch)
                self.stats.prefill_forwards += 1
                dur = prefill_forward_s(self.profile, tokens, time_scale=self.time_scale)
                if self.cold is not None:  # the first forward of a shape compiles it (harness.sim.cold)
                    extra = self.cold.forward_cost_s([r.prompt_len for r, _ in batch[len(batch) - len(grants):]])
                    self.stats.cold_compiles = self.cold.compiles
                    self.stats.cold_compile_s_total += extra * self.time_scale
                    dur += extra * self.time_scale
                return _Forward("prefill", dur, batch)
        if self.running:
            n = len(self.running)
            dur = decode_step_s(self.profile, n, step_factor=self.step_factor, time_scale=self.time_scale)
            if self.spec is not None:
                dur *= self.spec.verify_cost
            self.stats.decode_steps += 1
            self.stats.decode_model_s_total += dur
            self.stats.last_gen_throughput = n / dur
            return _Forward("decode", dur, [(r, 1) for r in self.running])
        if self.held and not self.resident:
            self._release_held(all_of_them=True)  # nothing runs: no decode step will count them down
            return None
        if self.waiting and not self.resident:
            # Can never be admitted (capacity): fail it rather than spin.
            self.abort(self.waiting[0].rid, "request exceeds the simulated token capacity")
        return None

    def _complete_prefill(self, fwd: _Forward) -> None:
        last: list[tuple[SimRequest, Chunk]] = []
        for req, tokens in fwd.batch:
            if req.finished:
                continue
            req.prefill_left -= tokens
            if req.prefill_left > 0:
                self.chunked = req
                continue
            if self.chunked is req:
                self.chunked = None
            if not self.disable_radix_cache:
                self.cache.insert(req.salt_key, req.input_ids)
            self.stats.prompt_tokens_total += req.prompt_len
            self.stats.cached_tokens_total += req.cached_tokens
            if self.spec is not None and req.spec is None:  # a retracted request keeps its counts
                req.spec = SpecTally(self.spec.draft_tokens, key=request_key(self.spec.seed, req.input_ids),
                                     forge=self.spec.forge_report)
            if not self._emit(req, last):
                self.running.append(req)
                if req.retract_steps:
                    self._retract(req)
        self._deliver(last)

    def _complete_decode(self, fwd: _Forward) -> None:
        last: list[tuple[SimRequest, Chunk]] = []
        spec = self.spec
        for req, _ in fwd.batch:
            if req.finished:
                continue
            if spec is None or req.spec is None:
                self._emit(req, last)
            else:
                drafts = accepted_drafts(spec.accept_probs, req.spec.key, req.n_out)
                self._emit(req, last, 1 + drafts, verify=True)
        self.running = [r for r in self.running if not r.finished]
        self._deliver(last)
        self._release_held()

    def _retract(self, req: SimRequest) -> None:
        """Take a running request out of the batch (fault ``retract``); it keeps its tokens."""
        self.running.remove(req)
        if self.resident.pop(req.rid, None) is not None:
            self._reserved -= req.reserve
            self._resident_changed()
        req.held_left, req.retract_steps = req.retract_steps, 0
        self.held.append(req)

    def _release_held(self, all_of_them: bool = False) -> None:
        """Count down held requests by one decode step; those done wait for admission again."""
        for req in list(self.held):
            req.held_left -= 1
            if all_of_them or req.held_left <= 0:
                self.held.remove(req)
                self.waiting.appendleft(req)

    @staticmethod
    def _deliver(last: list[tuple[SimRequest, Chunk]]) -> None:
        # Final chunks go after every other chunk of the same forward, so the first request to finish
        # (min e_i) closes a resident window only after the whole step's burst has been written.
        for req, chunk in last:
            req.queue.put_nowait(chunk)

    def _emit(self, req: SimRequest, last: list[tuple[SimRequest, Chunk]], count: int = 1,
              verify: bool = False) -> bool:
        """Produce the request's next ``count`` tokens (fewer when it finishes first); returns whether the
        request finished (its final chunk is appended to ``last`` instead of being delivered at once).
        ``verify``: a verify step, counted with the drafts it emitted (``count - 1`` unless capped)."""
        finish: FinishReason | None = None
        emitted = 0
        while emitted < count and finish is None:
            tok = req.next_token()
            req.n_out += 1
            req.pending.append(tok)
            emitted += 1
            if req.n_out >= req.max_new_tokens:
                finish = {"type": "length", "length": req.max_new_tokens}
            elif (tok == EOS_ID and not req.ignore_eos) or tok in req.stop_ids:
                finish = {"type": "stop", "matched": tok}
        self.stats.generation_tokens_total += emitted
        if verify and req.spec is not None and self.stats.spec is not None:
            # A step cut short by max_new_tokens or a stop token counts only the drafts it emitted, so
            # completion_tokens == 1 (prefill) + verify steps + accepted drafts holds exactly.
            req.spec.observe(emitted - 1)
            self.stats.spec.observe(emitted - 1)
        if finish is not None:
            last.append((req, Chunk(req.pending, finish, req.spec)))
            req.pending = []
            self._finish(req)
            return True
        if req.stream and (req.n_out == 1 or len(req.pending) >= req.interval):
            if req.sink is not None:
                req.sink(Chunk(req.pending, None))
            else:
                req.queue.put_nowait(Chunk(req.pending, None))
            req.pending = []
        return False

    def _resident_changed(self) -> None:
        if self.on_resident is not None:
            self.on_resident(len(self.resident))

    def _finish(self, req: SimRequest) -> None:
        req.finished = True
        self.inflight.pop(req.rid, None)
        if self.resident.pop(req.rid, None) is not None:
            self._reserved -= req.reserve
            self._resident_changed()
