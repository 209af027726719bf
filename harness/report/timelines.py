"""The report's wave timelines (edge module: reads archive records).

:func:`timeline_entries` gives, for every entry of a kind with a ``KindInfo.timeline_source`` (formal
matrices, then ABBA screens: descriptor order, then snapshot order), the timeline of the first measured
wave of each cell (a screen's cells are its legs A1, B1, B2, A2), at most :data:`MAX_TIMELINES` in all;
each entry is :meth:`harness.measure.timeline.Timeline.to_json` plus ``archive_id``, ``simulated`` and
``source`` (the kind's ``timeline_source``: ``formal`` or ``abba``). Archives without raw records give
none. Rows carry their TTFT class when the archive has a ``coldness.json`` (:func:`ttft_classes_of`), so
the figure marks cold requests. Each entry
carries ``invalid_rules``: the blocking rules of its archive's verdict (``snapshot['archives'][].verdict``)
when that verdict invalidates the whole archive or names the wave (never from its round or cell: validity
is never spread downward), else empty; the figure's caption then says the wave is INVALID.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.kinds import KINDS
from harness.measure.coldness import COLDNESS_FILE
from harness.measure.timeline import first_measured_waves, group_waves, wave_timeline
from harness.report.snapshot import json_value
from harness.report.snapshot.freeze import section_entries
from harness.store.archive import RECORDS_DIR, Archive
from harness.store.view import ArchiveView

MAX_TIMELINES = 16

__all__ = ["MAX_TIMELINES", "timeline_entries", "ttft_classes_of"]


def ttft_classes_of(archive: Archive | ArchiveView) -> dict[str, str] | None:
    """The cold and restarted request ids of an archive's ``coldness.json`` (read through its typed
    view; every other request is warm); None when the archive has no such file (made before it, or a
    kind that does not classify)."""
    files = archive if isinstance(archive, ArchiveView) else ArchiveView(archive)
    if not files.has(COLDNESS_FILE):
        return None
    doc = files.doc(COLDNESS_FILE)
    return {str(r["rid"]): str(r["class"]) for r in doc.get("requests") or [] if r.get("rid") is not None}


def timeline_entries(archives: Sequence[Archive], snapshot: Mapping[str, Any],
                     limit: int = MAX_TIMELINES) -> tuple[list[dict[str, Any]], int]:
    """``(entries, omitted)``: the timelines to draw (at most ``limit``) and how many more there were."""
    by_id = {a.archive_id: a for a in archives}
    verdicts = {str(a.get("archive_id")): a.get("verdict") or {} for a in snapshot.get("archives") or []}
    sources = [(k.timeline_source, e) for k in KINDS.values() if k.timeline_source
               for e in section_entries(snapshot, k.report_section)]
    out: list[dict[str, Any]] = []
    omitted = 0
    for source, entry in sources:
        archive = by_id.get(str(entry.get("archive_id")))
        if archive is None or not (archive.path / RECORDS_DIR).is_dir():
            continue
        records = archive.records()
        waves = group_waves(records)
        classes = ttft_classes_of(archive)
        for wid in first_measured_waves(records):
            if len(out) >= limit:
                omitted += 1
                continue
            t = wave_timeline(waves[wid], classes)
            v = verdicts.get(archive.archive_id) or {}
            hit = bool(v.get("blocking")) and (bool(v.get("whole")) or wid in (v.get("invalid_rows") or []))
            out.append(json_value(t.to_json() | {"archive_id": archive.archive_id, "source": source,
                                                 "simulated": bool(entry.get("simulated")),
                                                 "invalid_rules": list(v.get("blocking") or []) if hit else []}))
    return out, omitted
