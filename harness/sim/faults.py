"""Injected faults (pure): parsing of ``sim_fault`` specs such as ``close_mid_stream:3``.

Kinds, with the meaning of the optional integer argument:

- ``close_mid_stream[:k]``: close the connection after ``k`` events (default 2), without ``[DONE]``.
- ``error_event[:k]``: after ``k`` events (default 1) send ``data: {"error": ...}`` then ``[DONE]``
  (HTTP 200); a non-streaming request gets HTTP 500 with a JSON error.
- ``slow_first_byte[:ms]``: delay the response headers (and the request's start) by ``ms`` ms
  (default 500).
- ``http_500``: answer HTTP 500 with a JSON error at once.
"""

from __future__ import annotations

from dataclasses import dataclass

FAULT_DEFAULTS: dict[str, int] = {"close_mid_stream": 2, "error_event": 1, "slow_first_byte": 500, "http_500": 0}
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
