"""Request identity and the id grammar of cells, rounds, waves and requests (pure).

Ids are stored in archives and ledgers, so their spelling is fixed:

- formal cell ``{workload}-c{concurrency:02d}-{hash8}`` (``decode-c04-daa02d4c``); sweep cell
  ``sweep-{rate:g}rps`` (``sweep-0.5rps``: a cell id may contain dots); ABBA cells are legs (``A1``);
- SLA-search measurement (one attempt at a probe's rate) ``{cell}.m{attempt}`` (``sweep-8rps.m0``;
  attempt ``a`` holds that rate's round indices ``a * rounds ..``);
- round ``{cell}.r{k}``, a retried round ``{cell}.r{k}.a{attempt}`` (attempt >= 1);
- wave ``{round}.w{j:03d}``; a warmup wave ``{cell}.warmup{start}.w{j:03d}`` (``start``, the
  service start it warmed, omitted when 0); an ABBA wave ``{leg}.{warmup|measured}.w{j:03d}``;
- request ``{run}.{wave}.{i:03d}`` (formal matrices, ABBA), ``{run}-{cell}-{k}-{i}`` (sweeps),
  ``{run}-{i:05d}`` (quick bench); a fresh cache salt is ``{run}.{request}``.

A wave's round is its id without the ``.wNNN`` suffix (an ABBA wave's "round" is its leg and phase).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from harness.errors import ArchiveError

__all__ = [
    "ANONYMOUS", "RequestIdentity", "fresh_salt", "leg_wave_id", "probe_id", "quick_request_id", "request_id",
    "round_of", "wave_id",
]

Phase = Literal["measured", "warmup"]

@dataclass(frozen=True, slots=True)
class RequestIdentity:
    """Who a request is inside a run: carried from the wave driver onto its record (and ledger
    rows). ``round_index`` is -1 for a formal warmup and the leg index in an ABBA screen.
    ``request_index``: its place in the unit that sent it (the ``i`` of its rid: its slot in its wave,
    a sweep or SLA round's arrival plan, a replay's trace line; -1: none, an oracle sentinel);
    ``corpus_sha256``: the ``manifest_sha256`` of the frozen corpus its case (``case_id``, prompt hash
    ``input_hash``) was taken from ("" outside a corpus). So ``(corpus_sha256, case_id)`` names the
    prompt and ``(run_id, wave_id, request_index)`` the request, whatever its rid looks like."""

    run_id: str = ""
    cell_id: str = ""
    round_index: int = -1
    wave_id: str = ""
    wave_index: int = -1
    phase: str = "measured"
    workload: str = "decode"
    case_id: str = ""
    input_hash: str = ""
    request_index: int = -1
    corpus_sha256: str = ""

    @property
    def request_key(self) -> str:
        """The request's stable key inside its run: ``<wave_id>#<request_index>``."""
        return f"{self.wave_id}#{self.request_index}"

    def fields(self) -> dict[str, Any]:
        """The identity as ``RequestRecord`` keyword arguments."""
        return {k: getattr(self, k) for k in IDENTITY_FIELDS}

    @classmethod
    def of(cls, record: Any) -> RequestIdentity:
        """The identity fields of any object carrying them (a ``RequestRecord``)."""
        return cls(**{k: getattr(record, k) for k in IDENTITY_FIELDS})


IDENTITY_FIELDS: tuple[str, ...] = tuple(RequestIdentity.__dataclass_fields__)
ANONYMOUS = RequestIdentity()  # a request outside any run (probes, ad-hoc waves)


def formal_cell_id(workload: str, concurrency: int, definition_hash: str) -> str:
    """A formal cell: ``decode-c04-daa02d4c`` (the first 8 hex digits of its definition's hash)."""
    return f"{workload}-c{concurrency:02d}-{definition_hash[:8]}"


def sweep_cell_id(rate: float) -> str:
    """The cell of one offered rate (req/s): ``sweep-8rps``, ``sweep-0.5rps``."""
    return f"sweep-{rate:g}rps"


def probe_id(rate: float, attempt: int) -> str:
    """One measurement of an SLA probe: attempt ``attempt`` (0: the first) at ``rate`` req/s, ``sweep-8rps.m0``."""
    return f"{sweep_cell_id(rate)}.m{attempt}"


