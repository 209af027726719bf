"""Reading another host's Delta table without trusting it (edge module: files).

A Delta log names the data files it adds by path, and delta-rs opens whatever a path names: an
absolute path, a URL or ``../`` in a hostile log would read outside the other host's directory. So a
foreign table is never opened where it lies. :func:`read_foreign_delta` first copies it into a scratch
directory of this workspace: only regular files (every entry checked with ``lstat``, opened with
``O_NOFOLLOW``; a symlink or special file is refused, never followed), only names of a Delta table's
own grammar (``_delta_log/<20 digits>.json``, ``<20 digits>.checkpoint.parquet``, ``_last_checkpoint``;
data files ``<name>.parquet`` at the top), at most :data:`FOREIGN_TABLE_MAX_BYTES` in all. Then every
path the copied log and checkpoints name (``add`` and ``remove`` actions) must be a plain file name
of the copy (no ``/``, ``%``, ``:`` or ``..``), and no action may carry a deletion vector (they name
files too) and its newest entries must pass :func:`harness.store.ledger.durable.scan` (a zero-length
entry would read as an empty commit); only then is the copy opened with delta-rs, read, and removed. Anything else is a
``ValueError`` naming the reason.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import stat
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from harness.formats import read_regular
from harness.store.ledger import durable

FOREIGN_TABLE_MAX_BYTES = 256 * 2**20
_LOG_RE = re.compile(r"[0-9]{20}\.(json|checkpoint\.parquet)|_last_checkpoint")
_DATA_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,200}\.parquet")

__all__ = ["FOREIGN_TABLE_MAX_BYTES", "read_foreign_delta"]


def _entries(directory: Path) -> list[os.DirEntry[str]]:
    st = os.lstat(directory)
    if not stat.S_ISDIR(st.st_mode):
        raise ValueError(f"{directory}: not a directory (a symlink?); never followed")
    return sorted(os.scandir(directory), key=lambda e: e.name)


def _copy(src: os.DirEntry[str], dst: Path, budget: list[int]) -> None:
    st = os.lstat(src.path)
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{src.path}: not a regular file (a symlink?); never followed")
    budget[0] -= st.st_size
    if budget[0] < 0:
        raise ValueError(f"the table is larger than {FOREIGN_TABLE_MAX_BYTES} bytes; not read")
    dst.write_bytes(read_regular(Path(src.path), st.st_size + 1, follow_symlinks=False))


def _paths_ok(paths: list[object], where: str) -> None:
    for p in paths:
        if p is None:
            continue
        if not isinstance(p, str) or not _DATA_RE.fullmatch(p) or ".." in p:
            raise ValueError(f"{where} names data file {str(p)[:120]!r}, not a plain file name of the table; "
                             "never opened")


def _check_log(log: Path) -> None:
    for f in sorted(log.iterdir()):
        if f.name.endswith(".json"):
            for n, line in enumerate(f.read_text().splitlines(), 1):
                if not line.strip():
                    continue
                action = json.loads(line)
                for kind in ("add", "remove", "cdc"):
                    a = action.get(kind) if isinstance(action, dict) else None
                    if a is None:
                        continue
                    if not isinstance(a, dict) or a.get("deletionVector"):
                        raise ValueError(f"{f.name} line {n}: a {kind} action with a deletion vector or of "
                                         "another shape; not read")
                    _paths_ok([a.get("path")], f"{f.name} line {n}")
        elif f.name.endswith(".checkpoint.parquet"):
            t = pq.read_table(f)
            for kind in ("add", "remove"):
                if kind not in t.column_names:
                    continue
                col = t.column(kind).combine_chunks()
                if not pa.types.is_struct(col.type):
                    raise ValueError(f"{f.name}: its {kind} column is not a struct; not read")
                names = [col.type.field(i).name for i in range(col.type.num_fields)]
                _paths_ok(col.field(names.index("path")).to_pylist() if "path" in names else [], f.name)
                if "deletionVector" in names and col.field(names.index("deletionVector")).null_count != len(col):
                    raise ValueError(f"{f.name}: a {kind} action with a deletion vector; not read")


def read_foreign_delta(table_dir: Path, scratch_parent: Path) -> pa.Table:
    """The latest version of the other host's Delta table at ``table_dir``, read from a checked copy
    made under ``scratch_parent`` (module docstring; the copy is removed again); ``ValueError`` with
    the reason when it cannot be read safely."""
    scratch = scratch_parent / f".foreign-{secrets.token_hex(6)}"
    try:
        (scratch / "_delta_log").mkdir(parents=True)
        budget = [FOREIGN_TABLE_MAX_BYTES]
        has_log = False
        for e in _entries(table_dir):
            if e.name == "_delta_log":
                for le in _entries(Path(e.path)):
                    if _LOG_RE.fullmatch(le.name):
                        _copy(le, scratch / "_delta_log" / le.name, budget)
                        has_log = True
            elif _DATA_RE.fullmatch(e.name):
                _copy(e, scratch / e.name, budget)
        if not has_log:
            raise ValueError("no Delta log (_delta_log/) of its own; not read")
        _check_log(scratch / "_delta_log")
        if (bad := durable.scan(scratch)) is not None:  # a zero-length entry would read as an empty commit
            raise ValueError(f"{bad.file.name}: {bad.reason}; not read")
        try:
            return DeltaTable(str(scratch)).to_pyarrow_table()
        except (DeltaError, TableNotFoundError, OSError, pa.ArrowException) as exc:
            raise ValueError(f"not a readable Delta table: {durable.first_line(exc)[:200]}") from None
    except (OSError, json.JSONDecodeError, pa.ArrowException) as exc:
        raise ValueError(f"cannot be read: {durable.first_line(exc)[:200]}") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
