"""Shared on-disk format helpers: the strict model base, YAML/JSON loading with field-path errors,
and atomic writes with one durability policy.

Durability policy (every writer in dsv4h goes through here): write a temporary sibling, flush and
fsync it, rename it into place (``os.replace``; or ``os.link`` when the target must not exist),
then fsync the directory so the rename itself survives a crash. A failed write removes its
temporary file and leaves the target as it was.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import math
import os
import re
import secrets
import shutil
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from harness.errors import DsvError, SpecError

__all__ = [
    "Strict", "UnreadableFile", "atomic_write", "atomic_write_dir", "atomic_write_table", "dump_json", "finite_float",
    "fixed_point", "fsync_dir", "json_default", "json_safe", "open_regular", "parse_model", "parse_wall",
    "read_regular", "read_yaml", "resolve_path",
]

M = TypeVar("M", bound=BaseModel)


class Strict(BaseModel):
    """Base of every file-backed model: unknown keys are errors, instances are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# ----------------------------------------------------------------------------------------------------
# Validation errors with field paths
# ----------------------------------------------------------------------------------------------------


def _first_model(ann: Any) -> type[BaseModel] | None:
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return ann
    for arg in getattr(ann, "__args__", ()) or ():
        found = _first_model(arg)
        if found is not None:
            return found
    return None


