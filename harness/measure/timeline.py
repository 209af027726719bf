"""Per-request timeline of one wave (like vLLM's ``--plot-timeline``), pure.

:func:`wave_timeline` turns one wave's records into rows of seconds relative to the wave's first
send (every request, failed ones included): send ``s_i``, first token ``f_i``, last token ``e_i``,
end ``d_i`` (docs/metrics.md#notation), plus the wave's resident decode window ``[t_s, t_e]``
(:func:`harness.measure.metrics.resident_window`) and its whole-wave HTTP window
(:func:`harness.measure.metrics.http_window`), each ``None`` when the wave has none. With the archive's
TTFT classes (:mod:`harness.measure.coldness`) each row also says whether its request was ``cold``,
``restarted`` or ``warm`` (``ttft_class``; ``None`` and left out of the JSON without them).
:func:`group_waves` and :func:`first_measured_waves` pick waves out of an archive's records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from harness.measure.metrics import NS, WaveRate, http_window, resident_window
from harness.records import RequestRecord

__all__ = ["Timeline", "TimelineRow", "first_measured_waves", "group_waves", "wave_timeline"]


@dataclass(frozen=True)
class TimelineRow:
    """One request: times in seconds since the wave's first send (``None``: no token arrived)."""

    rid: str
    case_id: str
    send_s: float
    first_token_s: float | None
    last_token_s: float | None
    done_s: float
    ok: bool
    error: str | None
    n_tokens: int
    ttft_class: str | None = None  # cold / restarted / warm (harness.measure.coldness); None: not classified


@dataclass(frozen=True)
class Timeline:
    """One wave: rows sorted by send (then rid), windows as ``(start_s, end_s)`` relative to
    ``origin_ns`` (the wave's first send, client monotonic ns), ``None`` when the wave has none."""

    wave_id: str
    cell_id: str
    phase: str
    workload: str
    concurrency: int
    origin_ns: int
    rows: tuple[TimelineRow, ...]
    resident: tuple[float, float] | None
    http: tuple[float, float] | None

    @property
    def n_failed(self) -> int:
        """Requests of the wave that ended with an error."""
        return sum(1 for r in self.rows if not r.ok)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON data (the CLI's ``--json`` and the report snapshot's ``timelines`` entries)."""
        return {"wave_id": self.wave_id, "cell_id": self.cell_id, "phase": self.phase, "workload": self.workload,
                "concurrency": self.concurrency, "origin_ns": self.origin_ns,
                "resident": list(self.resident) if self.resident else None,
                "http": list(self.http) if self.http else None,
                "rows": [{k: v for k, v in asdict(r).items() if k != "ttft_class" or v is not None}
                         for r in self.rows]}


def _rel(t_ns: int | None, origin: int) -> float | None:
    return None if t_ns is None else (t_ns - origin) / NS


def _window(w: WaveRate, origin: int) -> tuple[float, float] | None:
    return ((w.start_ns - origin) / NS, (w.end_ns - origin) / NS) if w.contributes else None


def wave_timeline(records: Sequence[RequestRecord], classes: Mapping[str, str] | None = None) -> Timeline:
    """The timeline of one wave (every record is one request of it). Raises ``ValueError`` for no
    records. Identity fields come from the first record sent. ``classes``: TTFT class by request id
    (a request missing from it is ``warm``); None leaves rows unclassified."""
    if not records:
        raise ValueError("a timeline needs at least one record")
    ordered = sorted(records, key=lambda r: (r.send_ns, r.rid))
    origin = ordered[0].send_ns
    rows = tuple(
        TimelineRow(rid=r.rid, case_id=r.case_id, send_s=(r.send_ns - origin) / NS,
                    first_token_s=_rel(r.first_token_ns, origin), last_token_s=_rel(r.last_token_ns, origin),
                    done_s=(r.done_ns - origin) / NS, ok=r.ok, error=r.error, n_tokens=r.n_tokens,
                    ttft_class=None if classes is None else classes.get(r.rid, "warm"))
        for r in ordered)
    head = ordered[0]
    return Timeline(wave_id=head.wave_id, cell_id=head.cell_id, phase=head.phase, workload=head.workload,
                    concurrency=head.concurrency, origin_ns=origin, rows=rows,
                    resident=_window(resident_window(ordered), origin), http=_window(http_window(ordered), origin))


def group_waves(records: Sequence[RequestRecord]) -> dict[str, list[RequestRecord]]:
    """Records by wave id, waves in order of their first record (an archive's write order)."""
    out: dict[str, list[RequestRecord]] = {}
    for r in records:
        out.setdefault(r.wave_id, []).append(r)
    return out


def first_measured_waves(records: Sequence[RequestRecord]) -> list[str]:
    """The id of the first measured wave (``phase == "measured"``, in write order) of each cell, cells
    in order of their first record."""
    cells: dict[str, str | None] = {}
    for r in records:
        cells.setdefault(r.cell_id, None)
        if r.phase == "measured" and cells[r.cell_id] is None:
            cells[r.cell_id] = r.wave_id
    return [w for w in cells.values() if w is not None]
