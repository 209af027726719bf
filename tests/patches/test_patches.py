"""Model patch series: validation, the unified-diff applier, status/apply/revert on small trees and on
the real unpacked SGLang wheel (model_patches/series.yaml)."""

from __future__ import annotations

import difflib
import hashlib
import importlib.util
import json
import os
import py_compile
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from harness import formats
from harness.cli.patches_cmd import app as patches_app
from harness.errors import PatchError, SpecError
from harness.patches import series as P
from harness.patches import unified_diff as U

ROOT = Path(__file__).resolve().parents[2]
SERIES = ROOT / "model_patches" / "series.yaml"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def udiff(path: str, old: bytes | None, new: bytes | None, n: int = 3) -> bytes:
    """A unified diff made with difflib (an independent producer)."""
    a = [] if old is None else old.decode().splitlines(keepends=True)
    b = [] if new is None else new.decode().splitlines(keepends=True)
    lines = difflib.unified_diff(a, b, "/dev/null" if old is None else f"a/{path}",
                                 "/dev/null" if new is None else f"b/{path}", n=n)
    return "".join(lines).encode()


A0 = b"".join(f"line {i}\n".encode() for i in range(1, 41))
A1 = A0.replace(b"line 5\n", b"line 5\nadded after 5\n").replace(b"line 30\n", b"line thirty\n")
A2 = A1.replace(b"line 20\n", b"")
B0 = b"print('b')\n"
B1 = b"print('b')\nprint('patched')\n"
NEW = b"VALUE = 1\n"


def make_tree(root: Path, *, version: str = "1.2.3", files: dict[str, bytes] | None = None) -> Path:
    pkg = root / "sglang"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "srt").mkdir()
    info = root / f"sglang-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n")
    for rel, data in (files if files is not None else {"sglang/srt/a.py": A0, "sglang/srt/b.py": B0}).items():
        (root / rel).write_bytes(data)
    return root


def entry(pid: str, diff_name: str, diff: bytes, files: dict[str, tuple[bytes | None, bytes | None]],
          **extra: Any) -> dict[str, Any]:
    e: dict[str, Any] = {
        "id": pid, "file": diff_name, "sha256": sha(diff), "target": {"package": "sglang", "version": "1.2.3"},
        "description": f"test patch {pid}", "default_off": True, "enable": {"env": "X_ON"},
        "evidence": ["a test"],
        "files": {p: {"base": None if b is None else sha(b), "patched": None if a is None else sha(a)}
                  for p, (b, a) in files.items()},
    }
    e.update(extra)
    return e


def write_series(d: Path, patches: list[tuple[dict[str, Any], bytes]], **top: Any) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    for e, diff in patches:
        (d / e["file"]).parent.mkdir(parents=True, exist_ok=True)
        (d / e["file"]).write_bytes(diff)
    data = {"format_version": 1, "name": "test-series", "patches": [e for e, _ in patches], **top}
    path = d / "series.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def two_patch_series(d: Path) -> P.Series:
    """p1: a.py A0->A1, b.py B0->B1, creates c.py; p2: a.py A1->A2."""
    d1 = udiff("sglang/srt/a.py", A0, A1) + udiff("sglang/srt/b.py", B0, B1) + udiff("sglang/srt/c.py", None, NEW)
    d2 = udiff("sglang/srt/a.py", A1, A2)
    e1 = entry("p1", "d/0001.diff", d1, {"sglang/srt/a.py": (A0, A1), "sglang/srt/b.py": (B0, B1),
                                         "sglang/srt/c.py": (None, NEW)})
    e2 = entry("p2", "d/0002.diff", d2, {"sglang/srt/a.py": (A1, A2)}, default_off=False, enable=None)
    return P.load_series(write_series(d, [(e1, d1), (e2, d2)]))


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# --- the diff applier ------------------------------------------------------------------------------


def test_apply_and_reverse_difflib_output() -> None:
    (fd,) = U.parse_unified_diff(udiff("sglang/x.py", A0, A2, n=2))
    assert [(h.old_start, h.old_len) for h in fd.hunks] == [(4, 4), (18, 5), (28, 5)]
    assert U.apply_file_diff(fd, A0) == A2
    assert U.apply_file_diff(fd, A2, reverse=True) == A0


