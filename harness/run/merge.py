"""``dsv4h ledger merge``: another host's workspace into this one, trusting archives, never rows (edge: files).

The other host's directory is untrusted, read-only input (``harness.store.ledger.merge`` says what is
checked and how nothing of it is followed or written). For each archive of ``<other>/archives/``
named by an archive id and not yet ingested here: copy it verified (``copy_foreign_archive``), run the
evidence rules on the copy, ingest it and apply the findings, as a run's own finish does
(``harness.run.skeleton.settle``), so every row, its validity included, is re-derived from the archive
and resume supersession is re-applied by ingest. All or nothing per archive: an archive that fails any
step is removed again and refused. Then the other host's ledger files are compared with what was
merged (:func:`harness.store.ledger.merge.ledger_refusals`: they are only ever reported, never
copied), and its governance rows are validated and added (``merge_governance``). Merging the same
workspace again adds nothing; every refusal names the file and the reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from harness.errors import DsvError
from harness.evidence.io import check_archive, ingest_checked
from harness.interrupts import critical
from harness.store.archive import Archive, open_verified
from harness.store.finished import load_finished
from harness.store.ledger import ingested, ingested_ids, request_rows, successor_of
from harness.store.ledger.merge import (
    DEFAULT_LIMITS,
    MergeLimits,
    MergeResult,
    Refusal,
    copy_foreign_archive,
    discard_copy,
    foreign_archive_dirs,
    ledger_refusals,
    merge_governance,
    one_line,
    other_root,
)

__all__ = ["merge_workspace"]


def merge_workspace(workspace: Path, other: Path, limits: MergeLimits = DEFAULT_LIMITS) -> MergeResult:
    """Merge another host's workspace ``other`` into ``workspace`` (module docstring). Raises
    ``LedgerError`` when ``other`` holds neither ledgers/ nor archives/, is this workspace, or has
    either as a symlink, or a ledger table over ``limits``; everything else that cannot be merged is a
    refusal in the result."""
    root = other_root(workspace, other)
    out = MergeResult()
    dirs, out.refusals = foreign_archive_dirs(root)
    have = ingested_ids(workspace)  # one read of the runs ids; the ingest itself checks again, race-free
    for src in dirs:
        if src.name in have:
            out.present += 1
            continue
        try:
            merge_archive(workspace, src)
        except DsvError as exc:
            out.refusals.append(Refusal(str(src), one_line(exc)[:600]))
            continue
        out.archives.append(src.name)
    refused_ids = {Path(r.file).name for r in out.refusals}
    out.refusals += ledger_refusals(workspace, root, ingested_ids(workspace), refused_ids, limits)
    out.governance, refused = merge_governance(workspace, root, limits)
    out.refusals += refused
    return out


def merge_archive(workspace: Path, src: Path) -> None:
    """Copy one archive of another host verified, check it, ingest it and apply its findings; all or
    nothing (``DsvError`` naming the reason, the copy removed again)."""
    path, copied = copy_foreign_archive(workspace, src)
    try:
        view = load_finished(path)  # verified once, records read once: the rules and ingest share them
        _check_resume_claim(workspace, view.archive)
        findings = check_archive(view)
        with critical():
            ingest_checked(workspace, view, findings)
    except BaseException as exc:
        if copied and not ingested(workspace, src.name):
            discard_copy(path)
        if isinstance(exc, Exception) and not isinstance(exc, DsvError):
            # a self-consistent (hash-certified) but hostile archive may fail anywhere in the rules
            raise DsvError(f"cannot be checked or ingested: {type(exc).__name__}: {one_line(exc)[:200]}") from exc
        raise


def _pairs(records: pa.Table) -> set[tuple[Any, Any]]:
    """(rid, output hash) of every raw record."""
    if not records.num_rows:
        return set()
    return {(r["rid"], r["output_hash16"]) for r in request_rows(records).select(["rid", "output_hash16"]).to_pylist()}


def _carries(new: Archive, old: Archive) -> str | None:
    """Why ``new`` does not really continue ``old`` (None when it does): a resume keeps the plan and
    writes every record of the archive it continues first, with the same outputs."""
    if (old.run.plan_id or "") != (new.run.plan_id or ""):
        return f"the resuming archive's plan {new.run.plan_id} is not the resumed archive's plan {old.run.plan_id}"
    prior = _pairs(old.records_table())
    missing = prior - _pairs(new.records_table())
    if missing:
        return (f"the resuming archive does not carry {len(missing)} of the resumed archive's {len(prior)} request "
                "record(s) (a resume carries every record of the archive it continues)")
    return None


def _check_resume_claim(workspace: Path, archive: Archive) -> None:
    """Resume supersession across hosts only between archives that really continue each other: a
    merged archive that names an archive of this workspace as resumed must carry its records, and a
    merged archive that an archive here claims to have resumed must be carried by it. Else
    ``DsvError``: a self-consistent (hash-certified) archive could otherwise invalidate a good
    archive by naming it."""
    root = workspace / "archives"
    old_id = archive.run.resumed_from
    if old_id and ingested(workspace, old_id) and (root / old_id).is_dir():
        why = _carries(archive, open_verified(root / old_id))
        if why:
            raise DsvError(f"claims to resume archive {old_id} of this workspace, but {why}")
    successor = successor_of(workspace, archive.archive_id)
    if successor and (root / successor).is_dir():
        why = _carries(open_verified(root / successor), archive)
        if why:
            raise DsvError(f"archive {successor} of this workspace claims to have resumed it, but {why}")
