"""What model directory was served, without reading the weights (edge module: reads files;
docs/identity.md#model-identity).

:func:`model_identity` records the SHA-256 of ``config.json``, ``generation_config.json``, the
tokenizer files present, remote-code ``*.py`` files, ``model.safetensors.index.json`` (its
``weight_map`` also hashed canonically, :func:`harness.hashing.sha256_json`) and of each shard's
safetensors header: the 8-byte little-endian header length followed by the JSON header bytes, exactly
as stored. The header names every tensor with its dtype, shape and byte range, so a changed layout or
dtype changes it; changed weight values of the same layout do not. ``hash_weights=True`` adds every
shard's full bytes, hashed in parallel and cached by (real path, size, mtime_ns).

A model directory may come from someone else, so it is read defensively: a file problem (a header
length beyond the file or :data:`MAX_HEADER`, a header that is not a JSON object, a truncated data
section, a shard the index names that is missing, an index whose ``weight_map`` is not a mapping of
names, a FIFO or device in place of a file) is recorded in the result's ``errors`` map (relative
name -> message naming the problem) and that file is then listed under ``not_hashed``: the identity
says what it could not vouch for rather than failing the run or forging a hash. The readers
:func:`read_shard_header` and :func:`read_index` raise :class:`~harness.errors.ServiceError` naming
the file. A symlink is followed (a Hugging Face cache snapshot is made of links into ``../../blobs``)
but one that leaves the model directory is recorded in ``outside_links`` (name -> real target) and
said in the statement, never silently. The safetensors reader of :mod:`harness.store.tensor_files`
cannot be reused here (``harness.store`` is a later layer than ``harness.service``); this module reads
only headers.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import struct
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from harness.errors import ServiceError
from harness.formats import UnreadableFile, atomic_write, open_regular, read_regular
from harness.hashing import sha256_bytes, sha256_json

__all__ = [
    "INDEX_NAME",
    "MAX_HEADER",
    "MODEL_FILES",
    "ShardHeader",
    "hash_file",
    "model_identity",
    "model_statement",
    "read_index",
    "read_shard_header",
]

MAX_HEADER = 100 * 1024 * 1024  # the safetensors reference limit on the JSON header
MAX_INDEX = 100 * 1024 * 1024  # a shard index is parsed in memory
MAX_SMALL_FILE = 1 << 30  # config / tokenizer files are hashed streaming; this only bounds the work
MAX_SHARD = 1 << 50  # any regular file; the bound only keeps open_regular's check meaningful
INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"
CONFIG_FILES = ("config.json", "generation_config.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
                   "added_tokens.json", "vocab.json", "vocab.txt", "merges.txt", "chat_template.jinja",
                   "chat_template.json", "preprocessor_config.json")
MODEL_FILES = (*CONFIG_FILES, *TOKENIZER_FILES, INDEX_NAME)
_CHUNK = 8 << 20  # bytes per read while hashing weights
_CACHE_VERSION = 1


@dataclass(frozen=True)
class ShardHeader:
    """One safetensors file's header: ``header_len`` (bytes of JSON after the 8-byte length),
    ``header_sha256`` (over the 8 length bytes + the JSON bytes), ``tensors`` (entries other than
    ``__metadata__``), ``file_size`` (bytes)."""

    header_len: int
    header_sha256: str
    tensors: int
    file_size: int

    def as_dict(self) -> dict[str, Any]:
        return {"header_len": self.header_len, "header_sha256": self.header_sha256, "tensors": self.tensors,
                "file_size": self.file_size}


def _err(path: Path, what: str) -> ServiceError:
    return ServiceError(f"{path}: {what}", hint="Check the model directory: re-download or re-convert the "
                        "named file, or fix identity.model_path in the service profile.")


def _open(path: Path, limit: int) -> int:
    try:
        return open_regular(path, limit)
    except UnreadableFile as exc:
        raise _err(path, str(exc)) from exc
    except OSError as exc:
        raise _err(path, f"cannot read: {exc.strerror or exc}") from exc


def _read_exact(fd: int, n: int) -> bytes:
    parts: list[bytes] = []
    while n > 0:
        chunk = os.read(fd, min(n, _CHUNK))
        if not chunk:
            break
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


def _data_extent(path: Path, header: dict[str, Any]) -> tuple[int, int]:
    """(tensor count, the largest data offset any tensor reaches)."""
    count, reach = 0, 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        count += 1
        offs = entry.get("data_offsets") if isinstance(entry, dict) else None
        if (not isinstance(offs, list) or len(offs) != 2
                or not all(isinstance(o, int) and not isinstance(o, bool) and o >= 0 for o in offs)
                or offs[0] > offs[1]):
            raise _err(path, f"tensor {name!r}: data_offsets must be [begin, end], got {offs!r}")
        reach = max(reach, offs[1])
    return count, reach


def read_shard_header(path: Path) -> ShardHeader:
    """Read only the header of a ``.safetensors`` file (the 8-byte little-endian length, then that many
    bytes of UTF-8 JSON, an object). Raises ``ServiceError`` naming the file for a non-regular file, a
    length beyond the file or :data:`MAX_HEADER`, a header that is not a JSON object, a tensor entry
    without ``[begin, end]`` offsets, or a data section shorter than the tensors need (truncated)."""
    fd = _open(path, MAX_SHARD)
    try:
        size = os.fstat(fd).st_size
        if size < 8:
            raise _err(path, f"too short for a safetensors file ({size} bytes)")
        prefix = _read_exact(fd, 8)
        (hlen,) = struct.unpack("<Q", prefix)
        if hlen > size - 8:
            raise _err(path, f"header length {hlen} exceeds the file ({size} bytes)")
        if hlen > MAX_HEADER:
            raise _err(path, f"header length {hlen} exceeds the {MAX_HEADER}-byte limit")
        raw = _read_exact(fd, hlen)
    finally:
        os.close(fd)
    if len(raw) != hlen:
        raise _err(path, f"header ends after {len(raw)} of {hlen} bytes (the file shrank while read)")
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _err(path, f"header is not UTF-8 JSON: {exc}") from exc
    if not isinstance(header, dict):
        raise _err(path, f"header is not a JSON object (a {type(header).__name__})")
    count, reach = _data_extent(path, header)
    data_len = size - 8 - hlen
    if reach > data_len:
        raise _err(path, f"tensors reach byte {reach} of a {data_len}-byte data section (truncated file?)")
    return ShardHeader(hlen, sha256_bytes(prefix + raw), count, size)


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: from JSON escapes or undecodable file-name bytes
        return False
    return True


def _shown(name: str) -> str:
    """``name`` as JSON-safe text (undecodable bytes as backslash escapes)."""
    return name if _utf8(name) else name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _plain_name(name: object) -> str | None:
    """``name`` when it is a UTF-8 relative path that stays inside the directory, else None."""
    if not isinstance(name, str) or not name or "\x00" in name or "\\" in name or not _utf8(name):
        return None
    p = PurePosixPath(name)
    return None if p.is_absolute() or ".." in p.parts else name


def read_index(path: Path) -> dict[str, Any]:
    """Parse a ``model.safetensors.index.json``: {"sha256" (of the file's bytes), "total_size"
    (``metadata.total_size``, an int or None), "weight_map_sha256" (canonical JSON of the map),
    "shards" (sorted distinct shard names)}. Raises ``ServiceError`` naming the file when it is not a
    JSON object, its ``weight_map`` is not a mapping of tensor names to shard names, or a shard name
    leaves the directory (absolute, ``..``)."""
    fd = _open(path, MAX_INDEX)
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(MAX_INDEX + 1)
    if len(data) > MAX_INDEX:
        raise _err(path, f"more than the {MAX_INDEX} bytes accepted for an index")
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _err(path, f"not UTF-8 JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise _err(path, f"not a JSON object (a {type(doc).__name__})")
    wmap = doc.get("weight_map")
    if not isinstance(wmap, dict):
        raise _err(path, f"weight_map is not a mapping (a {type(wmap).__name__})")
    for tensor, shard in wmap.items():
        if not isinstance(shard, str):
            raise _err(path, f"weight_map[{tensor!r}] is not a file name: {shard!r}")
        if _plain_name(shard) is None:
            raise _err(path, f"weight_map[{tensor!r}] names {shard!r}: not a relative name inside the model "
                              "directory")
    try:
        wmap_sha = sha256_json(wmap)
    except UnicodeEncodeError as exc:
        raise _err(path, f"weight_map holds a tensor name that is not UTF-8: {exc}") from exc
    meta = doc.get("metadata")
    total = meta.get("total_size") if isinstance(meta, dict) else None
    if isinstance(total, float) and total.is_integer():
        total = int(total)
    if not isinstance(total, int) or isinstance(total, bool):
        total = None
    return {"sha256": sha256_bytes(data), "total_size": total, "weight_map_sha256": wmap_sha,
            "shards": sorted(set(wmap.values()))}


def hash_file(path: Path, *, limit: int = MAX_SHARD, on_bytes: Callable[[int], None] | None = None) -> str:
    """Hex SHA-256 of a regular file's bytes, read in 8 MiB chunks (``hashlib`` releases the GIL, so
    threads hash in parallel); ``on_bytes(n)`` after each chunk. Raises ``ServiceError`` naming the file."""
    fd = _open(path, limit)
    digest = hashlib.sha256()
    try:
        while chunk := os.read(fd, _CHUNK):
            digest.update(chunk)
            if on_bytes is not None:
                on_bytes(len(chunk))
    except OSError as exc:
        raise _err(path, f"read failed: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    return digest.hexdigest()


# --- the weight-hash cache ------------------------------------------------------------------------------


def _cache_key(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return os.path.realpath(path), st.st_size, st.st_mtime_ns


def _load_cache(cache_file: Path | None) -> dict[str, Any]:
    """The cache's entries (realpath -> {"size", "mtime_ns", "sha256"}); an unreadable or foreign file
    is an empty cache: it only saves work, it is never evidence."""
    if cache_file is None:
        return {}
    try:
        doc = json.loads(read_regular(cache_file, MAX_INDEX).decode("utf-8"))
    except (OSError, UnreadableFile, UnicodeDecodeError, ValueError):
        return {}
    entries = doc.get("entries") if isinstance(doc, dict) and doc.get("version") == _CACHE_VERSION else None
    return dict(entries) if isinstance(entries, dict) else {}


def _cached(entries: dict[str, Any], key: tuple[str, int, int]) -> str | None:
    entry = entries.get(key[0])
    if (isinstance(entry, dict) and entry.get("size") == key[1] and entry.get("mtime_ns") == key[2]
            and isinstance(entry.get("sha256"), str) and len(entry["sha256"]) == 64):
        return str(entry["sha256"])
    return None


def _save_cache(cache_file: Path, entries: dict[str, Any]) -> None:
    doc = {"version": _CACHE_VERSION, "entries": dict(sorted(entries.items()))}
    try:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(cache_file, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())
    except OSError:
        pass  # a cache that cannot be written costs a re-hash next time, nothing recorded is wrong


def _hash_weights(root: Path, shards: Iterable[str], cache_file: Path | None,
                  progress: Callable[[int, int], None] | None, workers: int) -> tuple[dict[str, str], dict[str, str]]:
    """({shard: sha256}, {shard: error}) for every shard's full bytes; cached hits count as done."""
    entries = _load_cache(cache_file)
    out: dict[str, str] = {}
    errors: dict[str, str] = {}
    todo: list[tuple[str, tuple[str, int, int]]] = []
    for name in shards:
        try:
            key = _cache_key(root / name)
        except OSError as exc:
            errors[name] = f"{root / name}: cannot read: {exc.strerror or exc}"
            continue
        hit = _cached(entries, key)
        if hit is not None:
            out[name] = hit
        else:
            todo.append((name, key))
    total = sum(key[1] for _, key in todo)
    done = 0
    lock = threading.Lock()

    def advance(n: int) -> None:
        nonlocal done
        with lock:  # serializes the callback too
            done += n
            if progress is not None:
                progress(done, total)

    def one(name: str) -> str:
        return hash_file(root / name, on_bytes=advance)

    if progress is not None:
        progress(0, total)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = {name: (key, pool.submit(one, name)) for name, key in todo}
        for name, (key, fut) in futures.items():
            try:
                out[name] = fut.result()
            except ServiceError as exc:
                errors[name] = exc.message
                continue
            entries[key[0]] = {"size": key[1], "mtime_ns": key[2], "sha256": out[name]}
    if cache_file is not None and todo:
        _save_cache(cache_file, entries)
    return out, errors