def test_new_and_deleted_files() -> None:
    (new,) = U.parse_unified_diff(udiff("sglang/n.py", None, NEW))
    assert (new.old_exists, new.new_exists) == (False, True)
    assert U.apply_file_diff(new, None) == NEW
    assert U.apply_file_diff(new, NEW, reverse=True) is None
    with pytest.raises(PatchError, match="already exists"):
        U.apply_file_diff(new, b"x\n")
    (gone,) = U.parse_unified_diff(udiff("sglang/n.py", NEW, None))
    assert U.apply_file_diff(gone, NEW) is None
    with pytest.raises(PatchError, match="file is missing"):
        U.apply_file_diff(gone, None)


def test_no_newline_at_end_of_file_and_git_headers() -> None:
    diff = (b"diff --git a/sglang/x.py b/sglang/x.py\nindex 1..2 100644\n"
            b"--- a/sglang/x.py\t2026-01-01 00:00:00\n+++ b/sglang/x.py\n"
            b"@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n")
    (fd,) = U.parse_unified_diff(diff)
    assert U.apply_file_diff(fd, b"a\nb") == b"a\nc\n"
    assert U.apply_file_diff(fd, b"a\nc\n", reverse=True) == b"a\nb"
    with pytest.raises(PatchError, match="hunk 1 does not apply"):
        U.apply_file_diff(fd, b"a\nb\n")  # the newline at the end differs: exact matching


def test_crlf_bytes_are_preserved() -> None:
    old, new = b"a\r\nb\r\nc\r\n", b"a\r\nB\r\nc\r\n"
    diff = b"--- a/sglang/w.py\n+++ b/sglang/w.py\n@@ -1,3 +1,3 @@\n a\r\n-b\r\n+B\r\n c\r\n"
    (fd,) = U.parse_unified_diff(diff)
    assert U.apply_file_diff(fd, old) == new
    assert U.apply_file_diff(fd, new, reverse=True) == old


def test_failing_hunk_names_file_and_hunk_number() -> None:
    (fd,) = U.parse_unified_diff(udiff("sglang/srt/a.py", A0, A2, n=2))
    broken = A0.replace(b"line 29\n", b"line twenty-nine\n")
    with pytest.raises(PatchError) as exc:
        U.apply_file_diff(fd, broken, where="patch 'x': ")
    assert "patch 'x': sglang/srt/a.py: hunk 3 does not apply at line 28" in str(exc.value)
    assert "line twenty-nine" in str(exc.value)
    with pytest.raises(PatchError, match="hunk 1 does not apply: lines 4-7 are beyond the end"):
        U.apply_file_diff(fd, b"line 1\n")


def test_no_offset_search() -> None:
    # the same context one line lower is not accepted: hunks apply exactly where they say
    (fd,) = U.parse_unified_diff(udiff("sglang/srt/a.py", A0, A1))
    with pytest.raises(PatchError, match="hunk 1 does not apply"):
        U.apply_file_diff(fd, b"extra first line\n" + A0)


@pytest.mark.parametrize(("diff", "match"), [
    (b"hello\n", "no file sections"),
    (b"@@ -1 +1 @@\n-a\n+b\n", "without a ---/\\+\\+\\+ file header"),
    (b"--- a/sglang/x\n+++ b/sglang/x\n", "has no hunks"),
    (b"--- a/sglang/x\n+++ b/sglang/x\n@@ -1,2 +1,1 @@\n a\n", "truncated"),
    (b"--- a/sglang/x\n+++ b/sglang/x\n@@ -1 +1 @@\n*a\n", "unexpected line in hunk"),
    (b"--- a/sglang/x\n+++ b/sglang/x\n@@ bad @@\n", "malformed hunk header"),
    (b"--- a/sglang/x\n+++ b/sglang/y\n@@ -1 +1 @@\n-a\n+b\n", "renames are not supported"),
    (b"--- a/../etc/passwd\n+++ b/../etc/passwd\n@@ -1 +1 @@\n-a\n+b\n", "must be relative"),
    (b"--- /dev/null\n+++ /dev/null\n@@ -0,0 +1 @@\n+a\n", "both sides are /dev/null"),
    (b"--- a/sglang/x\n+++ b/sglang/x\n@@ -5 +5 @@\n-a\n+b\n@@ -1 +1 @@\n-a\n+b\n", "overlap or are out of order"),
    (b"--- a/sglang/x\n+++ b/sglang/x\n@@ -1 +1 @@\n-a\n+b\n--- a/sglang/x\n+++ b/sglang/x\n@@ -3 +3 @@\n-a\n+b\n",
     "appears twice"),
    (b"Binary files a/x and b/x differ\n", "binary diffs"),
    (b"--- a/sglang/\xff\n+++ b/sglang/\xff\n@@ -1 +1 @@\n-a\n+b\n", "not UTF-8"),
])
def test_malformed_diffs_are_refused(diff: bytes, match: str) -> None:
    with pytest.raises(PatchError, match=match):
        U.parse_unified_diff(diff, "t.diff")


