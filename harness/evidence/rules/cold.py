"""Evidence rule of cold requests (pure; docs/coldness.md): ``cold-in-measured-wave``.

A measured wave that holds a cold or restarted request (the first of its shape on its service start,
``harness.measure.coldness``) measured a compilation, not the served speed: its TTFT, HTTP and prefill
figures include the slow first forward (and its batch-mates waited for it too). The cold request never
enters a warm TTFT figure, but the wave's own figures do: the finding is ``blocking`` for a prefill wave
(its prefill rate's window holds the compile) and a ``warning`` for a decode wave (its resident window
opens after every first token, so the resident rate is untouched; TTFT and HTTP figures are not).
Read from the archive's ``coldness.json`` (``ArchiveData.extra["coldness"]``); it applies to every kind.
"""

from __future__ import annotations

from typing import Any

from harness.evidence.findings import ArchiveData, Finding
from harness.evidence.findings import make_finding as _f
from harness.evidence.rules._registry import ALL, rule

RULE = "cold-in-measured-wave"


def _describe(waves: list[dict[str, Any]]) -> str:
    cold = sum(int(w.get("cold") or 0) for w in waves)
    restarted = sum(int(w.get("restarted") or 0) for w in waves)
    parts = [f"{cold} cold"] if cold else []
    parts += [f"{restarted} restarted"] if restarted else []
    return " and ".join(parts) + f" request(s) in {len(waves)} measured wave(s) (e.g. {waves[0].get('wave_id')})"


@rule(RULE, kinds=ALL)
def rule_cold_in_measured(d: ArchiveData) -> list[Finding]:
    """Measured waves holding a cold or restarted request (``coldness.json``)."""
    doc = d.extra.get("coldness") or {}
    waves = [w for w in doc.get("waves") or [] if w.get("phase") == "measured"
             and (int(w.get("cold") or 0) or int(w.get("restarted") or 0))]
    out: list[Finding] = []
    remedy = ("warm every shape before measuring it: warmup_waves >= 1 at each concurrency and input length of "
              "the cell (the cold TTFT stays in the ttft_cold_* / ttft_restarted_* columns)")
    prefill = [w for w in waves if w.get("workload") == "prefill"]
    other = [w for w in waves if w.get("workload") != "prefill"]
    if prefill:
        out.append(_f(d.archive_id, RULE, "blocking",
                      _describe(prefill) + ": the prefill rate's window holds the shape's compilation",
                      remedy, [str(w["wave_id"]) for w in prefill]))
    if other:
        out.append(_f(d.archive_id, RULE, "warning",
                      _describe(other) + ": their TTFT and HTTP figures include the shape's compilation (left out "
                      "of the warm TTFT columns)", remedy, [str(w["wave_id"]) for w in other]))
    return out
