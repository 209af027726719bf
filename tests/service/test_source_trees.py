"""source_tree_state on real git trees made in tmp_path: known-answer hashes, and errors not exceptions."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.hashing import sha256_json
from harness.service.identity.source_trees import source_tree_state

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git binary")

_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def _git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          env=dict(os.environ) | _ENV).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "aiter"
    r.mkdir()
    _git(r, "init", "-q", "-b", "main")
    (r / "kernel.py").write_text("x = 1\n")
    (r / "README").write_text("readme\n")
    (r / ".gitignore").write_text("*.log\n")
    _git(r, "add", ".")
    _git(r, "commit", "-q", "-m", "one")
    (r / "kernel.py").write_text("x = 2\n")
    _git(r, "commit", "-q", "-am", "two")
    return r


def test_clean_tree_records_commit_branch_and_empty_changes(repo: Path) -> None:
    st = source_tree_state("aiter", repo, None)
    head = _git(repo, "rev-parse", "HEAD").decode().strip()
    g = st["git"]
    assert st["error"] is None and st["name"] == "aiter" and st["distribution"] is None
    assert g["commit"] == head and len(head) == 40
    assert g["branch"] == "main"
    assert g["dirty_paths"] == [] and g["dirty"] is False
    assert g["diff_sha256"] == hashlib.sha256(b"").hexdigest()
    assert g["untracked"] == [] and g["untracked_sha256"] == sha256_json([])


def test_dirty_tree_known_answer_hashes(repo: Path) -> None:
    (repo / "kernel.py").write_text("x = 3  # local fix\n")
    (repo / "new_op.py").write_bytes(b"def op():\n    return 42\n")
    (repo / "run.log").write_text("ignored\n")  # .gitignore: neither dirty nor untracked
    before = _git(repo, "status", "--porcelain")
    st = source_tree_state("aiter", repo, None)
    g = st["git"]
    diff = _git(repo, "diff", "HEAD", "--binary")
    assert b"local fix" in diff
    assert g["diff_sha256"] == hashlib.sha256(diff).hexdigest()
    assert g["dirty_paths"] == ["kernel.py", "new_op.py"] and g["dirty"] is True
    assert g["untracked"] == ["new_op.py"] and g["untracked_count"] == 1 and g["untracked_truncated"] is False
    want = sha256_json([["new_op.py", hashlib.sha256(b"def op():\n    return 42\n").hexdigest()]])
    assert g["untracked_sha256"] == want
    assert _git(repo, "status", "--porcelain") == before  # nothing was changed by reading


def test_untracked_content_change_changes_the_hash(repo: Path) -> None:
    (repo / "new_op.py").write_text("a\n")
    first = source_tree_state("aiter", repo, None)["git"]["untracked_sha256"]
    (repo / "new_op.py").write_text("b\n")
    second = source_tree_state("aiter", repo, None)["git"]["untracked_sha256"]
    assert first != second


def test_untracked_list_is_capped_and_large_files_are_not_read(repo: Path) -> None:
    for i in range(5):
        (repo / f"u{i}.txt").write_text(str(i))
    with open(repo / "big.bin", "wb") as f:
        f.truncate(10_000)  # sparse; above the limit given below
    os.mkfifo(repo / "pipe")  # git lists no FIFO; reading the tree must not block on it either
    os.symlink("/nonexistent/target", repo / "link")  # recorded by its target text, never followed
    st = source_tree_state("aiter", repo, None, max_untracked=3, max_file_bytes=1000)
    g = st["git"]
    assert st["error"] is None
    assert g["untracked_count"] == 7 and g["untracked_truncated"] is True
    assert g["untracked"] == ["big.bin", "link", "u0.txt"]
    assert g["untracked_not_hashed"] == ["big.bin"]
    want = sha256_json([["big.bin", "size:10000"],
                        ["link", "symlink:" + hashlib.sha256(b"/nonexistent/target").hexdigest()],
                        ["u0.txt", hashlib.sha256(b"0").hexdigest()]])
    assert g["untracked_sha256"] == want


def test_not_a_repo_and_missing_path_give_an_error(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    st = source_tree_state("x", plain, None)
    assert st["git"] is None and "not a readable git work tree" in st["error"]
    gone = source_tree_state("y", tmp_path / "nope", None)
    assert gone["git"] is None and gone["error"] == f"{tmp_path / 'nope'}: no such directory"


def test_no_git_binary_gives_an_error(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda _name: None)
    st = source_tree_state("aiter", repo, None)
    assert st["git"] is None and st["error"].startswith("no git binary")


def test_distribution_installed_and_missing(repo: Path) -> None:
    st = source_tree_state("aiter", repo, "pydantic")
    d = st["distribution"]
    assert st["error"] is None
    assert d["name"].lower() == "pydantic" and d["version"] and d["editable"] is False
    assert d["editable_points_here"] is False
    missing = source_tree_state("aiter", repo, "no-such-dist-dsv4h-test")
    assert missing["distribution"] is None and "'no-such-dist-dsv4h-test' is not installed" in missing["error"]
    assert missing["git"] is not None  # the git state is still recorded


def test_editable_install_pointing_into_the_tree(repo: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    info = site / "aiterpkg-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: aiterpkg\nVersion: 0.1\n")
    (info / "direct_url.json").write_text(
        '{"url": "' + (repo / "python").as_uri() + '", "dir_info": {"editable": true}}')
    monkeypatch.syspath_prepend(str(site))
    d = source_tree_state("aiter", repo, "aiterpkg")["distribution"]
    assert d["version"] == "0.1" and d["editable"] is True and d["editable_points_here"] is True
    other = tmp_path / "elsewhere"
    other.mkdir()
    d2 = source_tree_state("elsewhere", other, "aiterpkg")["distribution"]
    assert d2["editable"] is True and d2["editable_points_here"] is False