_lines = st.lists(st.sampled_from([b"a\n", b"b\n", b"c\n", b"\n", b"def f():\n", b"    return 1\n"]), max_size=30)


@settings(max_examples=150, deadline=None)
@given(old=_lines, new=_lines, n=st.integers(0, 3))
def test_difflib_round_trip(old: list[bytes], new: list[bytes], n: int) -> None:
    a, b = b"".join(old), b"".join(new)
    diff = udiff("sglang/p.py", a, b, n=n)
    if not diff:
        assert a == b
        return
    (fd,) = U.parse_unified_diff(diff)
    assert U.apply_file_diff(fd, a) == b
    assert U.apply_file_diff(fd, b, reverse=True) == a


# --- series validation ---------------------------------------------------------------------------


def test_series_validates_and_chains(tmp_path: Path) -> None:
    s = two_patch_series(tmp_path / "s")
    assert [p.spec.id for p in s.patches] == ["p1", "p2"]
    assert s.spec.package == "sglang" and s.spec.version == "1.2.3"
    assert [h for _, h in s.chains()["sglang/srt/a.py"]] == [sha(A0), sha(A1), sha(A2)]
    assert s.sha256 == sha((tmp_path / "s" / "series.yaml").read_bytes())


def test_sha_mismatch_names_the_patch(tmp_path: Path) -> None:
    d = udiff("sglang/srt/b.py", B0, B1)
    e = entry("the-patch", "x.diff", d, {"sglang/srt/b.py": (B0, B1)})
    path = write_series(tmp_path, [(e, d)])
    (tmp_path / "x.diff").write_bytes(d + b"\n")
    with pytest.raises(PatchError, match=r"patch 'the-patch': x\.diff has sha256 .*, the series records"):
        P.load_series(path)
    (tmp_path / "x.diff").unlink()
    with pytest.raises(PatchError, match=r"patch 'the-patch': diff file 'x\.diff' not found"):
        P.load_series(path)


@pytest.mark.parametrize(("mutate", "exc", "match"), [
    (lambda e: e.update(colour="red"), SpecError, "unknown key 'colour'"),
    (lambda e: e.update(enable=None), SpecError, "default_off but has no 'enable'"),
    (lambda e: e.update(enable={}), SpecError, "enable needs 'env' or 'flag'"),
    (lambda e: e.update(sha256="xyz"), SpecError, "sha256"),
    (lambda e: e.update(evidence=[]), SpecError, "evidence"),
    (lambda e: e["files"].update({"other/x.py": {"base": None, "patched": "0" * 64}}), SpecError,
     "not inside package"),
    (lambda e: e["files"].update({"sglang/srt/z.py": {"base": None, "patched": "0" * 64}}), PatchError,
     "the diff touches"),
    (lambda e: e["files"]["sglang/srt/b.py"].update(base=None), PatchError, "creation/deletion"),
    (lambda e: e["files"]["sglang/srt/b.py"].update(patched=e["files"]["sglang/srt/b.py"]["base"]), SpecError,
     "base and patched are equal"),
])
def test_invalid_series_entries(tmp_path: Path, mutate: Any, exc: type[Exception], match: str) -> None:
    d = udiff("sglang/srt/b.py", B0, B1)
    e = entry("p", "x.diff", d, {"sglang/srt/b.py": (B0, B1)})
    mutate(e)
    with pytest.raises(exc, match=match):
        P.load_series(write_series(tmp_path, [(e, d)]))


