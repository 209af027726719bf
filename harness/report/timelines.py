"""The report's wave timelines (edge module: reads archive records).

:func:`timeline_entries` gives, for every formal matrix and ABBA screen of a snapshot (in snapshot
order), the timeline of the first measured wave of each cell (a screen's cells are its legs A1, B1,
B2, A2), at most :data:`MAX_TIMELINES` in all; each entry is
:meth:`harness.measure.timeline.Timeline.to_json` plus ``archive_id``, ``simulated`` and ``source``
(``formal`` or ``abba``). Archives without raw records give none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.measure.timeline import first_measured_waves, group_waves, wave_timeline
from harness.report.snapshot import json_value
from harness.store.archive import RECORDS_DIR, Archive

MAX_TIMELINES = 16

__all__ = ["MAX_TIMELINES", "timeline_entries"]


def timeline_entries(archives: Sequence[Archive], snapshot: Mapping[str, Any],
                     limit: int = MAX_TIMELINES) -> tuple[list[dict[str, Any]], int]:
    """``(entries, omitted)``: the timelines to draw (at most ``limit``) and how many more there were."""
    by_id = {a.archive_id: a for a in archives}
    sources = [("formal", e) for e in snapshot.get("formal") or []] + \
              [("abba", e) for e in snapshot.get("screens") or []]
    out: list[dict[str, Any]] = []
    omitted = 0
    for source, entry in sources:
        archive = by_id.get(str(entry.get("archive_id")))
        if archive is None or not (archive.path / RECORDS_DIR).is_dir():
            continue
        records = archive.records()
        waves = group_waves(records)
        for wid in first_measured_waves(records):
            if len(out) >= limit:
                omitted += 1
                continue
            t = wave_timeline(waves[wid])
            out.append(json_value(t.to_json() | {"archive_id": archive.archive_id, "source": source,
                                                 "simulated": bool(entry.get("simulated"))}))
    return out, omitted
