"""Evidence rules about speculative measurements (pure; docs/speculative.md).

- ``sd-reconcile``: a matched AR/SD run (or a formal cell, ``cycles.json``) whose useful throughput
  ``C * a / T_SD`` (T_SD from the stream's event gaps) disagrees with its resident rate beyond the tolerance
  (``harness.measure.matched.RECONCILE_TOLERANCE``): one of a, T_SD or the rate is not what it seems
  (events coalescing several steps, a miscounting server). For a matched run blocking (scope run): its
  break-even verdict rests on a and T_SD, one of which the stream contradicts, so the verdict is
  withheld; for a formal cell (no verdict) a warning.
- ``sd-outputs``: a ``speculative-full-target`` matched run whose greedy outputs differ from the AR
  legs': a full target reproduces them, so the claim (or the server) is wrong; warning, with the
  first differing positions.
- ``acceptance-sources``: a wave whose speculative counts from two sources (the requests' own and the
  ``/metrics`` counter deltas) disagree: the counters saw traffic the harness did not send, or a
  server miscounts; warning naming the waves.

All three apply to every kind; they read ``extra['matched']`` (``matched.json``),
``extra['cycles']`` (``cycles.json``) and ``extra['acceptance']`` (``acceptance.parquet`` rows).
"""

from __future__ import annotations

from typing import Any

from harness.evidence.findings import ArchiveData, Finding
from harness.evidence.findings import make_finding as _f
from harness.evidence.rules._registry import ALL, rule

_COUNTS = ("verify_steps", "drafts_proposed", "drafts_accepted")


def _result(d: ArchiveData) -> dict[str, Any]:
    matched = d.extra.get("matched")
    res = matched.get("result") if isinstance(matched, dict) else None
    return res if isinstance(res, dict) else {}


@rule("sd-reconcile", kinds=ALL)
def rule_sd_reconcile(d: ArchiveData) -> list[Finding]:
    """A matched run whose C*a/T_SD and resident rate disagree (``reconciled`` false; blocking), or a
    formal matrix's cells that do (``cycles.json``, per cell; warning)."""
    cycles = d.extra.get("cycles")
    cells = [c for c in (cycles.get("cells") or []) if isinstance(c, dict)] if isinstance(cycles, dict) else []
    bad = [c for c in cells if c.get("reconciled") is False]
    if bad:
        c = bad[0]
        rel = c.get("reconcile_rel")
        shown = f"{rel * 100:+.1f}%" if isinstance(rel, int | float) else "unknown"
        return [_f(d.archive_id, "sd-reconcile", "warning",
                   f"{len(bad)} cell(s) whose useful throughput C*a/T_SD (T_SD from the stream) differs from the "
                   f"resident rate (e.g. {c.get('cell_id')}: {shown})",
                   "check that the server streams one event per verify step (stream_interval 1) and that its "
                   "counts cover the measured requests", [str(x.get("cell_id")) for x in bad])]
    r = _result(d)
    if r.get("reconciled") is not False:
        return []
    rel = r.get("reconcile_rel")
    shown = f"{rel * 100:+.1f}%" if isinstance(rel, int | float) else "unknown"
    return [_f(d.archive_id, "sd-reconcile", "blocking",
               f"useful throughput C*a/T_SD (T_SD {r.get('t_sd_s')} s from the stream's event gaps, a "
               f"{r.get('tokens_per_step')}) differs from the SD arm's resident rate by {shown}",
               "check that the server streams one event per verify step (stream_interval 1) and that its "
               "counts cover the measured requests; the break-even verdict rests on a and T_SD and is withheld", [],
               "run")]


@rule("sd-outputs", kinds=ALL)
def rule_sd_outputs(d: ArchiveData) -> list[Finding]:
    """A full-target matched run whose outputs differ from the AR legs'."""
    if d.run.get("claim_class") != "speculative-full-target":
        return []
    outputs = _result(d).get("outputs")
    if not isinstance(outputs, dict) or not isinstance(outputs.get("differing"), int) or not outputs["differing"]:
        return []
    firsts = outputs.get("first_differences") or []
    shown = "; ".join(f"{x[0]} wave {x[1]} case {x[2]} at token {x[3]}" for x in firsts[:3]
                      if isinstance(x, list | tuple) and len(x) == 4)
    return [_f(d.archive_id, "sd-outputs", "warning",
               f"{outputs['differing']} of {outputs.get('compared')} greedy outputs differ from "
               f"{outputs.get('reference_leg')}'s under a full-target claim (first: {shown or 'not recorded'})",
               "a full-target speculative server reproduces the target's greedy outputs: find why (sampling "
               "not greedy, a relaxed acceptance rule) or claim speculative-approximate", [], "run")]


@rule("acceptance-sources", kinds=ALL)
def rule_acceptance_sources(d: ArchiveData) -> list[Finding]:
    """Waves whose two sources of speculative counts disagree."""
    by_wave: dict[str, list[dict[str, Any]]] = {}
    for row in d.extra.get("acceptance") or []:
        if isinstance(row, dict) and row.get("wave_id") is not None:
            by_wave.setdefault(str(row["wave_id"]), []).append(row)
    bad = sorted(w for w, rows in by_wave.items()
                 if len({tuple(r.get(c) for c in _COUNTS) for r in rows}) > 1)
    if not bad:
        return []
    return [_f(d.archive_id, "acceptance-sources", "warning",
               f"{len(bad)} wave(s) whose speculative counts differ between sources (e.g. {bad[0]}: the "
               "requests' own counts and the server's /metrics counter deltas)",
               "the counters count every request the server served during the wave: make sure no other "
               "traffic reached it; otherwise one source miscounts", bad)]