# --- the identity -----------------------------------------------------------------------------------------


def _inside(root_real: Path, path: Path) -> tuple[bool, str]:
    real = os.path.realpath(path)
    return Path(real).is_relative_to(root_real), real


def _present(root: Path) -> list[str]:
    """The metadata files present: :data:`MODEL_FILES` and top-level ``*.py`` (remote code)."""
    names = [n for n in MODEL_FILES if os.path.lexists(root / n)]
    names += sorted(p.name for p in root.glob("*.py") if _utf8(p.name))
    return names


def model_identity(model_dir: Path, *, hash_weights: bool = False, cache_file: Path | None = None,
                   progress: Callable[[int, int], None] | None = None, workers: int = 4) -> dict[str, Any]:
    """The identity of a model directory (module docstring; docs/identity.md#model-identity): {"path",
    "files": {name: sha256}, "index": {"sha256", "total_size", "weight_map_sha256", "shards"} or None,
    "shard_headers": {shard: {"header_len", "header_sha256", "tensors", "file_size"} or {"error"}},
    "weights": {shard: sha256} or None, "hashed", "not_hashed", "errors": {name: message},
    "outside_links": {name: real target}, "statement"}. Deterministic for the same directory content.

    Shards are those the index names, else the top-level ``*.safetensors`` files. With
    ``hash_weights`` every shard's bytes are hashed, ``workers`` at a time, reusing ``cache_file``
    entries whose (real path, size, mtime_ns) still match; ``progress(done_bytes, total_bytes)`` is
    called (serialized) as bytes are hashed. Raises ``ServiceError`` only when ``model_dir`` is not a
    directory; file problems are recorded in ``errors``."""
    root = Path(os.path.abspath(model_dir))
    if not root.is_dir():
        raise _err(root, "not a directory")
    root_real = Path(os.path.realpath(root))
    errors: dict[str, str] = {}
    outside: dict[str, str] = {}

    def note_link(name: str) -> None:
        inside, real = _inside(root_real, root / name)
        if not inside:
            outside[name] = real

    files: dict[str, str] = {}
    for name in _present(root):
        note_link(name)
        try:
            files[name] = hash_file(root / name, limit=MAX_SMALL_FILE)
        except ServiceError as exc:
            errors[name] = exc.message
    index: dict[str, Any] | None = None
    if INDEX_NAME in files:
        try:
            index = read_index(root / INDEX_NAME)
        except ServiceError as exc:
            errors[INDEX_NAME] = exc.message
    if index is not None:
        shards = list(index["shards"])
    else:
        shards = []
        for p in sorted(root.glob("*.safetensors")):
            if _utf8(p.name):
                shards.append(p.name)
            else:
                errors[_shown(p.name)] = f"{_shown(str(p))}: file name is not UTF-8; not read"
    headers: dict[str, dict[str, Any]] = {}
    for name in shards:
        path = root / name
        if not os.path.lexists(path):
            msg = f"{path}: named by {INDEX_NAME} but missing"
            errors[name] = msg
            headers[name] = {"error": msg}
            continue
        note_link(name)
        try:
            headers[name] = read_shard_header(path).as_dict()
        except ServiceError as exc:
            errors[name] = exc.message
            headers[name] = {"error": exc.message}
    weights: dict[str, str] | None = None
    if hash_weights:
        good = [n for n in shards if "error" not in headers[n]]
        weights, werr = _hash_weights(root, good, cache_file, progress, workers)
        errors.update(werr)
    ident: dict[str, Any] = {
        "path": str(root),
        "files": dict(sorted(files.items())),
        "index": index,
        "shard_headers": dict(sorted(headers.items())),
        "weights": dict(sorted(weights.items())) if weights is not None else None,
        "errors": dict(sorted(errors.items())),
        "outside_links": dict(sorted(outside.items())),
    }
    ident["hashed"], ident["not_hashed"] = _coverage(root, ident, shards)
    ident["statement"] = model_statement(ident)
    return ident


