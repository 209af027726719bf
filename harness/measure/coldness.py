"""Cold, restarted and warm requests, and their TTFT apart (pure; docs/coldness.md).

Every request of an archive is classified against a declared shape key (:class:`ShapeKey`: the
input-length bucket of its prompt x the batch tier of its concurrency) and the service start that
served it (:class:`ServiceStart`), taking requests in send order within each start and starts in the
order they happened:

- ``cold``: the first request of its shape on its service start, the shape never served before by a
  service of the same identity in the archive (a fresh process compiles it);
- ``restarted``: the first request of its shape on its service start, the shape served before on an
  earlier start of the same service identity (``identity_hash`` of the start's ``service.json``
  entry): a restarted process that may or may not have kept its compiled shapes (a persistent
  compile cache);
- ``warm``: every other request.

Warmup requests are classified too (they are kept in the archive; the cold figures are mostly theirs).
A start's identity ``""`` (unknown) is never the same as another's. :func:`classify` gives each
request id its class; :func:`cell_columns` the per-cell TTFT columns of the ``cells`` table
(``ttft_cold_*``, ``ttft_restarted_*``, ``ttft_warm_*``, seconds; ``_n`` counts), the warm figures over
the measured requests the cell's other latency columns use, without a cold or restarted one;
:func:`wave_counts` the cold and restarted requests of each wave (what the ``cold-in-measured-wave``
rule reads).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from harness.measure import latency as lat
from harness.records import RequestRecord
from harness.service.identity.identity import identity_hash

TtftClass = Literal["cold", "restarted", "warm"]
CLASSES: tuple[TtftClass, ...] = ("cold", "restarted", "warm")
COLDNESS_FILE = "coldness.json"
COLDNESS_VERSION = 1  # 1: first version (2026-12-02)

CELL_COLUMNS: tuple[str, ...] = (
    "ttft_cold_n", "ttft_cold_p50_s", "ttft_cold_max_s",
    "ttft_restarted_n", "ttft_restarted_p50_s", "ttft_restarted_max_s",
    "ttft_warm_n", "ttft_warm_p50_s", "ttft_warm_p90_s", "ttft_warm_p99_s",
)
"""The per-cell columns (:class:`harness.measure.results.CellResult` fields), seconds and counts."""

__all__ = ["CELL_COLUMNS", "CLASSES", "COLDNESS_FILE", "ServiceStart", "ShapeKey", "TtftClass", "archive_starts",
           "cell_columns", "classify", "coldness_doc", "starts_of", "wave_counts"]


@dataclass(frozen=True)
class ShapeKey:
    """The declared shape of a request: ``(input-length bucket, batch tier)``. The bucket is the index
    of the first of ``input_len_edges`` (tokens) at or above its prompt length (``len(edges)`` beyond
    the last; one bucket without edges); the tier the smallest of ``batch_tiers`` at or above its
    concurrency (the concurrency itself above the last tier or without tiers)."""

    input_len_edges: tuple[int, ...] = ()
    batch_tiers: tuple[int, ...] = ()

    def shape(self, input_len: int, concurrency: int) -> tuple[int, int]:
        """The shape of a request of ``input_len`` prompt tokens sent at ``concurrency``."""
        b = bisect.bisect_left(self.input_len_edges, input_len)
        i = bisect.bisect_left(self.batch_tiers, concurrency)
        return b, self.batch_tiers[i] if i < len(self.batch_tiers) else concurrency

    def to_json(self) -> dict[str, Any]:
        """The key as archived in ``coldness.json``."""
        return {"input_len_edges": list(self.input_len_edges), "batch_tiers": list(self.batch_tiers)}


@dataclass(frozen=True)
class ServiceStart:
    """One service start: its ``start_index`` (1-based), the service's identity hash (``""``: unknown),
    the run that started it and its ready instant (client monotonic ns; None: not recorded)."""

    index: int
    identity: str
    run_id: str
    ready_ns: int | None = None


def starts_of(services: Sequence[Mapping[str, Any]], ready_ns: Sequence[int], run_id: str,
              earlier_runs: Sequence[str] = ()) -> list[ServiceStart]:
    """The service starts of an archive: ``services`` (``service.json``, in start order), of which the
    last ``len(ready_ns)`` were started by ``run_id`` (this run's ``service-ready`` events, in order) and
    the ones before by the runs it resumed, ``earlier_runs`` in order (one start each: a formal matrix
    starts one service per run; starts beyond them get run id ``""``)."""
    n_old = max(len(services) - len(ready_ns), 0)
    out: list[ServiceStart] = []
    for i, s in enumerate(services):
        ident = identity_hash([s]) if s else ""
        if i < n_old:
            out.append(ServiceStart(int(s.get("start_index") or i + 1), ident,
                                    earlier_runs[i] if i < len(earlier_runs) else ""))
        else:
            out.append(ServiceStart(int(s.get("start_index") or i + 1), ident, run_id, int(ready_ns[i - n_old])))
    return out


def archive_starts(records: Sequence[RequestRecord], services: Sequence[Mapping[str, Any]],
                   events: Sequence[Mapping[str, Any]], run_id: str) -> list[ServiceStart]:
    """:func:`starts_of` for an archive written by run ``run_id``: its ``service-ready`` events
    (``events.jsonl``) and, before them, the runs it resumed in the order their records come."""
    ready = [int(e["t_ns"]) for e in events if e.get("event") == "service-ready" and e.get("t_ns") is not None]
    earlier = [rid for rid in dict.fromkeys(r.run_id for r in records) if rid != run_id]
    return starts_of(services, ready, run_id, earlier)


def _start_of(r: RequestRecord, starts: Sequence[ServiceStart]) -> int:
    """Position in ``starts`` of the start that served ``r``: the last start of its run ready at or
    before its send; a run's only start; -1 when none is known."""
    mine = [i for i, s in enumerate(starts) if s.run_id == r.run_id]
    timed = [i for i in mine if starts[i].ready_ns is not None and int(starts[i].ready_ns or 0) <= r.send_ns]
    if timed:
        return timed[-1]
    return mine[0] if len(mine) == 1 else -1


def classify(records: Sequence[RequestRecord], starts: Sequence[ServiceStart], key: ShapeKey) -> dict[str, TtftClass]:
    """Each record's class by request id (module docstring). Records of no known start are taken as
    one start of unknown identity per run."""
    where = [(_start_of(r, starts), r) for r in records]
    unknown = {rid: len(starts) + k for k, rid in enumerate(dict.fromkeys(r.run_id for s, r in where if s < 0))}
    placed = sorted(((s if s >= 0 else unknown[r.run_id], r) for s, r in where),
                    key=lambda p: (p[0], p[1].send_ns, p[1].rid))
    seen_start: dict[int, set[tuple[int, int]]] = {}
    seen_identity: dict[str, set[tuple[int, int]]] = {}
    out: dict[str, TtftClass] = {}
    for pos, r in placed:
        ident = starts[pos].identity if pos < len(starts) else ""
        shape = key.shape(r.input_len, r.concurrency)
        here = seen_start.setdefault(pos, set())
        before = seen_identity.get(ident, set()) if ident else set()
        out[r.rid] = "warm" if shape in here else ("restarted" if shape in before else "cold")
        here.add(shape)
        if ident:
            seen_identity.setdefault(ident, set()).add(shape)
    return out


def _ttft(records: Sequence[RequestRecord], ps: Sequence[float], prefix: str) -> dict[str, float]:
    st = lat.stats(lat.ttft(records), ps)
    return {f"{prefix}_n": st["n"], **{f"{prefix}_{k}_s": v for k, v in st.items() if k not in ("n", "mean")}}


def cell_columns(cell_records: Sequence[RequestRecord], measured: Sequence[RequestRecord],
                 classes: Mapping[str, TtftClass]) -> dict[str, float]:
    """The ``ttft_cold_*`` / ``ttft_restarted_*`` columns over every record of a cell (warmups
    included) of that class, and ``ttft_warm_*`` over ``measured`` (the cell's measured requests of
    ok rounds) without the cold and restarted ones. TTFT as :func:`harness.measure.latency.ttft`
    (successful requests with a token); NaN statistics and ``n = 0`` when none."""
    out: dict[str, float] = {}
    for cls in ("cold", "restarted"):
        cols = _ttft([r for r in cell_records if classes.get(r.rid) == cls], (50.0,), f"ttft_{cls}")
        out |= {k: v for k, v in cols.items() if k in CELL_COLUMNS}
    warm = _ttft([r for r in measured if classes.get(r.rid, "warm") == "warm"], (50.0, 90.0, 99.0), "ttft_warm")
    out |= {k: v for k, v in warm.items() if k in CELL_COLUMNS}
    return {k: out[k] for k in CELL_COLUMNS}


@dataclass(frozen=True)
class WaveCount:
    """Cold and restarted requests of one wave."""

    wave_id: str
    cell_id: str
    phase: str
    workload: str
    cold: int = 0
    restarted: int = 0
    rids: tuple[str, ...] = field(default=())


def wave_counts(records: Sequence[RequestRecord], classes: Mapping[str, TtftClass]) -> list[WaveCount]:
    """The waves (in first-record order) that hold a cold or restarted request, with their counts."""
    by: dict[str, list[RequestRecord]] = {}
    for r in records:
        if classes.get(r.rid, "warm") != "warm":
            by.setdefault(r.wave_id, []).append(r)
    return [WaveCount(w, rs[0].cell_id, rs[0].phase, rs[0].workload,
                      sum(classes[r.rid] == "cold" for r in rs), sum(classes[r.rid] == "restarted" for r in rs),
                      tuple(r.rid for r in rs)) for w, rs in by.items()]


def coldness_doc(records: Sequence[RequestRecord], starts: Sequence[ServiceStart], key: ShapeKey,
                 classes: Mapping[str, TtftClass]) -> dict[str, Any]:
    """The archive's ``coldness.json``: the shape key, the starts, the cold and restarted request ids
    (every other request is warm) and the waves holding them."""
    ttft = {r.rid: (int(r.first_token_ns) - r.send_ns) / lat.NS for r in records
            if r.ok and r.first_token_ns is not None}
    return {
        "coldness_version": COLDNESS_VERSION, "definition": "docs/coldness.md", "shape_key": key.to_json(),
        "starts": [{"start_index": s.index, "identity_hash": s.identity, "run_id": s.run_id, "ready_ns": s.ready_ns}
                   for s in starts],
        "counts": {c: sum(1 for v in classes.values() if v == c) for c in CLASSES},
        "requests": [{"rid": r.rid, "class": classes[r.rid], "wave_id": r.wave_id, "cell_id": r.cell_id,
                      "phase": r.phase, "ttft_s": ttft.get(r.rid)}
                     for r in records if classes.get(r.rid, "warm") != "warm"],
        "waves": [{"wave_id": w.wave_id, "cell_id": w.cell_id, "phase": w.phase, "workload": w.workload,
                   "cold": w.cold, "restarted": w.restarted} for w in wave_counts(records, classes)],
    }
