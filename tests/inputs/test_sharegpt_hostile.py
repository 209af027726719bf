"""ShareGPT import on hostile input (issue 23, seen 8; build 4 and 6): linear tokenizing (no turn is
tokenized twice as part of a growing prompt, a conversation is left once it exceeds --max-input),
bounded work per turn, special files refused without hanging, invalid text refused naming the
conversation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.errors import CorpusError
from harness.hashing import ids_sha256
from harness.inputs.corpus import synth as corpus_synth
from harness.inputs.corpus.synth import MAX_CHARS_PER_TOKEN, import_sharegpt, sharegpt_turns
from harness.inputs.tokenizer import load_tokenizer

ROOT = Path(__file__).resolve().parents[2]
TOK = ROOT / "corpora" / "tokenizers" / "tiny-bpe-512"
SHAREGPT = ROOT / "tests" / "fixtures" / "peers" / "sharegpt-small.json"


class _Counting:
    """The real tokenizer, counting the characters it is handed."""

    def __init__(self) -> None:
        self.tok = load_tokenizer(TOK)
        self.chars = 0
        self.calls = 0
        self.longest = 0

    def encode(self, text: str, add_special_tokens: bool = False) -> Any:
        self.chars += len(text)
        self.calls += 1
        self.longest = max(self.longest, len(text))
        return self.tok.encode(text, add_special_tokens=add_special_tokens)


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> _Counting:
    c = _Counting()
    monkeypatch.setattr(corpus_synth, "load_tokenizer", lambda _path: c)
    return c


def _conv(cid: str, turns: list[tuple[str, str]]) -> dict[str, Any]:
    return {"id": cid, "conversations": [{"from": f, "value": v} for f, v in turns]}


def _long_conversation(n_pairs: int, chars: int) -> dict[str, Any]:
    words = "for line in open(path): print(line.rstrip()) # read the file and strip it "
    text = (words * (chars // len(words) + 1))[:chars]
    return _conv("long", [t for k in range(n_pairs) for t in (("human", f"{k}: {text}"), ("gpt", text))])


def test_tokenizing_stops_at_max_input_on_a_2mb_conversation(tmp_path: Path, counting: _Counting) -> None:
    src = tmp_path / "long.json"
    src.write_text(json.dumps([_long_conversation(1250, 800)]))  # 2,500 turns, about 2 MB
    assert src.stat().st_size > 1_900_000
    c = import_sharegpt(tmp_path / "c", source=src, tokenizer=TOK, max_input=1024, max_output=256)
    assert len(c) >= 1 and all(x.n_tokens <= 1024 for x in c.manifest.cases)
    # the old import tokenized every growing prompt in full (about 2.5 GB of text here); now only the
    # turns up to the first one past --max-input, each once (and an answer once more for its length)
    bound = MAX_CHARS_PER_TOKEN * 1024
    assert counting.chars <= 3 * bound, counting.chars
    assert counting.longest <= 1000


def test_a_turn_over_the_character_bound_is_never_tokenized(tmp_path: Path, counting: _Counting) -> None:
    huge = "x" * 2_000_000
    src = tmp_path / "huge.json"
    src.write_text(json.dumps([_conv("a", [("human", "hi"), ("gpt", "hello"), ("human", huge), ("gpt", "ok")]),
                               _conv("b", [("human", "short question"), ("gpt", huge)]),
                               _conv("c", [("human", "and this one"), ("gpt", "fine")])]))
    c = import_sharegpt(tmp_path / "c", source=src, tokenizer=TOK, max_input=512, max_output=512)
    assert [x.provenance.path for x in c.manifest.cases] == ["huge.json#a", "huge.json#c"]
    assert counting.longest < MAX_CHARS_PER_TOKEN * 512 and counting.chars < 1000


def test_ids_are_those_of_the_whole_prompt(tmp_path: Path) -> None:
    tok = load_tokenizer(TOK)
    whole = [tok.encode(p, add_special_tokens=False).ids for _, _, p, _ in
             sharegpt_turns(json.loads(SHAREGPT.read_text()))]
    c = import_sharegpt(tmp_path / "c", source=SHAREGPT, tokenizer=TOK)
    assert [ids_sha256(list(w)) for w in whole] == [x.sha256 for x in c.manifest.cases]


@pytest.mark.timeout(120)
def test_a_fifo_is_refused_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "chats.json"
    os.mkfifo(fifo)
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "corpus", "import-sharegpt", str(fifo),
                           "--out", str(tmp_path / "c"), "--tokenizer", str(TOK)],
                          capture_output=True, text=True, timeout=90, cwd=ROOT, check=False)
    assert proc.returncode == CorpusError.exit_code and "Traceback" not in proc.stderr, proc.stderr
    assert "not a regular file (a FIFO)" in " ".join(proc.stderr.split())
    assert not (tmp_path / "c").exists()
    with pytest.raises(CorpusError, match="a device"):
        import_sharegpt(tmp_path / "d", source=Path("/dev/zero"), tokenizer=TOK)


@pytest.mark.parametrize(("raw", "needle"), [
    (b'[{"id": "a", "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]},'
     b' {"id": "b", "conversations": [{"from": "human", "value": "x\\ud800y"}, {"from": "gpt", "value": "z"}]}]',
     "conversation 1 (id 'b'), turn 1: not valid UTF-8"),
    (b'[{"id": "a", "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "b\xffad"}]}]',
     "conversation 0 (id 'a'), turn 2: not valid UTF-8"),
    (b'[{"id": "\\udc80", "conversations": []}]', "conversation 0: its id"),
    (b'[{"id": "a", "conversations": [{"from": "human", "value": {"x": 1}}, {"from": "gpt", "value": "z"}]}]',
     "conversation 0 (id 'a'), turn 1: a dict, not text"),
    (b'[{"id": "a", "conversations": [' * 1, "cannot read a ShareGPT JSON file"),
    (b"[" * 100_000, "cannot read a ShareGPT JSON file"),
])
def test_invalid_text_is_refused_naming_the_conversation(raw: bytes, needle: str, tmp_path: Path) -> None:
    src = tmp_path / "bad.json"
    src.write_bytes(raw)
    with pytest.raises(CorpusError) as info:
        import_sharegpt(tmp_path / "c", source=src, tokenizer=TOK)
    assert str(src) in info.value.message and needle in info.value.message, info.value.message
    assert "\n" not in info.value.message and not (tmp_path / "c").exists()


def test_a_file_over_the_size_limit_is_refused_naming_the_flag(tmp_path: Path) -> None:
    src = tmp_path / "big.json"
    src.write_text(json.dumps([_conv("a", [("human", "x" * 5000), ("gpt", "y")])]))
    with pytest.raises(CorpusError) as info:
        import_sharegpt(tmp_path / "c", source=src, tokenizer=TOK, max_bytes=4096)
    assert "over the ShareGPT import limit of 4096 bytes" in info.value.message
    assert info.value.hint is not None and "--max-bytes" in info.value.hint
    assert not (tmp_path / "c").exists()
    assert len(import_sharegpt(tmp_path / "c", source=src, tokenizer=TOK, max_bytes=1 << 20)) == 1