def _coverage(root: Path, ident: dict[str, Any], shards: list[str]) -> tuple[list[str], list[str]]:
    """(what was hashed, what was not), each a sorted list of short phrases naming files."""
    hashed = list(ident["files"])
    if ident["index"] is not None:
        hashed.append(f"{INDEX_NAME} weight_map (canonical JSON)")
    weights = ident["weights"] or {}
    not_hashed: list[str] = []
    for name in shards:
        if "error" not in ident["shard_headers"][name]:
            hashed.append(f"{name} (safetensors header)")
        if name in weights:
            hashed.append(f"{name} (all bytes)")
        else:
            not_hashed.append(f"{name} (weight bytes)")
    not_hashed += [f"{name} (error)" for name in ident["errors"]]
    not_hashed += [f"{name} (absent)" for name in CONFIG_FILES if name not in ident["files"]
                   and name not in ident["errors"]]
    covered = set(ident["files"]) | set(ident["errors"]) | set(shards)
    try:
        listing = sorted(os.listdir(root))
    except OSError:
        listing = []
    for name in listing:
        if name not in covered and _shown(name) not in covered and not name.startswith("."):
            kind = "directory" if (root / name).is_dir() else "file"
            not_hashed.append(f"{_shown(name)} ({kind}, not read)")
    return sorted(hashed), sorted(not_hashed)


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _parts(identity: dict[str, Any]) -> list[str]:
    """The statement's list of what was hashed, in reading order."""
    files = identity.get("files") or {}
    parts: list[str] = []
    if "config.json" in files:
        parts.append("config")
    if "generation_config.json" in files:
        parts.append("generation config")
    if any(n in files for n in TOKENIZER_FILES):
        parts.append("tokenizer files")
    if any(n.endswith(".py") for n in files):
        parts.append("remote-code files")
    if identity.get("index") is not None:
        parts.append("the shard index")
    headers = identity.get("shard_headers") or {}
    good = [n for n, h in headers.items() if "error" not in h]
    if len(good) > 1:
        parts.append(f"each of {len(good)} shards' safetensors header")
    elif good and len(headers) == 1 and identity.get("index") is None:
        parts.append("the safetensors header")  # a single-file model
    elif good:
        parts.append("1 shard's safetensors header")
    return parts


