"""Corpus format: load/verify round trip, every failure mode named by case id, and the shipped corpora."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.errors import CorpusError
from harness.hashing import ids_sha256, sha256_file, sha256_json
from harness.inputs.corpus import (
    CASES_FILE,
    MANIFEST_FILE,
    cache_salt,
    load_corpus,
    resolve_corpus_path,
    verify_corpus,
)
from harness.inputs.corpus.write import encode_case_line, encode_manifest

REPO = Path(__file__).resolve().parents[2]
CORPORA = REPO / "corpora"


def _manifest(cases: list[tuple[str, list[int]]], lo: int = 3, hi: int = 6) -> dict[str, Any]:
    return {
        "format_version": 1,
        "name": "t",
        "description": "test corpus",
        "tokenizer": {"name": "tok", "files": {"tokenizer.json": "0" * 64}},
        "token_range": {"min": lo, "max": hi},
        "prompt_template": "{path}\n{code}\n",
        "chat_encoding": None,
        "source": {"repository": "local", "revision": "r1", "root": "src"},
        "history": [],
        "cases": [
            {"case_id": cid, "n_tokens": len(ids), "sha256": ids_sha256(ids),
             "provenance": {"path": f"f{i}.py", "line_start": 1, "line_end": 2, "trimmed_tokens": 0}}
            for i, (cid, ids) in enumerate(cases)
        ],
    }


CASES = [("c000", [1, 2, 3]), ("c001", [4, 5, 6, 7]), ("c002", [8, 9, 10, 11, 12]), ("c003", [0, 1, 2, 3])]


@pytest.fixture
def corpus_dir(tmp_path: Path) -> Path:
    d = tmp_path / "t"
    d.mkdir()
    (d / MANIFEST_FILE).write_bytes(encode_manifest(_manifest(CASES)))
    (d / CASES_FILE).write_bytes(b"".join(encode_case_line(c, ids) for c, ids in CASES))
    return d


def _lines(d: Path) -> list[str]:
    return (d / CASES_FILE).read_text().splitlines()


def _write_lines(d: Path, lines: list[str]) -> None:
    (d / CASES_FILE).write_text("".join(ln + "\n" for ln in lines))


def test_round_trip(corpus_dir: Path) -> None:
    c = load_corpus(corpus_dir)
    assert verify_corpus(corpus_dir) == []
    assert [x.case_id for x in c.cases] == ["c000", "c001", "c002", "c003"]
    assert [x.ids_list() for x in c.cases] == [ids for _, ids in CASES]
    assert len(c) == 4 and c.token_range == (3, 6)
    case = c.case("c002")
    assert case.input_ids.dtype == np.int32 and case.n_tokens == 5 and case.sha256 == ids_sha256(CASES[2][1])
    assert case.provenance["path"] == "f2.py"
    with pytest.raises(ValueError, match="read-only"):
        case.input_ids[0] = 99
    assert c.manifest_sha256 == sha256_json(json.loads((corpus_dir / MANIFEST_FILE).read_text()))
    assert c.identity()["manifest_sha256"] == c.manifest_sha256
    assert c.first(2) == c.cases[:2]
    with pytest.raises(CorpusError, match="no case"):
        c.case("c999")


def test_manifest_hash_ignores_layout_but_not_content(corpus_dir: Path) -> None:
    h = load_corpus(corpus_dir).manifest_sha256
    raw = json.loads((corpus_dir / MANIFEST_FILE).read_text())
    (corpus_dir / MANIFEST_FILE).write_text(json.dumps(raw, indent=7, sort_keys=True))
    assert load_corpus(corpus_dir).manifest_sha256 == h
    raw["description"] = "changed"
    (corpus_dir / MANIFEST_FILE).write_text(json.dumps(raw))
    assert load_corpus(corpus_dir).manifest_sha256 != h


def test_changed_case_is_named(corpus_dir: Path) -> None:
    lines = _lines(corpus_dir)
    lines[1] = lines[1].replace("[4,5", "[4,50")
    _write_lines(corpus_dir, lines)
    problems = verify_corpus(corpus_dir)
    assert len(problems) == 1 and "case c001 changed" in problems[0] and "line 2" in problems[0]
    with pytest.raises(CorpusError) as ei:
        load_corpus(corpus_dir)
    msg = str(ei.value)
    assert "changed: c001" in msg and str(corpus_dir / CASES_FILE) in msg
    assert ei.value.hint is not None and "Rebuild" in ei.value.hint and "restore" in ei.value.hint


def test_missing_extra_duplicate_and_reordered(corpus_dir: Path) -> None:
    lines = _lines(corpus_dir)
    extra = encode_case_line("c099", [1, 2, 3]).decode().strip()
    _write_lines(corpus_dir, [lines[1], lines[0], lines[3], lines[3], extra])  # c002 missing
    problems = "\n".join(verify_corpus(corpus_dir))
    assert "case c002 is in manifest.json but missing" in problems
    assert "case c099" in problems and "not listed" in problems
    assert "c003 appears more than once" in problems
    assert "out of manifest order" in problems
    with pytest.raises(CorpusError) as ei:
        load_corpus(corpus_dir)
    assert "missing: c002" in str(ei.value) and "extra: c099" in str(ei.value)
    assert "duplicate: c003" in str(ei.value)


def test_length_outside_range_is_reported(tmp_path: Path) -> None:
    d = tmp_path / "t"
    d.mkdir()
    cases = [("c000", [1, 2])]
    (d / MANIFEST_FILE).write_bytes(encode_manifest(_manifest(cases)))
    (d / CASES_FILE).write_bytes(encode_case_line("c000", [1, 2]))
    assert any("outside token_range [3, 6]" in p for p in verify_corpus(d))


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ('{"case_id": "c002", "input_ids": [1, 2', "line 3: malformed JSON"),
        ('{"case_id": "c002"}', "line 3: expected an object"),
        ('{"case_id": "c002", "input_ids": [1.5, 2]}', "line 3 .*only integers"),
        ('{"case_id": "c002", "input_ids": []}', "line 3 .*non-empty"),
        ('{"case_id": "c002", "input_ids": [-1, 2]}', r"line 3 .*\[0, 2\*\*31 - 1\]"),
        ('{"case_id": 2, "input_ids": [1]}', "line 3: case_id must be a string"),
    ],
)
def test_malformed_cases_jsonl(corpus_dir: Path, line: str, match: str) -> None:
    lines = _lines(corpus_dir)
    lines[2] = line
    _write_lines(corpus_dir, lines)
    with pytest.raises(CorpusError, match=match):
        load_corpus(corpus_dir)
    assert len(verify_corpus(corpus_dir)) == 1


def test_structural_errors(tmp_path: Path, corpus_dir: Path) -> None:
    with pytest.raises(CorpusError, match="corpus directory not found"):
        load_corpus(tmp_path / "nope")
    (corpus_dir / CASES_FILE).unlink()
    with pytest.raises(CorpusError, match="cases file not found"):
        load_corpus(corpus_dir)
    assert "cases file not found" in verify_corpus(corpus_dir)[0]
    (corpus_dir / MANIFEST_FILE).write_text('{\n  "format_version": 1,\n  "name": \n}')
    with pytest.raises(CorpusError, match=r"manifest.json: malformed JSON at line 4"):
        load_corpus(corpus_dir)
    (corpus_dir / MANIFEST_FILE).unlink()
    with pytest.raises(CorpusError, match="manifest not found"):
        load_corpus(corpus_dir)


def test_invalid_manifest_names_fields(corpus_dir: Path) -> None:
    raw = json.loads((corpus_dir / MANIFEST_FILE).read_text())
    raw["cases"][1]["n_tokens"] = "4"
    raw["cases"][2]["sha256"] = "xyz"
    raw["surprise"] = 1
    (corpus_dir / MANIFEST_FILE).write_text(json.dumps(raw))
    with pytest.raises(CorpusError) as ei:
        load_corpus(corpus_dir)
    msg = str(ei.value)
    assert "cases.1.n_tokens" in msg and "cases.2.sha256" in msg and "surprise" in msg
    raw = json.loads(json.dumps(_manifest(CASES)))
    raw["format_version"] = 2
    (corpus_dir / MANIFEST_FILE).write_text(json.dumps(raw))
    with pytest.raises(CorpusError, match="unsupported format_version 2"):
        load_corpus(corpus_dir)


def test_resolve_corpus_path(tmp_path: Path, corpus_dir: Path) -> None:
    assert resolve_corpus_path(corpus_dir) == corpus_dir
    assert resolve_corpus_path("sim-code-512", cwd=tmp_path) == CORPORA / "sim-code-512"
    (tmp_path / "corpora").mkdir()
    shutil.copytree(corpus_dir, tmp_path / "corpora" / "sim-code-512")
    assert resolve_corpus_path("sim-code-512", cwd=tmp_path) == tmp_path / "corpora" / "sim-code-512"
    with pytest.raises(CorpusError, match="no corpus 'nope'") as ei:
        resolve_corpus_path("nope", cwd=tmp_path)
    assert str(tmp_path / "corpora" / "nope") in str(ei.value)


def test_cache_salt() -> None:
    assert cache_salt("run", 1, "c000") == cache_salt("run", 1, "c000")
    assert len(cache_salt("run", 1, "c000")) == 32
    assert len({cache_salt("run", k, c) for k in range(3) for c in ("c000", "c001")}) == 6


# ------------------------------------------------------------------------------------------------------
# The shipped corpora
# ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "n_cases", "lo", "hi", "tokenizer"),
    [
        ("sim-code-512", 64, 511, 512, "dsv4h-sim-bpe-8k"),
        ("sim-code-8k", 64, 8191, 8192, "dsv4h-sim-bpe-8k"),
        ("tiny-code-128", 16, 100, 128, "tiny-bpe-512"),
    ],
)
def test_shipped_corpora(name: str, n_cases: int, lo: int, hi: int, tokenizer: str) -> None:
    path = CORPORA / name
    assert verify_corpus(path) == []
    c = load_corpus(path)  # its speed is measured in benchmarks/bench_corpus_build.py, not bounded here
    assert c.name == name and len(c) == n_cases and c.token_range == (lo, hi)
    assert [x.case_id for x in c.cases] == [f"c{i:03d}" for i in range(n_cases)]
    assert all(lo <= x.n_tokens <= hi for x in c.cases)
    assert all(x.n_tokens == len(x.input_ids) for x in c.cases)
    tok = c.manifest.tokenizer
    assert tok.name == tokenizer
    for fname, digest in tok.files.items():
        assert sha256_file(CORPORA / "tokenizers" / tokenizer / fname) == digest
    vocab = tok.vocab_size
    assert vocab is not None and all(int(x.input_ids.max()) < vocab for x in c.cases)
    assert c.manifest.source.revision == "v3.11.7" and c.manifest.source.root == "Lib"


def test_sim_code_512_was_extended_from_32() -> None:
    c = load_corpus(CORPORA / "sim-code-512")
    steps = c.manifest.history
    assert [(h.action, h.first_case, h.last_case, h.n_cases) for h in steps] == [
        ("build", "c000", "c031", 32), ("extend", "c032", "c063", 64)]
    assert steps[1].extended_from is not None and steps[1].extended_from["n_cases"] == 32


def test_tiny_corpus_fits_the_tiny_model() -> None:
    c = load_corpus(CORPORA / "tiny-code-128")
    assert c.manifest.tokenizer.vocab_size is not None and c.manifest.tokenizer.vocab_size <= 512
    assert max(int(x.input_ids.max()) for x in c.cases) < 512
    assert min(int(x.input_ids.min()) for x in c.cases) >= 0


@pytest.mark.parametrize(("name", "tokenizer"), [("sim-code-512", "dsv4h-sim-bpe-8k"),
                                                 ("tiny-code-128", "tiny-bpe-512")])
def test_shipped_ids_are_the_tokenizers_own_encoding(name: str, tokenizer: str) -> None:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(CORPORA / "tokenizers" / tokenizer / "tokenizer.json"))
    for case in load_corpus(CORPORA / name).cases:
        text = tok.decode(case.ids_list(), skip_special_tokens=False)
        assert tok.encode(text, add_special_tokens=False).ids == case.ids_list(), case.case_id


def test_docs_quote_the_current_hashes() -> None:
    readme = (CORPORA / "README.md").read_text()
    for name in ("sim-code-512", "sim-code-8k", "tiny-code-128"):
        assert load_corpus(CORPORA / name).manifest_sha256[:12] in readme, name
    for tok in ("dsv4h-sim-bpe-8k", "tiny-bpe-512"):
        text = (CORPORA / "tokenizers" / tok / "README.md").read_text()
        for fname in ("tokenizer.json", "tokenizer_config.json", "training.json"):
            assert sha256_file(CORPORA / "tokenizers" / tok / fname) in text, (tok, fname)


def test_a_mistyped_corpus_name_gets_did_you_mean(tmp_path: Path) -> None:
    from harness.inputs.corpus import load_corpus

    for name in ("sim-code-512", "tiny-code-128"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "manifest.json").write_text("{}")
    with pytest.raises(CorpusError) as err:
        load_corpus(tmp_path / "sim-code-51")
    assert err.value.hint == (f"did you mean '{tmp_path / 'sim-code-512'}'? "
                              f"(corpora in {tmp_path}: sim-code-512, tiny-code-128)")
    with pytest.raises(CorpusError) as err:
        load_corpus(tmp_path / "zzz")
    assert err.value.hint is not None and err.value.hint.startswith(f"corpora in {tmp_path}: sim-code-512")


def test_identity_records_tokenizer_and_ranges(corpus_dir: Path) -> None:
    """The corpus record every run writes to its archive (record format 2): declared and observed
    lengths, token-id range and the tokenizer's name, file-map hash and vocabulary size."""
    ident = load_corpus(corpus_dir).identity()
    assert ident == {
        "record_format": 2, "name": ident["name"], "path": str(corpus_dir),
        "manifest_sha256": ident["manifest_sha256"], "n_cases": 4, "token_range": [3, 6],
        "tokenizer": "tok", "vocab_size": None,
        "tokenizer_sha256": "52015124436343eb62af380b46651fe6b5764d446935bc9204300b256e20f8f5",  # of {file: sha256}
        "input_tokens": [3, 5], "token_ids": [0, 12]}