def test_series_level_checks(tmp_path: Path) -> None:
    d = udiff("sglang/srt/b.py", B0, B1)
    e = entry("p", "x.diff", d, {"sglang/srt/b.py": (B0, B1)})
    with pytest.raises(SpecError, match="duplicate patch ids: p"):
        P.load_series(write_series(tmp_path / "1", [(e, d), (e, d)]))
    with pytest.raises(SpecError, match="format_version 2 is not supported"):
        P.load_series(write_series(tmp_path / "2", [(e, d)], format_version=2))
    e2 = entry("q", "y.diff", d, {"sglang/srt/b.py": (B0, B1)})
    with pytest.raises(SpecError, match="record the hashes in series order"):
        P.load_series(write_series(tmp_path / "3", [(e, d), (e2, d)]))
    e3 = {**e2, "target": {"package": "sglang", "version": "9"}}
    with pytest.raises(SpecError, match="one package version"):
        P.load_series(write_series(tmp_path / "4", [(e, d), (e3, d)]))
    back = udiff("sglang/srt/b.py", B1, B0)
    e4 = entry("r", "z.diff", back, {"sglang/srt/b.py": (B1, B0)})
    with pytest.raises(SpecError, match="returns to an earlier state"):
        P.load_series(write_series(tmp_path / "5", [(e, d), (e4, back)]))


# --- status / apply / revert on small trees --------------------------------------------------------


def test_apply_revert_status_idempotent(tmp_path: Path) -> None:
    s = two_patch_series(tmp_path / "s")
    root = make_tree(tmp_path / "site")
    before = snapshot(root)
    st0 = P.status(s, root)
    assert st0.overall == "unapplied"
    assert st0.tree.layout == "site-packages" and st0.tree.version == "1.2.3" and st0.version_matches

    res = P.apply(s, root)
    assert res.changed and res.patches == ("p1", "p2")
    assert (root / "sglang/srt/a.py").read_bytes() == A2
    assert (root / "sglang/srt/c.py").read_bytes() == NEW
    assert res.files["sglang/srt/c.py"] == (None, sha(NEW))
    assert res.files["sglang/srt/a.py"] == (sha(A0), sha(A2))
    assert P.status(s, root).overall == "applied"
    state = json.loads((root / "sglang" / P.STATE_FILE).read_text())
    assert [a["id"] for a in state["applied"]] == ["p1", "p2"]
    assert state["series_sha256"] == s.sha256
    assert state["files"]["sglang/srt/b.py"] == {"before": sha(B0), "after": sha(B1)}

    after = snapshot(root)
    again = P.apply(s, root)
    assert not again.changed and again.patches == ()
    assert snapshot(root) == after  # nothing written, not even the state file

    ident = P.patch_identity(s, root)
    assert ident == P.patch_identity(s, root / "sglang")
    assert ident["status"] == "applied"
    assert [p["status"] for p in ident["patches"]] == ["applied", "applied"]
    assert ident["patches"][0]["enable"] == {"env": "X_ON", "flag": None}
    assert ident["files"]["sglang/srt/a.py"] == sha(A2)

    res = P.revert(s, root)
    assert res.changed and res.patches == ("p2", "p1") and res.state_path is None
    assert snapshot(root) == before  # original bytes, new file and state file gone
    assert not P.revert(s, root).changed
    assert P.status(s, root).overall == "unapplied"


def test_mixed_state_is_completed_and_reverted(tmp_path: Path) -> None:
    s = two_patch_series(tmp_path / "s")
    root = make_tree(tmp_path / "site", files={"sglang/srt/a.py": A1, "sglang/srt/b.py": B1,
                                               "sglang/srt/c.py": NEW})
    st = P.status(s, root)
    assert st.overall == "mixed" and st.applied == ["p1"]
    assert P.apply(s, root).patches == ("p2",)
    assert P.status(s, root).overall == "applied"
    assert P.revert(s, root).patches == ("p2", "p1")
    assert (root / "sglang/srt/a.py").read_bytes() == A0 and not (root / "sglang/srt/c.py").exists()


