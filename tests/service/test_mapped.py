"""Mapped libraries: /proc/PID/maps parsing on literal text, snapshots of real child processes
(hashing, the cache, vanished processes, deleted files) and the requirement checks."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.hashing import sha256_file
from harness.inputs.spec import LibraryRequirement
from harness.service.identity import mapped
from harness.service.identity.mapped import (
    HashCache,
    check_requirements,
    mapped_libraries,
    parse_map_entries,
    parse_maps,
    read_maps,
    tree_pids,
    worker_pids,
)

MAPS = """\
55d0c2a00000-55d0c2a2c000 r--p 00000000 fe:00 26930                      /root/.pyenv/versions/3.11.7/bin/python3.11
55d0c4b1e000-55d0c4e9c000 rw-p 00000000 00:00 0                          [heap]
7f1a2c000000-7f1a2c021000 rw-p 00000000 00:00 0 \n\
7f1a30a00000-7f1a30a28000 r--p 00000000 fe:00 339380                     /usr/lib/x86_64-linux-gnu/libc.so.6
7f1a30a28000-7f1a30bbd000 r-xp 00028000 fe:00 339380                     /usr/lib/x86_64-linux-gnu/libc.so.6
7f1a30c00000-7f1a30c40000 r--p 00000000 fe:00 339900                     /usr/lib/x86_64-linux-gnu/libssl.so.3
7f1a30d00000-7f1a30d10000 r--p 00000000 fe:00 29753 /py/lib/python3.11/lib-dynload/_ssl.cpython-311-x86_64-linux-gnu.so
7f1a30e00000-7f1a30e10000 r-xp 00000000 fe:00 4242                       /opt/ccl/lib/libccl.so.1.2 (deleted)
7f1a30f00000-7f1a30f10000 r--s 00000000 fe:00 777                        /usr/lib/locale/locale-archive
7f1a31000000-7f1a31001000 r--p 00000000 fe:00 778                        /tmp/my.socket.log
7f1a31100000-7f1a31101000 r--p 00000000 fe:00 779                        /opt/with space/libsp.so
7ffd5e1f0000-7ffd5e211000 rw-p 00000000 00:00 0                          [stack]
7ffd5e3d6000-7ffd5e3da000 r--p 00000000 00:00 0                          [vvar]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
"""


def test_parse_maps_keeps_shared_objects_once_in_order() -> None:
    assert parse_maps(MAPS) == [
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
        "/usr/lib/x86_64-linux-gnu/libssl.so.3",
        "/py/lib/python3.11/lib-dynload/_ssl.cpython-311-x86_64-linux-gnu.so",
        "/opt/ccl/lib/libccl.so.1.2",
        "/opt/with space/libsp.so",
    ]
    entries = {e.path: e for e in parse_map_entries(MAPS)}
    ccl = entries["/opt/ccl/lib/libccl.so.1.2"]
    assert (ccl.deleted, ccl.inode, ccl.range) == (True, 4242, "7f1a30e00000-7f1a30e10000")
    libc = entries["/usr/lib/x86_64-linux-gnu/libc.so.6"]
    assert (libc.deleted, libc.inode, libc.range) == (False, 339380, "7f1a30a00000-7f1a30a28000")
    assert parse_maps("") == [] and parse_maps("garbage line\n") == []


# --- real processes ------------------------------------------------------------------------------

CHILD = "import ssl, sys; print('ready', flush=True); sys.stdin.read()"


def _start(code: str = CHILD) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"  # its imports are done: the libraries are mapped
    return proc


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.wait()
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            stream.close()


@pytest.fixture
def child() -> Iterator[subprocess.Popen[str]]:
    proc = _start()
    try:
        yield proc
    finally:
        _stop(proc)


def _lib(snap: dict[str, Any], pid: int, basename_prefix: str) -> dict[str, Any]:
    libs = [lib for lib in snap["pids"][str(pid)]["libraries"]
            if os.path.basename(lib["path"]).startswith(basename_prefix)]
    assert libs, f"pid {pid} maps no {basename_prefix}*: {snap['pids'][str(pid)]}"
    return dict(libs[0])


def _sha(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_real_child_maps_ssl_and_the_checks(tmp_path: Path, child: subprocess.Popen[str]) -> None:
    assert tree_pids(child.pid) == [child.pid]
    entries, error = read_maps(child.pid)
    assert error is None and any(os.path.basename(e.path).startswith("_ssl") for e in entries)
    snap = mapped_libraries(tree_pids(child.pid), roles={child.pid: "rank 0"})
    assert snap["root"] == child.pid and snap["pids"][str(child.pid)]["error"] is None
    ssl = _lib(snap, child.pid, "libssl.so")
    assert ssl["sha256"] == _sha(ssl["path"]) and ssl["size"] == os.path.getsize(ssl["path"])
    assert ssl["deleted"] is False and snap["files"][ssl["path"]] == ssl["sha256"]

    ok = [LibraryRequirement(name="libssl.so*"), LibraryRequirement(name="libssl.so*", sha256=ssl["sha256"])]
    assert check_requirements(snap, ok, None, []) == []
    missing = check_requirements(snap, [LibraryRequirement(name="libnotthere.so*")], None, [])
    assert missing == [f"pid {child.pid} (rank 0) maps no file named libnotthere.so*"]
    wrong = check_requirements(snap, [LibraryRequirement(name="libssl.so*", sha256="0" * 64)], None, [])
    assert len(wrong) == 1 and wrong[0].startswith(f"pid {child.pid} (rank 0) maps {ssl['path']} (sha256 ")
    assert "but the profile requires libssl.so* with sha256 " + "0" * 64 in wrong[0]

    # library_dirs: only libssl's directory; the interpreter's own extension modules are then outside
    ext = _lib(snap, child.pid, "_ssl")
    outside = check_requirements(snap, [], [os.path.dirname(ssl["path"])], [])
    assert f"pid {child.pid} (rank 0) maps {ext['path']} from outside library_dirs" in outside
    assert all(ssl["path"] not in m for m in outside)
    link = tmp_path / "libdir-link"
    link.symlink_to(os.path.dirname(ssl["path"]))
    assert all(ssl["path"] not in m for m in check_requirements(snap, [], [str(link)], []))  # resolved
    every_dir = sorted({os.path.dirname(lib["path"]) for lib in snap["pids"][str(child.pid)]["libraries"]})
    assert check_requirements(snap, [], [d for d in every_dir if d != os.path.dirname(ext["path"])],
                              [os.path.dirname(ext["path"])]) == []


def test_cache_hashes_each_file_once_across_pids_and_snapshots(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = sha256_file

    def counting(path: str) -> str:
        calls.append(path)
        return real(path)

    monkeypatch.setattr("harness.service.identity.mapped.sha256_file", counting)
    a, b = _start(), _start()
    try:
        cache = HashCache()
        start = mapped_libraries([a.pid, b.pid], cache=cache)
        assert len(calls) == len(set(calls)) == len(start["files"]) > 0  # both children map the same files
        end = mapped_libraries([a.pid, b.pid], cache=cache)
        assert len(calls) == len(start["files"])  # nothing hashed again
        assert end["files"] == start["files"]
        assert start["pids"][str(a.pid)]["libraries"] == start["pids"][str(b.pid)]["libraries"]
    finally:
        _stop(a)
        _stop(b)


def test_process_gone_between_listing_and_reading_is_an_error_entry() -> None:
    proc = _start()
    pid = proc.pid
    _stop(proc)  # killed and reaped: the PID no longer exists
    snap = mapped_libraries([pid])
    assert snap["pids"][str(pid)] == {"role": None, "libraries": [], "error": f"process {pid} is gone"}
    assert tree_pids(pid) == []
    msgs = check_requirements(snap, [LibraryRequirement(name="libssl.so*")], None, [])
    assert msgs == [f"pid {pid} cannot be read (process {pid} is gone): whether it maps libssl.so* is unknown"]


def test_permission_denied_is_an_error_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    def denied(*_a: Any, **_k: Any) -> Any:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(mapped, "open", denied, raising=False)
    assert read_maps(1) == ([], "no permission to read /proc/1/maps")


def test_deleted_library_is_never_hashed_as_its_replacement(tmp_path: Path,
                                                            child: subprocess.Popen[str]) -> None:
    src = _lib(mapped_libraries([child.pid]), child.pid, "libssl.so")["path"]
    copy = tmp_path / "libcopy.so.3"
    shutil.copyfile(src, copy)
    original = _sha(str(copy))
    proc = _start(f"import ctypes, sys; ctypes.CDLL({str(copy)!r}); print('ready', flush=True); sys.stdin.read()")
    try:
        copy.unlink()
        copy.write_bytes(b"a replacement at the same path")
        lib = _lib(mapped_libraries([proc.pid]), proc.pid, "libcopy.so")
        assert lib["path"] == str(copy) and lib["deleted"] is True
        # through /proc/PID/map_files when the kernel allows it (root), else no hash at all
        assert lib["sha256"] in (original, None)
        assert lib["sha256"] != _sha(str(copy))
        snap = mapped_libraries([proc.pid])
        assert f"{copy} (deleted)" in snap["files"] and str(copy) not in snap["files"]
    finally:
        _stop(proc)


def test_escaped_newline_and_carriage_return_paths_are_kept_as_written() -> None:
    text = ("7f00-7f10 r--p 00000000 fe:00 11 /opt/a\\012b/libnl.so.1\n"
            "7f20-7f30 r--p 00000000 fe:00 12 /opt/c\rd/libcr.so\n"
            "7f40-7f50 r--p 00000000 fe:00 13 /opt/e\u2028f/libls.so\n")
    entries = parse_map_entries(text)
    assert [(e.path, e.escaped, e.inode) for e in entries] == [
        ("/opt/a\\012b/libnl.so.1", True, 11), ("/opt/c\rd/libcr.so", False, 12),
        ("/opt/e\u2028f/libls.so", False, 13)]


def test_newline_path_is_never_hashed_by_its_escaped_name(tmp_path: Path, child: subprocess.Popen[str]) -> None:
    src = _lib(mapped_libraries([child.pid]), child.pid, "libssl.so")["path"]
    real = tmp_path / "d\nx" / "libnl.so.3"
    decoy = tmp_path / "d\\012x" / "libnl.so.3"  # the kernel's spelling of the real path, another file
    for p in (real, decoy):
        p.parent.mkdir()
    shutil.copyfile(src, real)
    decoy.write_bytes(b"not the mapped library")
    proc = _start(f"import ctypes, sys; ctypes.CDLL({str(real)!r}); print('ready', flush=True); sys.stdin.read()")
    try:
        snap = mapped_libraries([proc.pid])
        lib = _lib(snap, proc.pid, "libnl.so")
        assert lib["path"] == str(decoy) and lib["escaped"] is True and lib["deleted"] is False
        # only through /proc/PID/map_files (root), else no hash: never the decoy's
        assert lib["sha256"] in (_sha(str(real)), None)
        assert snap["files"][str(decoy)] == lib["sha256"]
        assert "escaped" not in _lib(snap, proc.pid, "libc.so")
    finally:
        _stop(proc)


# --- worker rule (pure) --------------------------------------------------------------------------


def _entry(*names: str, role: str | None = None, error: str | None = None) -> dict[str, Any]:
    return {"role": role, "error": error,
            "libraries": [{"path": f"/lib/{n}", "sha256": "a" * 64, "size": 1, "deleted": False} for n in names]}


def test_worker_rule() -> None:
    gpu_tree = {"root": 1, "pids": {"1": _entry("libcuda.so.1"), "2": _entry("libcuda.so.1", "libccl.so"),
                                    "3": _entry("libcuda.so.1"), "4": _entry("libssl.so.3"),
                                    "5": _entry(error="process 5 is gone")}}
    assert worker_pids(gpu_tree) == ["2", "3", "5"]  # not the launcher, not the GPU-less tokenizer
    assert check_requirements(gpu_tree, [LibraryRequirement(name="libccl.so*")], None, []) == [
        "pid 3 maps no file named libccl.so*",
        "pid 5 cannot be read (process 5 is gone): whether it maps libccl.so* is unknown"]
    assert check_requirements(gpu_tree, [LibraryRequirement(name="libccl.so*", every_worker=False)], None, []) == []
    named = {"root": 1, "pids": {"1": _entry("libssl.so.3"), "2": _entry("libccl.so", role="rank 0")}}
    assert worker_pids(named) == ["2"]
    only_root = {"root": 1, "pids": {"1": _entry("libcuda.so.1"), "2": _entry("libssl.so.3")}}
    assert worker_pids(only_root) == ["1"]
    cpu = {"root": 1, "pids": {"1": _entry("libssl.so.3"), "2": _entry("libz.so.1")}}
    assert worker_pids(cpu) == ["1", "2"]
    assert check_requirements({"root": None, "pids": {}}, [LibraryRequirement(name="x.so")], None, []) == [
        "the snapshot has no process to check the required libraries on"]