def round_id(cell: str, k: int, attempt: int = 0) -> str:
    """Measured round ``k`` (0-based) of ``cell``; a retried round adds its attempt number."""
    if k < 0 or attempt < 0:
        raise ValueError(f"no round id for round {k}, attempt {attempt} of {cell!r}")
    return f"{cell}.r{k}" + (f".a{attempt}" if attempt else "")


def wave_id(cell: str, k: int, j: int, attempt: int = 0, service_start: int = 0) -> str:
    """Wave ``j`` of round ``k`` of ``cell``; ``k = -1`` names a warmup wave, numbered per service
    start (each new service is warmed anew)."""
    if k < 0:
        return f"{cell}.warmup{service_start or ''}.w{j:03d}"
    return f"{round_id(cell, k, attempt)}.w{j:03d}"


def leg_wave_id(leg: str, phase: Phase, j: int) -> str:
    """Wave ``j`` of an ABBA leg: ``A1.measured.w003``, ``B2.warmup.w000``."""
    return f"{leg}.{phase}.w{j:03d}"


def request_id(run_id: str, wave: str, i: int) -> str:
    """Request ``i`` of a wave of a formal matrix or ABBA screen."""
    return f"{run_id}.{wave}.{i:03d}"


def sweep_request_id(run_id: str, cell: str, k: int, i: int) -> str:
    """Request ``i`` of round ``k`` (-1: warmup) of a sweep cell."""
    return f"{run_id}-{cell}-{k}-{i}"


def quick_request_id(run_id: str, i: int) -> str:
    """Request ``i`` of a quick bench."""
    return f"{run_id}-{i:05d}"


def fresh_salt(run_id: str, rid: str) -> str:
    """The fresh cache salt of one request (unique per run and request)."""
    return f"{run_id}.{rid}"


@dataclass(frozen=True, slots=True)
class WaveRef:
    """A parsed wave id. ``round`` is None for a warmup or an ABBA wave (``leg`` style)."""

    cell: str
    wave: int
    phase: Phase = "measured"
    round: int | None = None
    attempt: int = 0
    service_start: int = 0

    @property
    def round_id(self) -> str:
        """The wave's round: its id without the ``.wNNN`` suffix."""
        if self.phase == "warmup":
            return f"{self.cell}.warmup{self.service_start or ''}"
        if self.round is None:
            return f"{self.cell}.measured"
        return round_id(self.cell, self.round, self.attempt)

    @property
    def wave_id(self) -> str:
        """The id this reference was parsed from."""
        return f"{self.round_id}.w{self.wave:03d}"


_WAVE = re.compile(
    r"(?P<cell>.+)\."
    r"(?:r(?P<round>0|[1-9]\d*)(?:\.a(?P<attempt>[1-9]\d*))?|warmup(?P<start>[1-9]\d*)?|(?P<measured>measured))"
    r"\.w(?P<wave>\d{3,})"
)
_ROUND = re.compile(r"(?P<cell>.+)\.r(?P<round>0|[1-9]\d*)(?:\.a(?P<attempt>[1-9]\d*))?")


def parse_wave_id(s: str) -> WaveRef:
    """The parts of a wave id (the wave number has at least 3 digits); raises ``ArchiveError``
    for anything else."""
    m = _WAVE.fullmatch(s)
    if m is None:
        raise ArchiveError(f"{s!r} is not a wave id",
                      hint="a wave id is CELL.rK[.aN].wNNN, CELL.warmup[S].wNNN or LEG.measured.wNNN")
    if m["round"] is not None:
        return WaveRef(m["cell"], int(m["wave"]), "measured", int(m["round"]), int(m["attempt"] or 0))
    if m["measured"] is not None:
        return WaveRef(m["cell"], int(m["wave"]))
    return WaveRef(m["cell"], int(m["wave"]), "warmup", service_start=int(m["start"] or 0))


def parse_round_id(s: str) -> tuple[str, int, int]:
    """``(cell, k, attempt)`` of a measured round id; raises ``ArchiveError`` when ``s`` is not one."""
    m = _ROUND.fullmatch(s)
    if m is None:
        raise ArchiveError(f"{s!r} is not a round id", hint="a round id is CELL.rK or CELL.rK.aN")
    return m["cell"], int(m["round"]), int(m["attempt"] or 0)


def round_of(wave: str) -> str:
    """The round id a wave belongs to: its id without ``.wNNN``, as spelled (a wave number wider
    than 3 digits is accepted as written); raises ``ArchiveError`` on a malformed wave id."""
    parse_wave_id(wave)
    return wave[: wave.rindex(".w")]
