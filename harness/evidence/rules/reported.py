"""Evidence rule about the counts a server reports (pure; docs/speculative.md "Reported counts are claims").

- ``reported-counts``: a measured request whose reported counts contradict each other or the stream the
  client read (speculative verify steps, drafts proposed and accepted, the acceptance histogram, cached
  and completion tokens), or a measured wave whose vLLM ``/metrics`` counter deltas do
  (:mod:`harness.measure.claims`). Blocking: the counts were not used (the wave's, cell's and run's
  acceptance is withheld), and the finding names the waves, so their rows and every verdict built on
  them (a matched run's, an ABBA screen's) are withheld. The message names the request, the field and
  the values.

Applies to every kind; reads ``requests`` (with their ``spec_*`` counts), ``services`` (k, the draft
tokens per step, when they say it) and ``extra['server_metrics']`` (``spec_counters`` per wave).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.evidence.findings import ArchiveData, Finding
from harness.evidence.findings import make_finding as _f
from harness.evidence.rules._registry import ALL, rule
from harness.measure.claims import Contradiction, draft_length, request_contradictions, wave_counter_contradictions

SHOWN = 3
"""Contradictions spelled out in the message (the count says how many more)."""


def _counters(d: ArchiveData, waves: set[str]) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for row in d.extra.get("server_metrics") or []:
        if isinstance(row, dict) and isinstance(row.get("spec_counters"), dict) and str(row.get("wave_id")) in waves:
            out[str(row["wave_id"])] = row["spec_counters"]
    return out


def contradictions(d: ArchiveData) -> list[Contradiction]:
    """Every contradiction among the measured requests' reported counts and their waves' counter deltas."""
    k = draft_length(d.services)
    measured = [r for r in d.requests if r.get("phase") == "measured"]
    found = [c for r in measured for c in request_contradictions(r, k)]
    waves = {str(r.get("wave_id")) for r in measured}
    return found + wave_counter_contradictions(_counters(d, waves), measured, k)


@rule("reported-counts", kinds=ALL)
def rule_reported_counts(d: ArchiveData) -> list[Finding]:
    """Measured requests or waves whose reported counts cannot be true (module docstring)."""
    found = contradictions(d)
    if not found:
        return []
    shown = "; ".join(c.describe() for c in found[:SHOWN])
    more = f" (and {len(found) - SHOWN} more)" if len(found) > SHOWN else ""
    subjects = len({c.subject for c in found})
    return [_f(d.archive_id, "reported-counts", "blocking",
               f"{len(found)} reported count(s) of {subjects} request(s) or wave(s) contradict the server's other "
               f"counts or the stream: {shown}{more}; their acceptance was withheld",
               "a server that reports counts that cannot be true is not evidence: fix or replace its counting "
               "(speculative metrics, usage) and measure again; no figure is built from these counts",
               [c.wave_id for c in found])]