def test_modified_base_is_refused_naming_the_file(tmp_path: Path) -> None:
    s = two_patch_series(tmp_path / "s")
    root = make_tree(tmp_path / "site", version="1.2.4",
                     files={"sglang/srt/a.py": A0 + b"# local edit\n", "sglang/srt/b.py": B0})
    before = snapshot(root)
    st = P.status(s, root)
    assert st.overall == "modified" and st.modified_files == ["sglang/srt/a.py"]
    assert [p.status for p in st.patches] == ["modified", "modified"]
    with pytest.raises(PatchError) as exc:
        P.apply(s, root)
    msg = str(exc.value)
    assert "refusing to apply" in msg and "sglang/srt/a.py" in msg and "sglang/srt/b.py" not in msg
    assert "tree has sglang 1.2.4, the series targets 1.2.3" in msg
    with pytest.raises(PatchError, match="refusing to revert"):
        P.revert(s, root)
    assert snapshot(root) == before


def test_half_applied_patch_is_refused(tmp_path: Path) -> None:
    s = two_patch_series(tmp_path / "s")
    root = make_tree(tmp_path / "site", files={"sglang/srt/a.py": A1, "sglang/srt/b.py": B0})
    st = P.status(s, root)
    assert st.overall == "partial"
    assert st.patches[0].files == {"sglang/srt/a.py": "applied", "sglang/srt/b.py": "unapplied",
                                   "sglang/srt/c.py": "unapplied"}
    with pytest.raises(PatchError, match=r"half-applied:\n  p1: sglang/srt/a.py applied"):
        P.apply(s, root)


def test_hunk_failure_leaves_the_tree_untouched(tmp_path: Path) -> None:
    # The series records the real base of b.py, but its diff was made against another version: the
    # first file (a.py) would apply; nothing may be written.
    other = b"print('x')\n"
    d = udiff("sglang/srt/a.py", A0, A1) + udiff("sglang/srt/b.py", other, other + b"z\n")
    e = entry("bad", "bad.diff", d, {"sglang/srt/a.py": (A0, A1), "sglang/srt/b.py": (B0, B1)})
    s = P.load_series(write_series(tmp_path / "s", [(e, d)]))
    root = make_tree(tmp_path / "site")
    before = snapshot(root)
    with pytest.raises(PatchError, match=r"patch 'bad': sglang/srt/b.py: hunk 1 does not apply at line 1"):
        P.apply(s, root)
    assert snapshot(root) == before


def test_result_hash_mismatch_is_refused(tmp_path: Path) -> None:
    d = udiff("sglang/srt/b.py", B0, B1)
    e = entry("p", "x.diff", d, {"sglang/srt/b.py": (B0, B0 + b"#other\n")})
    s = P.load_series(write_series(tmp_path / "s", [(e, d)]))
    root = make_tree(tmp_path / "site")
    before = snapshot(root)
    with pytest.raises(PatchError, match=r"the result has sha256 .* the series records"):
        P.apply(s, root)
    assert snapshot(root) == before


def test_write_error_restores_every_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = two_patch_series(tmp_path / "s")
    root = make_tree(tmp_path / "site")
    before = snapshot(root)
    real = formats.atomic_write
    calls: list[str] = []

    def flaky(path: Path, data: bytes, *, mode: int | None = None, exclusive: bool = False) -> None:
        calls.append(path.name)
        if len(calls) == 3:  # a.py and b.py are written, c.py fails
            raise OSError(28, "No space left on device")
        real(path, data, mode=mode, exclusive=exclusive)

    monkeypatch.setattr(P, "atomic_write", flaky)
    with pytest.raises(PatchError, match=r"writing .*c\.py failed .*No space left on device.*restored the originals"):
        P.apply(s, root)
    assert calls[:3] == ["a.py", "b.py", "c.py"]
    assert snapshot(root) == before


def test_file_modes_are_kept(tmp_path: Path) -> None:
    s = two_patch_series(tmp_path / "s")
    root = make_tree(tmp_path / "site")
    (root / "sglang/srt/b.py").chmod(0o640)
    P.apply(s, root)
    assert (root / "sglang/srt/b.py").stat().st_mode & 0o777 == 0o640
    P.revert(s, root)
    assert (root / "sglang/srt/b.py").stat().st_mode & 0o777 == 0o640


