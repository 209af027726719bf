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
"""

from __future__ import annotations

from dataclasses import dataclass

FAULT_DEFAULTS: dict[str, int] = {"close_mid_stream": 2, "error_event": 1, "slow_first_byte": 500, "http_500": 0,
                                  "stall": 2, "stall_loop": 200, "retract": 50, "ignore_salt": 0}
FAULT_KINDS = tuple(FAULT_DEFAULTS)


@dataclass(frozen=True)
class Fault:
    """A parsed fault: its kind and integer argument (events or milliseconds, see module doc)."""

    kind: str
    arg: int


def parse_fault(spec: str) -> Fault:
    """Parse ``kind`` or ``kind:N``; raises ``ValueError`` naming the valid kinds."""
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
    return Fault(kind, arg)