def _model_for_path(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model that owns the last key of ``loc`` (for did-you-mean suggestions)."""
    current: type[BaseModel] | None = model
    for part in loc[:-1]:
        if current is None:
            return None
        if isinstance(part, int):
            continue
        field = current.model_fields.get(str(part))
        if field is None:
            return None
        current = _first_model(field.annotation)
    return current


def format_validation_error(exc: ValidationError, model: type[BaseModel], source: str, *,
                            what: str = "invalid specification", hint: str | None = None,
                            error: type[DsvError] = SpecError) -> DsvError:
    """Turn a pydantic error into ``error`` naming the file, every bad field path and its fix
    (with a did-you-mean for unknown keys). ``hint`` replaces the generated per-field fixes."""
    lines: list[str] = []
    hints: list[str] = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        path = ".".join(str(p) for p in loc) or "(top level)"
        if err["type"] == "extra_forbidden":
            owner = _model_for_path(model, loc)
            key = str(loc[-1])
            fields = list(owner.model_fields) if owner else []
            # a model that moved keys into sections names their old spellings (FLAT_KEYS: old -> new path)
            moved: Mapping[str, str] = getattr(owner, "FLAT_KEYS", None) or {}
            close = difflib.get_close_matches(key, [*fields, *moved], n=1)
            msg = f"unknown key '{key}'"
            if close:
                better = moved.get(close[0], close[0])
                msg += f" (did you mean '{better}'?)"
                hints.append(f"rename '{path}' to '{'.'.join([*map(str, loc[:-1]), better])}'")
            else:
                hints.append(f"remove '{path}'; allowed keys here: {', '.join(fields)}")
        elif err["type"] == "missing":
            msg = "required field is missing"
            hints.append(f"add '{path}'")
        else:
            msg = err["msg"]
            if "input" in err and err["type"] not in ("value_error",):
                shown = repr(err["input"])
                msg += f" (got {shown[:80] + '...' if len(shown) > 80 else shown})"
            hints.append(f"fix '{path}'")
        lines.append(f"  {path}: {msg}")
    return error(f"{source}: {what}\n" + "\n".join(lines), hint=hint if hint is not None else "; ".join(hints))


def parse_model(model: type[M], data: Any, source: str, *, what: str = "invalid specification",
                hint: str | None = None, error: type[DsvError] = SpecError) -> M:
    """Validate ``data`` (a mapping) as ``model``; errors become ``error`` naming ``source``."""
    if not isinstance(data, Mapping):
        raise error(f"{source}: expected a mapping at the top level, got {type(data).__name__}",
                    hint=hint or "the file must be a mapping of keys to values")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise format_validation_error(exc, model, source, what=what, hint=hint, error=error) from None
    except RecursionError:
        raise error(f"{source}: nested too deeply to validate", hint="flatten the file") from None


MAX_YAML_BYTES = 64 << 20
MAX_YAML_NESTING = 100
MAX_YAML_EXPANDED_NODES = 2_000_000  # values once aliases are expanded ("billion laughs" stops here)
_BRACKETS = re.compile(r"[\[\]{}]")


class _SafeLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses a document whose aliases (``*name``) expand it past
    ``MAX_YAML_EXPANDED_NODES`` values: every consumer walks the expanded tree."""

    def compose_document(self) -> Any:
        node = super().compose_document()
        sizes: dict[int, int] = {}

        def size(n: Any) -> int:  # expanded size, each shared node computed once
            if id(n) in sizes:
                return sizes[id(n)]
            sizes[id(n)] = 1  # a cycle (recursive alias) counts once
            total = 1
            if isinstance(n, yaml.SequenceNode):
                total += sum(size(c) for c in n.value)
            elif isinstance(n, yaml.MappingNode):
                total += sum(size(k) + size(v) for k, v in n.value)
            sizes[id(n)] = min(total, MAX_YAML_EXPANDED_NODES + 1)
            return sizes[id(n)]

        if node is not None and size(node) > MAX_YAML_EXPANDED_NODES:
            raise yaml.YAMLError(f"its aliases (*name) expand it past {MAX_YAML_EXPANDED_NODES} values; "
                                 "write the values out")
        return node


def _flow_nesting(text: str) -> int:
    """The deepest ``[``/``{`` nesting in ``text`` (quotes and comments not excepted: an over-count
    only refuses absurd files). The YAML scanner's time grows with the square of this depth."""
    if text.count("[") + text.count("{") <= MAX_YAML_NESTING:
        return 0
    depth = deepest = 0
    for m in _BRACKETS.finditer(text):
        depth = depth + 1 if m.group() in "[{" else max(depth - 1, 0)
        deepest = max(deepest, depth)
    return deepest


def read_yaml(path: Path) -> Any:
    """Parse a YAML file (safe loader), raising SpecError with file and line on syntax errors. Files
    larger than ``MAX_YAML_BYTES`` or nested deeper than ``MAX_YAML_NESTING`` are refused before
    parsing (they would take the parser minutes)."""
    if not path.is_file():
        raise SpecError(f"{path}: no such file", hint="check the path (relative to the working directory)")
    try:
        if path.stat().st_size > MAX_YAML_BYTES:
            raise SpecError(f"{path}: larger than {MAX_YAML_BYTES >> 20} MiB; not a dsv4h input file",
                            hint="check the path")
        text = path.read_text(encoding="utf-8")
        if _flow_nesting(text) > MAX_YAML_NESTING:
            raise SpecError(f"{path}: YAML nested too deeply (more than {MAX_YAML_NESTING} levels of [ or {{)",
                            hint="flatten the file")
        return yaml.load(text, Loader=_SafeLoader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        raise SpecError(f"{path}{where}: YAML syntax error: {exc}", hint="fix the YAML syntax") from None
    except RecursionError:
        raise SpecError(f"{path}: YAML nested too deeply", hint="flatten the file") from None
    except (UnicodeDecodeError, OSError) as exc:
        raise SpecError(f"{path}: cannot read: {exc}", hint="pass a readable UTF-8 YAML file") from None


def resolve_path(value: str, base: Path) -> Path:
    """Resolve a path named in a file: absolute as is; relative to ``base`` (the file's directory)
    when it exists there, else to the working directory when it exists there, else to ``base``."""
    p = Path(value).expanduser()
    if p.is_absolute():
        return p
    try:
        for candidate in (base / p, Path.cwd() / p):
            if candidate.exists():
                return candidate.resolve()
        return (base / p).resolve()
    except OSError as exc:  # e.g. ENAMETOOLONG: exists() raises it rather than answering False
        raise SpecError(f"{base}: path {value[:80]!r}{'...' if len(value) > 80 else ''} is not usable: "
                        f"{exc.strerror or exc}", hint="name an existing file or directory") from None


# ----------------------------------------------------------------------------------------------------
# JSON and atomic writes
# ----------------------------------------------------------------------------------------------------


def json_default(obj: Any) -> Any:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, set | frozenset):
        return sorted(obj)
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")


def finite_float(value: Any, scale: float = 1.0) -> float:
    """``float(value) * scale`` when that is finite, else NaN (None, text, NaN and infinities alike)."""
    try:
        x = float(value) * scale
    except (TypeError, ValueError):
        return math.nan
    return x if math.isfinite(x) else math.nan


def fixed_point(value: Any, decimals: int | None = None, *, scale: float = 1.0, missing: str = "—",
                sep: bool = True) -> str:
    """``value * scale`` in fixed-point notation, never with an exponent: ``decimals`` places, or when
    None by magnitude (>= 1000 or integral: none, ``1,280``; >= 100: one; >= 1: two; below 1: three
    significant digits, at most six places); thousands separated unless ``sep`` is false; a value that
    rounds to zero prints ``0``. ``missing`` for None, bools, text, NaN and infinities."""
    if isinstance(value, bool):
        return missing
    x = finite_float(value, scale)
    if math.isnan(x):
        return missing
    if decimals is None:
        a = abs(x)
        decimals = (0 if a >= 1000 or x.is_integer() else 1 if a >= 100 else 2 if a >= 1
                    else min(6, 2 - math.floor(math.log10(a))))
    text = f"{x:{',' if sep else ''}.{max(0, decimals)}f}"
    return "0" if text.strip("-0.,") == "" else text


def parse_wall(value: object) -> datetime:
    """A wall-clock instant as an aware UTC datetime: ISO 8601 text with an offset (``...+0000``,
    ``...+00:00``, ``...Z``), an aware datetime, or int ns since the epoch. A time without an offset is
    refused (``ValueError``), as is anything else: it cannot be ordered against other instants, and
    dsv4h writes every wall time (``clock_anchor``, ledger timestamps, governance ``at``) with one."""
    if isinstance(value, int) and not isinstance(value, bool):
        return datetime.fromtimestamp(value / 1e9, UTC)
    t = value if isinstance(value, datetime) else datetime.fromisoformat(str(value).strip())
    if t.tzinfo is None:
        raise ValueError(f"wall time {str(value)[:80]!r} has no UTC offset")
    return t.astimezone(UTC)


def json_safe(value: Any) -> Any:
    """``value`` with what strict JSON lacks replaced, recursively: NaN and infinities -> None,
    datetimes -> ISO 8601 text; mappings get string keys, tuples become lists."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def dump_json(obj: Any) -> bytes:
    """Readable, stable JSON (sorted keys, 1-space indent, trailing newline)."""
    return (json.dumps(obj, indent=1, sort_keys=True, default=json_default, allow_nan=True) + "\n").encode()


def _tmp_for(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename inside it is durable (no-op where directories cannot be opened)."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _publish(tmp: Path, path: Path, *, exclusive: bool) -> None:
    try:
        if exclusive:
            os.link(tmp, path)  # FileExistsError if the path appeared meanwhile
        else:
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)


def atomic_write(path: Path, data: bytes, *, mode: int | None = None, exclusive: bool = False) -> None:
    """Write ``data`` to ``path`` durably and atomically (module policy). ``exclusive`` refuses an
    existing target with FileExistsError; ``mode`` sets the permission bits first."""
    tmp = _tmp_for(path)
    try:
        with tmp.open("wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _publish(tmp, path, exclusive=exclusive)


def atomic_write_table(path: Path, table: pa.Table, *, use_dictionary: bool = True) -> None:
    """Write a Parquet table (zstd) durably and atomically (module policy). ``use_dictionary=False``
    for columns of mostly unique values (e.g. float latencies): dictionary pages would only grow the
    writer's hash tables, about five times the table's size in memory."""
    tmp = _tmp_for(path)
    try:
        pq.write_table(table, tmp, compression="zstd", use_dictionary=use_dictionary)
        with tmp.open("rb+") as fh:
            os.fsync(fh.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _publish(tmp, path, exclusive=False)


def atomic_write_dir(out_dir: Path, files: Mapping[str, bytes], *, overwrite: bool) -> None:
    """Create directory ``out_dir`` holding ``files`` as one step: the files are written durably into
    a temporary sibling that is renamed into place. With ``overwrite`` an existing directory is
    replaced (moved aside, then removed); without it an existing one raises FileExistsError."""
    if out_dir.exists() and not overwrite:
        raise FileExistsError(str(out_dir))
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tag = f"{os.getpid()}-{secrets.token_hex(4)}"
    tmp = out_dir.parent / f".{out_dir.name}.tmp-{tag}"
    old = out_dir.parent / f".{out_dir.name}.old-{tag}"
    tmp.mkdir()
    try:
        for fname, data in files.items():
            with (tmp / fname).open("wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        fsync_dir(tmp)
        if out_dir.exists():
            out_dir.rename(old)
        tmp.rename(out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old.exists() and not out_dir.exists():
            old.rename(out_dir)
        raise
    fsync_dir(out_dir.parent)
    shutil.rmtree(old, ignore_errors=True)


# --- reading files handed to us (another host's, a peer tool's, a dataset) ------------------------------


class UnreadableFile(ValueError):
    """A file refused before its content is read: not a regular file, or over the size limit."""


def file_kind(mode: int) -> str:
    """What a stat mode is, in words (for a refusal)."""
    import stat

    return "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else \
        "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a symlink" if stat.S_ISLNK(mode) else \
        "a regular file" if stat.S_ISREG(mode) else "a special file"


def open_regular(path: Path, max_bytes: int, *, follow_symlinks: bool = True) -> int:
    """A read-only descriptor of ``path`` once the opened file is a regular file of at most
    ``max_bytes`` (``UnreadableFile`` naming what it is, or its size, otherwise; the descriptor is
    closed then). Opened non-blocking, so a FIFO without a writer never hangs the caller; with
    ``follow_symlinks=False`` a symlink is refused by the open itself (``OSError``)."""
    import stat

    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_symlinks else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnreadableFile(f"not a regular file ({file_kind(st.st_mode)})")
        if st.st_size > max_bytes:
            raise UnreadableFile(f"{st.st_size} bytes, more than the {max_bytes} accepted")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: Path, max_bytes: int, *, follow_symlinks: bool = True) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (:func:`open_regular`); a file that grows
    past the limit while read is ``UnreadableFile`` too."""
    fd = open_regular(path, max_bytes, follow_symlinks=follow_symlinks)
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UnreadableFile(f"more than the {max_bytes} bytes accepted (it grew while read)")
    return data