def test_layouts_are_detected(tmp_path: Path) -> None:
    site = make_tree(tmp_path / "site")
    for target in (site, site / "sglang"):
        t = P.locate_package(target)
        assert (t.root, t.layout, t.version) == (site.resolve(), "site-packages", "1.2.3")
    checkout = tmp_path / "checkout"
    pkg = checkout / "python" / "sglang"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (checkout / "python" / "pyproject.toml").write_text('[project]\nname = "sglang"\nversion = "0.5.23"\n')
    for target in (checkout, checkout / "python", pkg):
        t = P.locate_package(target)
        assert (t.root, t.layout, t.version) == ((checkout / "python").resolve(), "source-checkout", "0.5.23")
    (pkg / "_version.py").write_text("__version__ = version = '0.5.24.dev3'\n")
    assert P.locate_package(checkout).version == "0.5.24.dev3"
    with pytest.raises(PatchError, match="no 'sglang' package under"):
        P.locate_package(tmp_path / "nothing")


def test_source_checkout_apply(tmp_path: Path) -> None:
    s = two_patch_series(tmp_path / "s")
    checkout = tmp_path / "checkout"
    make_tree(checkout / "python")
    for info in (checkout / "python").glob("*.dist-info"):
        for f in info.iterdir():
            f.unlink()
        info.rmdir()
    (checkout / ".git").mkdir()
    st = P.status(s, checkout)
    assert st.tree.layout == "source-checkout" and st.tree.version is None and not st.version_matches
    assert P.apply(s, checkout).changed
    assert (checkout / "python/sglang/srt/a.py").read_bytes() == A2


def test_unwritable_tree_is_refused_before_writing(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root ignores directory permissions")
    s = two_patch_series(tmp_path / "s")
    root = make_tree(tmp_path / "site")
    (root / "sglang/srt").chmod(0o555)
    try:
        with pytest.raises(PatchError, match="is not writable; nothing was written"):
            P.apply(s, root)
    finally:
        (root / "sglang/srt").chmod(0o755)


# --- CLI ---------------------------------------------------------------------------------------------


def test_cli_status_apply_revert(tmp_path: Path) -> None:
    two_patch_series(tmp_path / "s")
    series = str(tmp_path / "s" / "series.yaml")
    root = make_tree(tmp_path / "site")
    r = CliRunner()
    res = r.invoke(patches_app, ["status", "--target", str(root), "--series", series])
    assert res.exit_code == 0, res.output
    assert "patches: unapplied" in res.output and "p1" in res.output and "X_ON" in res.output
    res = r.invoke(patches_app, ["status", "--target", str(root), "--series", series, "--expect", "applied"])
    assert isinstance(res.exception, PatchError) and "is unapplied" in str(res.exception)
    res = r.invoke(patches_app, ["apply", "--target", str(root), "--series", series])
    assert res.exit_code == 0 and "applied p1, p2" in res.output
    res = r.invoke(patches_app, ["apply", "--target", str(root), "--series", series])
    assert "already applied: no file was written" in res.output
    res = r.invoke(patches_app, ["status", "--target", str(root), "--series", series, "--json", "--expect", "applied"])
    assert res.exit_code == 0 and json.loads(res.output)["status"] == "applied"
    res = r.invoke(patches_app, ["revert", "--target", str(root), "--series", series])
    assert res.exit_code == 0 and "reverted p2, p1" in res.output
    res = r.invoke(patches_app, ["status", "--target", str(root), "--series", str(tmp_path / "none.yaml")])
    assert isinstance(res.exception, PatchError)
    for cmd in ("status", "apply", "revert", "describe"):
        res = r.invoke(patches_app, [cmd, "--help"])
        assert res.exit_code == 0 and "Example" in res.output


def test_describe_gives_the_series_hashes(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "site")
    diff = udiff("sglang/srt/b.py", B0, B1) + udiff("sglang/srt/c.py", None, NEW)
    (tmp_path / "d.diff").write_bytes(diff)
    res = CliRunner().invoke(patches_app, ["describe", str(tmp_path / "d.diff"), "--target", str(root)])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output) == {
        "sha256": sha(diff), "target": {"package": "sglang", "version": "1.2.3"},
        "files": {"sglang/srt/b.py": {"base": sha(B0), "patched": sha(B1)},
                  "sglang/srt/c.py": {"base": None, "patched": sha(NEW)}}}


