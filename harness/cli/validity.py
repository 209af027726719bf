"""The archive's one verdict where a command reads its cells: exports, timelines, ``sim calibrate``.

Every surface asks :func:`verdict_of` (``harness.evidence.io.archive_verdict``: the findings stored
with the archive's ledger rows, else the rules run now) and words an invalid row the same way:
:func:`reasons` gives the rules of the blocking findings that invalidate it, or ``superseded`` when a
resume superseded the archive (its rows are then not valid, though no rule blocks them). Layers below
the command line get the verdict as plain data (:func:`export_verdict`; a mapping cell id -> reasons
for ``harness.sim.calibrate``). Prints nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from harness.errors import ArchiveError
from harness.evidence.verdict import Verdict
from harness.ids import round_of
from harness.store.archive import Archive
from harness.store.peers.export import ExportVerdict

SUPERSEDED = "superseded"
"""The reason given for a row of an archive a resume superseded (no blocking rule)."""


def verdict_of(workspace: Path | None, archive: Archive) -> Verdict:
    """The archive's :class:`Verdict` as it was decided (``harness.evidence.io.archive_verdict``)."""
    from harness.evidence.io import archive_verdict

    return archive_verdict(workspace, archive)


def reasons(verdict: Verdict, *row_ids: object) -> tuple[str, ...]:
    """Why the row named by ``row_ids`` (wave, round, cell or probe ids; None ignored) is invalid: the
    sorted rules of the blocking findings that invalidate it, :data:`SUPERSEDED` when only a resume
    did; () when it is valid."""
    if verdict.row_valid(*row_ids):
        return ()
    return verdict.rules_for(*row_ids) or (SUPERSEDED,)


def wave_ids(wave_id: str, cell_id: str | None) -> tuple[str | None, ...]:
    """The ids that decide a wave's figure: the wave, its round (None for a wave id of another shape)
    and its cell."""
    try:
        rid: str | None = round_of(wave_id)
    except ArchiveError:
        rid = None
    return wave_id, rid, cell_id


def invalid_reasons(verdict: Verdict, cell_ids: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """The cells among ``cell_ids`` the verdict holds invalid, each with its :func:`reasons` (in the
    order given, each once)."""
    out: dict[str, tuple[str, ...]] = {}
    for cid in cell_ids:
        why = reasons(verdict, cid)
        if why and cid not in out:
            out[cid] = why
    return out


def mark(why: Iterable[str]) -> str:
    """``INVALID (rule, ...)`` for an invalid row's reasons, '' for none."""
    rules = list(why)
    return f"INVALID ({', '.join(rules)})" if rules else ""


def export_verdict(verdict: Verdict) -> ExportVerdict:
    """The verdict as ``harness.store.peers.export`` takes it: origin, per-row validity with reasons,
    and the archive-level :meth:`Verdict.to_json` for the index."""

    def validity(*row_ids: str | None) -> tuple[bool, tuple[str, ...]]:
        why = reasons(verdict, *row_ids)
        return not why, why

    return ExportVerdict(verdict.data_origin, validity, verdict.to_json())
