"""Building corpora: determinism, token ranges, provenance, --extend, chat encodings, tokenizer training."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.errors import CorpusError, SpecError
from harness.inputs.corpus import CASES_FILE, MANIFEST_FILE
from harness.inputs.corpus.build import (
    DEFAULT_TEMPLATE,
    TINY_SPECIAL_TOKENS,
    build_corpus,
    deepseek_v4_chat,
    list_source_files,
    load_tokenizer,
    parse_token_range,
    tokenizer_identity,
    train_tokenizer,
)

REPO = Path(__file__).resolve().parents[2]
TOK8K = REPO / "corpora" / "tokenizers" / "dsv4h-sim-bpe-8k"
TINY = REPO / "corpora" / "tokenizers" / "tiny-bpe-512"


def make_source(root: Path, n_files: int = 5, n_funcs: int = 12) -> Path:
    """A small deterministic tree of Python-like files (plus files the default patterns skip)."""
    src = root / "src"
    (src / "pkg" / "tests").mkdir(parents=True)
    for i in range(n_files):
        lines = [f'"""Module {i}: helpers for widget number {i}."""', "", "import math", ""]
        for j in range(n_funcs):
            lines += [
                f"def func_{i}_{j}(x, y={j}):",
                f'    """Return a blend of x and y scaled by {i + j}."""',
                f"    total = math.sqrt(abs(x)) * {i + 1} + y ** {j % 3}",
                f"    return [total + k for k in range({j + 2})]",
                "",
            ]
        sub = src if i % 2 == 0 else src / "pkg"
        (sub / f"mod_{i:02d}.py").write_text("\n".join(lines) + "\n")
    (src / "pkg" / "tests" / "test_x.py").write_text("def test_x():\n    assert True\n" * 50)
    (src / "notes.txt").write_text("not python\n" * 100)
    (src / "latin1.py").write_bytes(b"# caf\xe9\n" * 300)  # not UTF-8: skipped
    return src


@pytest.fixture
def src(tmp_path: Path) -> Path:
    return make_source(tmp_path)


def test_list_source_files_sorted_and_filtered(src: Path) -> None:
    files = list_source_files(src)
    assert files == sorted(files)
    assert "pkg/tests/test_x.py" not in files and "notes.txt" not in files
    assert "pkg/mod_01.py" in files and "mod_00.py" in files


def test_build_is_deterministic_and_in_range(tmp_path: Path, src: Path) -> None:
    a = build_corpus(src, TINY, (60, 64), 8, tmp_path / "a" / "demo", source_revision="r1")
    b = build_corpus(src, TINY, (60, 64), 8, tmp_path / "b" / "demo", source_revision="r1")
    for fname in (MANIFEST_FILE, CASES_FILE):
        assert (a.path / fname).read_bytes() == (b.path / fname).read_bytes()
    assert a.manifest_sha256 == b.manifest_sha256
    assert len(a) == 8 and all(60 <= c.n_tokens <= 64 for c in a.cases)
    assert a.manifest.source.revision == "r1" and a.manifest.source.root == "src"
    assert str(tmp_path) not in (a.path / MANIFEST_FILE).read_text()  # no absolute paths


def test_provenance_and_trimming_keep_the_template_tail(tmp_path: Path, src: Path) -> None:
    c = build_corpus(src, TINY, (60, 61), 10, tmp_path / "demo")
    tok = load_tokenizer(TINY)
    texts = {p: (src / p).read_text().splitlines() for p in {x.provenance["path"] for x in c.cases}}
    assert any(case.provenance["trimmed_tokens"] > 0 for case in c.cases)
    prev: dict[str, int] = {}
    for case in c.cases:
        p = case.provenance
        assert p["line_start"] > prev.get(p["path"], 0)  # spans never overlap
        prev[p["path"]] = p["line_end"]
        text = tok.decode(case.ids_list(), skip_special_tokens=False)
        assert text.startswith("Review the following source file excerpt") and text.endswith("\n```\n")
        code = text.split(f"```python\n# {p['path']}\n", 1)[1].removesuffix("\n```\n")
        lines = texts[p["path"]]
        span = "\n".join(lines[p["line_start"] - 1: p["line_end"]])
        assert lines[p["line_start"] - 1].strip()  # excerpts start on a non-blank line
        if p["trimmed_tokens"] == 0:
            assert code == span
        else:  # cut inside line_end: a prefix of the span that reaches into its last line
            assert span.startswith(code) and code != span
            assert len(code) > len("\n".join(lines[p["line_start"] - 1: p["line_end"] - 1]))


def test_extend_keeps_old_cases_and_equals_a_fresh_build(tmp_path: Path, src: Path) -> None:
    small = build_corpus(src, TINY, (60, 64), 4, tmp_path / "small", name="demo", max_per_file=2)
    big = build_corpus(src, TINY, None, 9, tmp_path / "big", name="demo", extend=small.path)
    old_bytes = (small.path / CASES_FILE).read_bytes()
    new_bytes = (big.path / CASES_FILE).read_bytes()
    assert new_bytes.startswith(old_bytes)
    assert [c.case_id for c in big.cases[:4]] == [c.case_id for c in small.cases]
    assert [c.sha256 for c in big.cases[:4]] == [c.sha256 for c in small.cases]
    assert big.manifest.history[-1].action == "extend" and big.manifest.history[-1].max_per_file == 2
    assert big.manifest.history[-1].extended_from == {
        "name": "demo", "manifest_sha256": small.manifest_sha256, "n_cases": 4}
    spans = [(c.provenance["path"], c.provenance["line_start"]) for c in big.cases]
    assert len(set(spans)) == len(spans)
    fresh = build_corpus(src, TINY, (60, 64), 9, tmp_path / "fresh", name="demo", max_per_file=2)
    assert (fresh.path / CASES_FILE).read_bytes() == new_bytes


def test_extend_refuses_mismatches_and_in_place_without_force(tmp_path: Path, src: Path) -> None:
    old = build_corpus(src, TINY, (60, 64), 3, tmp_path / "old")
    with pytest.raises(SpecError, match="token range"):
        build_corpus(src, TINY, (50, 64), 6, tmp_path / "x", extend=old.path)
    with pytest.raises(SpecError, match="tokenizer"):
        build_corpus(src, TOK8K, None, 6, tmp_path / "x", extend=old.path)
    with pytest.raises(SpecError, match="below the 3 cases"):
        build_corpus(src, TINY, None, 2, tmp_path / "x", extend=old.path)
    with pytest.raises(CorpusError, match="refusing to overwrite"):
        build_corpus(src, TINY, None, 6, old.path, extend=old.path)
    before = (old.path / CASES_FILE).read_bytes()
    grown = build_corpus(src, TINY, None, 6, old.path, extend=old.path, overwrite=True)
    assert len(grown) == 6 and (grown.path / CASES_FILE).read_bytes().startswith(before)
    bad = tmp_path / "tampered"
    shutil.copytree(old.path, bad)
    (bad / CASES_FILE).write_bytes((bad / CASES_FILE).read_bytes().replace(b"[", b"[7,", 1))
    with pytest.raises(CorpusError, match="changed: c000"):
        build_corpus(src, TINY, None, 8, tmp_path / "y", extend=bad)


def test_refuses_to_overwrite_and_reports_short_sources(tmp_path: Path, src: Path) -> None:
    build_corpus(src, TINY, (60, 64), 2, tmp_path / "demo")
    with pytest.raises(CorpusError, match="already exists"):
        build_corpus(src, TINY, (60, 64), 2, tmp_path / "demo")
    assert len(build_corpus(src, TINY, (60, 64), 3, tmp_path / "demo", overwrite=True)) == 3
    with pytest.raises(CorpusError, match="supply only"):
        build_corpus(src, TINY, (60, 64), 500, tmp_path / "many")
    with pytest.raises(CorpusError, match="source directory"):
        build_corpus(tmp_path / "nope", TINY, (60, 64), 2, tmp_path / "z")
    with pytest.raises(CorpusError, match="tokenizer file not found"):
        build_corpus(src, tmp_path, (60, 64), 2, tmp_path / "z")


def test_chat_encoding_hook(tmp_path: Path, src: Path) -> None:
    c = build_corpus(src, TOK8K, (40, 48), 3, tmp_path / "chat",
                     chat_encoding="harness.inputs.corpus.build:deepseek_v4_chat")
    assert c.manifest.chat_encoding == "harness.inputs.corpus.build:deepseek_v4_chat"
    tok = load_tokenizer(TOK8K)
    bos, user, assistant, end_think = (tok.token_to_id(t) for t in (
        "<｜begin▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "</think>"))
    for case in c.cases:
        ids = case.ids_list()
        assert ids[:2] == [bos, user] == [0, 2] and ids[-2:] == [assistant, end_think]
    d = build_corpus(src, TOK8K, (40, 48), 3, tmp_path / "chat2", chat_encoding=deepseek_v4_chat)
    assert [x.sha256 for x in d.cases] == [x.sha256 for x in c.cases]
    with pytest.raises(SpecError, match="verbatim"):
        build_corpus(src, TOK8K, (40, 48), 3, tmp_path / "bad", chat_encoding=str.upper)
    with pytest.raises(SpecError, match="cannot import"):
        build_corpus(src, TOK8K, (40, 48), 3, tmp_path / "bad", chat_encoding="harness.nope:fn")
    with pytest.raises(SpecError, match="module:function"):
        build_corpus(src, TOK8K, (40, 48), 3, tmp_path / "bad", chat_encoding="harness")


def test_template_and_range_validation(tmp_path: Path, src: Path) -> None:
    with pytest.raises(SpecError, match="exactly once"):
        build_corpus(src, TINY, (60, 64), 2, tmp_path / "t", template="no code here {path}")
    with pytest.raises(SpecError, match="exactly once"):
        build_corpus(src, TINY, (60, 64), 2, tmp_path / "t", template="{code} {other}")
    with pytest.raises(SpecError, match="more than the range allows"):
        build_corpus(src, TINY, (3, 4), 1, tmp_path / "t")
    c = build_corpus(src, TINY, (40, 48), 2, tmp_path / "t", template="{{literal}} {path}:\n{code}\n")
    assert load_tokenizer(TINY).decode(c.cases[0].ids_list()).startswith("{literal} mod_00.py:\n")
    assert parse_token_range("512") == (512, 512)
    assert parse_token_range(" 511-512 ") == (511, 512)
    for bad in ("", "0", "9-8", "a-b", "1-2-3"):
        with pytest.raises(SpecError):
            parse_token_range(bad)
    assert "{code}" in DEFAULT_TEMPLATE


def test_tokenizer_identity_same_for_dir_and_file() -> None:
    a = tokenizer_identity(TINY)
    b = tokenizer_identity(TINY / "tokenizer.json")
    assert a == b and a["name"] == "tiny-bpe-512" and a["vocab_size"] <= 512
    assert set(a["files"]) == {"tokenizer.json", "tokenizer_config.json"}


def test_train_tokenizer_is_deterministic(tmp_path: Path, src: Path) -> None:
    kw = {"vocab_size": 300, "special_tokens": TINY_SPECIAL_TOKENS, "bos_token": "<s>", "eos_token": "</s>",
          "source_revision": "test"}
    a = train_tokenizer(src, tmp_path / "a", **kw)  # type: ignore[arg-type]
    b = train_tokenizer(src, tmp_path / "b", **kw)  # type: ignore[arg-type]
    assert a["files"] == b["files"] and a["vocab_size"] <= 300
    assert a["training"]["source_revision"] == "test" and a["training"]["n_files"] == 5
    tok = load_tokenizer(tmp_path / "a")
    assert [tok.token_to_id(t) for t in TINY_SPECIAL_TOKENS] == [0, 1, 2]
    assert tok.decode(tok.encode("def f(x):\n    return x\n").ids) == "def f(x):\n    return x\n"
    with pytest.raises(CorpusError, match="already exists"):
        train_tokenizer(src, tmp_path / "a", **kw)  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="vocab_size"):
        train_tokenizer(src, tmp_path / "c", vocab_size=100)


def test_chat_encodings_recorded_before_a_move_still_resolve() -> None:
    """The shipped corpora's manifests (hashed) record the encoding's old module path."""
    import json
    from pathlib import Path

    from harness.inputs.corpus.build import deepseek_v4_chat
    from harness.inputs.corpus.sources import resolve_chat_encoding

    root = Path(__file__).resolve().parents[2]
    recorded = json.loads((root / "corpora/sim-code-512/manifest.json").read_text())["chat_encoding"]
    fn, name = resolve_chat_encoding(recorded)
    assert fn is deepseek_v4_chat and name == recorded