def model_statement(identity: dict[str, Any]) -> str:
    """One sentence for the report saying what :func:`model_identity` hashed and what it did not, e.g.
    "SHA-256 of config, generation config, tokenizer files, the shard index and each of 4 shards'
    safetensors header; not the weight bytes." (plus a sentence each for errors and outside links)."""
    parts = _parts(identity)
    headers = identity.get("shard_headers") or {}
    weights = identity.get("weights")
    if not parts:
        text = "Nothing in the model directory could be hashed"
    else:
        text = "SHA-256 of " + (", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0])
    if not headers:
        text += "; no safetensors weight files were found."
    elif not weights:  # None: not asked; {}: no shard could be hashed
        text += "; not the weight bytes."
    elif len(weights) == len(headers):
        text += f", and every weight byte of {_count(len(weights), 'shard', 'shards')}."
    else:
        text += f", and every weight byte of {len(weights)} of {len(headers)} shards."
    errors = identity.get("errors") or {}
    if errors:
        text += f" {_count(len(errors), 'file', 'files')} could not be read (see errors: {', '.join(sorted(errors))})."
    links = identity.get("outside_links") or {}
    if links:
        text += (f" {_count(len(links), 'file is a symlink', 'files are symlinks')} leaving the model directory "
                 f"({', '.join(sorted(links))}).")
    return text