# --- the real series on the real SGLang wheel --------------------------------------------------------


@pytest.fixture(scope="module")
def series() -> P.Series:
    return P.load_series(SERIES)


def _sglang_wheel(version: str) -> Path:
    cache = Path(os.environ.get("DSV4H_CACHE") or Path.home() / ".cache" / "dsv4h") / "wheels"
    found = sorted(cache.glob(f"sglang-{version}-*.whl"))
    if found:
        return found[0]
    msg = f"the pinned SGLang wheel sglang-{version}-*.whl is not in {cache}; run .ci/fetch_sglang_wheel.sh"
    if os.environ.get("CI"):
        pytest.fail(msg)
    pytest.skip(msg)


def unpack_wheel(series: P.Series, dest: Path) -> Path:
    """The members the series touches (plus what locates the package) of the pinned wheel, as a
    site-packages directory."""
    assert series.spec.version is not None
    wheel = _sglang_wheel(series.spec.version)
    touched = set(series.chains())
    with zipfile.ZipFile(wheel) as z:
        members = [n for n in z.namelist() if n in touched or n in ("sglang/__init__.py", "sglang/_version.py",
                                                                    "sglang/version.py")
                   or (n.endswith(".dist-info/METADATA") and n.startswith("sglang-"))]
        z.extractall(dest, members)
    return dest


def test_shipped_series_is_valid(series: P.Series) -> None:
    from harness.service.launch.command import SGLANG_PINNED_VERSION

    assert series.spec.version == SGLANG_PINNED_VERSION
    witness = next(p for p in series.patches if p.spec.id == "backend-witness")
    assert witness.spec.default_off and witness.spec.enable is not None
    assert witness.spec.enable.env == "DSV4H_WITNESS_DIR"


def test_real_wheel_apply_compile_modify_revert(series: P.Series, tmp_path: Path) -> None:
    site = unpack_wheel(series, tmp_path / "site-packages")
    original = snapshot(site)
    st = P.status(series, site)
    assert st.overall == "unapplied" and st.tree.version == series.spec.version and st.version_matches

    res = P.apply(series, site)
    assert res.changed and res.patches == tuple(p.spec.id for p in series.patches)
    for rel in series.chains():
        path = site / rel
        if path.exists():
            py_compile.compile(str(path), cfile=str(tmp_path / "c.pyc"), doraise=True)
    assert P.status(series, site).overall == "applied"
    assert not P.apply(series, site).changed
    runner = (site / "sglang/srt/model_executor/model_runner.py").read_text()
    assert runner.count("dsv4h_witness.record(self,") == 2

    patched = (site / "sglang/srt/model_executor/model_runner.py").read_bytes()
    (site / "sglang/srt/model_executor/model_runner.py").write_bytes(patched + b"# edited\n")
    st = P.status(series, site)
    assert st.overall == "modified" and st.modified_files == ["sglang/srt/model_executor/model_runner.py"]
    with pytest.raises(PatchError, match=r"model_runner\.py"):
        P.revert(series, site)
    (site / "sglang/srt/model_executor/model_runner.py").write_bytes(patched)

    assert P.revert(series, site).changed
    assert snapshot(site) == original
    assert P.status(series, site).overall == "unapplied"


def test_witness_module_from_the_patched_wheel(series: P.Series, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    site = unpack_wheel(series, tmp_path / "site-packages")
    P.apply(series, site)
    spec = importlib.util.spec_from_file_location("dsv4h_witness_under_test", site / "sglang/srt/dsv4h_witness.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "w"
    runner = SimpleNamespace(attn_backend=None, server_args=None)
    monkeypatch.delenv("DSV4H_WITNESS_DIR", raising=False)
    assert mod.record(runner, "startup") is None
    monkeypatch.setenv("DSV4H_WITNESS_DIR", str(out))
    path = mod.record(runner, "startup", parallel=SimpleNamespace(tp_rank=0, tp_size=1),
                      moe_runner_backend=None, sglang_version=series.spec.version)
    assert path is not None and Path(path).parent == out
    assert json.loads(Path(path).read_text())["format"] == "dsv4h-backend-witness"
