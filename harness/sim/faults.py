"""Injected faults (pure): parsing of ``sim_fault`` specs such as ``close_mid_stream:3``.

Kinds, with the meaning of the optional integer argument:

- ``close_mid_stream[:k]``: close the connection after ``k`` events (default 2), without ``[DONE]``.
- ``error_event[:k]``: after ``k`` events (default 1) send ``data: {"error": ...}`` then ``[DONE]``
  (HTTP 200); a non-streaming request gets HTTP 500 with a JSON error.
- ``slow_first_byte[:ms]``: delay the response headers (and the request's start) by ``ms`` ms
  (default 500).
- ``http_500``: answer HTTP 500 with a JSON error at once.
- ``stall[:k]``: after ``k`` events (default 2) the stream goes silent: nothing more is sent and
  the connection stays open until the client gives up (the request is dropped by the scheduler).
- ``stall_loop[:ms]``: after the request's second event, block the server's event loop for ``ms``
  ms (default 200): the simulator falls behind its model and counts late steps.
- ``retract[:k]``: after its first output token the request leaves the running batch (it is
  reported as queued) for ``k`` decode steps (default 50), then is admitted again with a new
  prefill, as SGLang retracts requests when its KV pool runs short.
- ``ignore_salt``: the request's ``cache_salt`` is ignored (a server without cache-salt support),
  so a prompt seen before is served from the prefix cache.

Every argument is bounded (``FAULT_MAX``; ``stall_loop`` at most 5000 ms, ``slow_first_byte`` at most
60 s): a larger one is refused like an unknown kind. Faults apply through the server's own options
(``SimOptions.fault``); a request body's ``sim_fault`` is honoured only by a simulator started with
``request_faults`` (``dsv4h sim serve --allow-request-faults``), and is refused with HTTP 400 otherwise
(``harness.sim.protocol.parse_generate``): a test hook is never open to whoever can send a request.
"""

from __future__ import annotations

from dataclasses import dataclass

FAULT_DEFAULTS: dict[str, int] = {"close_mid_stream": 2, "error_event": 1, "slow_first_byte": 500, "http_500": 0,
                                  "stall": 2, "stall_loop": 200, "retract": 50, "ignore_salt": 0}
FAULT_KINDS = tuple(FAULT_DEFAULTS)
FAULT_MAX: dict[str, int] = {"close_mid_stream": 100_000, "error_event": 100_000, "slow_first_byte": 60_000,
                             "http_500": 0, "stall": 100_000, "stall_loop": 5_000, "retract": 100_000,
                             "ignore_salt": 0}
"""The largest argument each kind accepts (events, milliseconds or decode steps; 0: no argument)."""


@dataclass(frozen=True)
class Fault:
    """A parsed fault: its kind and integer argument (events or milliseconds, see module doc)."""

    kind: str
    arg: int


def parse_fault(spec: str) -> Fault:
    """Parse ``kind`` or ``kind:N``; raises ``ValueError`` naming the valid kinds, or the bound
    (``FAULT_MAX``) an argument exceeds."""
    kind, sep, raw = spec.strip().partition(":")
    if kind not in FAULT_DEFAULTS:
        raise ValueError(f"unknown fault {kind!r}; valid faults: {', '.join(FAULT_KINDS)}")
    if not sep:
        return Fault(kind, FAULT_DEFAULTS[kind])
    try:
        arg = int(raw)
    except ValueError:
        raise ValueError(f"fault argument must be an integer, got {raw!r} in {spec!r}") from None
    if arg < 0:
        raise ValueError(f"fault argument must be >= 0, got {arg} in {spec!r}")
    if arg > FAULT_MAX[kind]:
        raise ValueError(f"fault argument of {kind} must be <= {FAULT_MAX[kind]}, got {arg} in {spec!r}")
    return Fault(kind, arg)
