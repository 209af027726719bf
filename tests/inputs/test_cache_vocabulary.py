"""One cache-defeat vocabulary (issue 25: "cache defeat has four spellings"): ``cache: fresh-salt |
flush | none`` in every section, the first spellings still read, plans unchanged by the spelling."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import SpecError
from harness.inputs.corpus import load_corpus
from harness.inputs.spec import AbbaWorkload, CampaignSpec, load_spec
from harness.run.campaign import make_plan

ROOT = Path(__file__).resolve().parents[2]
SPEC = """
name: vocab
claim_class: native-ar
service: {{backend: sim}}
corpora: {{decode: {corpus}, prefill: {corpus}}}
decode: {{tiers: [1, 4], {decode}}}
prefill: {{tiers: [1], {prefill}}}
"""


def _spec(tmp_path: Path, decode: str, prefill: str) -> CampaignSpec:
    path = tmp_path / f"{abs(hash((decode, prefill)))}.yaml"
    path.write_text(SPEC.format(corpus=ROOT / "corpora/sim-code-512", decode=decode, prefill=prefill))
    spec = load_spec(path).spec
    assert isinstance(spec, CampaignSpec)
    return spec


@pytest.mark.parametrize(("old", "new", "word"), [
    ("cache_salt: fresh", "cache: fresh-salt", "fresh-salt"), ("cache_salt: none", "cache: none", "none")])
def test_decode_spellings_agree(tmp_path: Path, old: str, new: str, word: str) -> None:
    a, b = _spec(tmp_path, old, "cache: flush"), _spec(tmp_path, new, "cache: flush")
    assert a.decode is not None and a.decode.cache == word and a == b


@pytest.mark.parametrize(("old", "new", "word"), [
    ("cache_defeat: salt", "cache: fresh-salt", "fresh-salt"), ("cache_defeat: flush", "cache: flush", "flush")])
def test_prefill_spellings_agree_and_keep_the_plan(tmp_path: Path, old: str, new: str, word: str) -> None:
    a, b = _spec(tmp_path, "cache: none", old), _spec(tmp_path, "cache: none", new)
    assert a.prefill is not None and a.prefill.cache == word
    corpus = load_corpus(ROOT / "corpora/sim-code-512")
    pa, pb = (make_plan(s, {"decode": corpus, "prefill": corpus}) for s in (a, b))
    assert pa.plan_id == pb.plan_id and [c.cell_id for c in pa.cells] == [c.cell_id for c in pb.cells]
    assert {c.cache for c in pa.cells} == {"none", word}


def test_the_default_plan_keeps_its_first_spelling_hash(tmp_path: Path) -> None:
    """A cell's definition hashes the first spelling (harness.inputs.plan.PLAN_CACHE_WORDS)."""
    spec = _spec(tmp_path, "cache: fresh-salt", "cache: fresh-salt")
    corpus = load_corpus(ROOT / "corpora/sim-code-512")
    plan = make_plan(spec, {"decode": corpus, "prefill": corpus})
    assert [c.definition["cache"] for c in plan.cells] == ["fresh", "fresh", "salt"]
    assert [c.cache for c in plan.cells] == ["fresh-salt", "fresh-salt", "fresh-salt"]


def test_both_spellings_at_once_are_refused(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"decode.*give one of cache, cache_salt"):
        _spec(tmp_path, "cache: none, cache_salt: none", "cache: flush")


def test_a_bad_value_is_named_under_cache(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"prefill\.cache"):
        _spec(tmp_path, "cache: none", "cache_defeat: sometimes")


def test_abba_workload_reads_both() -> None:
    base = {"corpus": "c", "concurrency": 2}
    assert AbbaWorkload.model_validate(base | {"cache_salt": "none"}).cache == "none"
    assert AbbaWorkload.model_validate(base).cache == "fresh-salt"
