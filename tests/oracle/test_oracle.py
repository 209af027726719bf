"""Oracle files and the pure comparisons: known answers, validation errors, write refusal, CLI help."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from harness.errors import OracleError, SpecError
from harness.hashing import ids_hash16
from harness.oracle.model import (
    DEFAULT_MARGIN,
    Divergence,
    Oracle,
    compare_ids,
    count_text_failures,
    dump_oracle,
    evaluate,
    load_oracle,
    parse_oracle,
    repeat_verdict,
    text_integrity,
    write_oracle,
)
from harness.sim.tokens import decode_tokens

REPO = Path(__file__).resolve().parents[2]
FRANCE_IN = [0, 128803, 3085, 344, 270, 6102, 294, 8760, 2755, 128804, 128822]
FRANCE_OUT = [671, 6102, 294, 8760, 344, 2619, 51119, 42499, 1]
runner = CliRunner()


def _doc(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "format_version": 1,
        "name": "demo",
        "input_ids": [1, 2, 3],
        "expected_output_ids": [7, 8, 9],
        "output_hash16": ids_hash16([7, 8, 9]),
        "certifies": ["a sentence"],
        "does_not_certify": ["another sentence"],
    }
    doc.update(changes)
    return {k: v for k, v in doc.items() if v is not None}


def _write(tmp_path: Path, doc: dict[str, Any], name: str = "demo.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return p


# ---------------------------------------------------------------------------------------------- hashes


def test_france_hash_reproduced_from_its_ids() -> None:
    assert ids_hash16(FRANCE_OUT) == "6f41fe2f01d52507"


def test_shipped_france_oracle() -> None:
    o = load_oracle(REPO / "oracles" / "france.yaml")
    assert o.input_ids == FRANCE_IN
    assert o.expected_output_ids == FRANCE_OUT
    assert o.output_hash16 == "6f41fe2f01d52507"
    assert o.expected_text == "The capital of France is **Paris**."
    assert o.ignore_eos is False and o.request_max_new_tokens >= len(FRANCE_OUT)
    assert o.certifies and any("batch shape" in s for s in o.does_not_certify)
    assert any("long context" in s.lower() for s in o.does_not_certify)
    assert text_integrity(o.expected_output_ids, o.expected_text, decode_tokens)


def test_shipped_sim_code_oracle() -> None:
    o = load_oracle(REPO / "oracles" / "sim-code-c000.yaml")
    assert len(o.input_ids) == 512 and o.provenance["case_id"] == "c000"
    assert o.service["label"] == "simulated" and o.service["sim_profile"] == "fast"
    assert o.expected_text is not None and text_integrity(o.expected_output_ids, o.expected_text, decode_tokens)


# ---------------------------------------------------------------------------------------------- compare_ids


@pytest.mark.parametrize(
    ("expected", "got", "first"),
    [
        ([1, 2, 3], [1, 2, 3], None),
        ([1, 2, 3], [1, 5, 3], 1),
        ([1, 2, 3], [9, 2, 3], 0),
        ([1, 2, 3], [1, 2], 2),  # got is a strict prefix: diverges where it ends
        ([1, 2], [1, 2, 3], 2),  # got runs on past the expected end
        ([1, 2, 3], [], 0),
    ],
)
def test_compare_ids(expected: list[int], got: list[int], first: int | None) -> None:
    cmp = compare_ids(expected, got)
    assert cmp.first_divergence == first
    assert cmp.passed is (first is None)
    assert (cmp.expected_len, cmp.got_len) == (len(expected), len(got))


def test_compare_ids_accepts_numpy() -> None:
    assert compare_ids(np.array(FRANCE_OUT, dtype=np.int32), tuple(FRANCE_OUT)).passed


# ---------------------------------------------------------------------------------------------- repeat gate


def test_repeat_verdict_70_of_70() -> None:
    res = repeat_verdict([FRANCE_OUT] * 70, FRANCE_OUT)
    assert res.passed and res.n == 70 and res.unique == 1 and res.differing == ()
    assert res.reference_hash16 == "6f41fe2f01d52507"
    assert res.summary().startswith("PASS 70/70")


def test_repeat_verdict_captures_28_and_58_differ() -> None:
    good = list(range(100, 160))
    bad28 = [*good[:17], 5, *good[18:]]  # corrupted from position 17
    bad58 = good[:40]  # cut short at position 40
    outs = [good] * 70
    outs[27], outs[57] = bad28, bad58  # 1-based captures 28 and 58
    res = repeat_verdict(outs)
    assert not res.passed
    assert res.unique == 3
    assert res.differing == (Divergence(28, 17), Divergence(58, 40))
    assert res.differing[0].capture == 28 and res.differing[0].position == 17
    assert res.reference_hash16 == ids_hash16(good)
    assert res.capture_hashes[27] == ids_hash16(bad28) and res.capture_hashes[0] == ids_hash16(good)
    assert res.counts[ids_hash16(good)] == 68
    assert "68/70" in res.summary() and "#28@17" in res.summary() and "#58@40" in res.summary()


def test_repeat_verdict_one_unique_but_not_expected() -> None:
    res = repeat_verdict([[1, 2, 3]] * 4, [1, 2, 4])
    assert not res.passed and res.unique == 1
    assert [d.capture for d in res.differing] == [1, 2, 3, 4]
    assert all(d.position == 2 for d in res.differing)


def test_repeat_verdict_errors_fail_the_gate() -> None:
    res = repeat_verdict([[1, 2]] * 3, errors={2: "http 500"})
    assert not res.passed and res.unique == 1 and res.errors == ((2, "http 500"),)


def test_repeat_verdict_majority_ties_go_to_earliest() -> None:
    res = repeat_verdict([[1], [2], [2], [1]])
    assert res.reference_hash16 == ids_hash16([1])
    assert res.differing == (Divergence(2, 0), Divergence(3, 0))


def test_repeat_verdict_needs_a_capture() -> None:
    with pytest.raises(ValueError, match="at least one"):
        repeat_verdict([])


# ---------------------------------------------------------------------------------------------- text integrity


def test_text_integrity() -> None:
    assert text_integrity(FRANCE_OUT, "The capital of France is **Paris**.", decode_tokens)
    assert not text_integrity(FRANCE_OUT, "The capital of France is Paris.", decode_tokens)
    pairs = [(FRANCE_OUT, "The capital of France is **Paris**."), (FRANCE_OUT[:3], "nope"), ([1], "")]
    assert count_text_failures(pairs, decode_tokens) == 1


# ---------------------------------------------------------------------------------------------- results


def test_evaluate_and_summary() -> None:
    o = parse_oracle(_doc(expected_text=decode_tokens([7, 8, 9])))
    ok = evaluate(o, [7, 8, 9], finish_reason="stop", service_url="http://x", decode=decode_tokens)
    assert ok.passed and ok.first_divergence is None and ok.text_matches is True
    assert ok.summary() == f"PASS demo: hash {ids_hash16([7, 8, 9])} (3 tokens, finish stop) at http://x"
    bad = evaluate(o, [7, 0, 9], finish_reason="stop")
    assert not bad.passed and bad.first_divergence == 1
    assert "first divergence at position 1" in bad.summary() and bad.expected_hash16 in bad.summary()
    err = evaluate(o, [7, 8, 9], error="http 500: boom")
    assert not err.passed and "request failed" in err.summary() and "http 500" in err.summary()


# ---------------------------------------------------------------------------------------------- files


def test_default_max_new_tokens_is_expected_plus_margin() -> None:
    o = parse_oracle(_doc())
    assert o.max_new_tokens == 3 + DEFAULT_MARGIN == o.request_max_new_tokens


def test_hash_mismatch_is_a_spec_error_naming_the_file(tmp_path: Path) -> None:
    p = _write(tmp_path, _doc(output_hash16="0123456789abcdef"))
    with pytest.raises(SpecError) as ei:
        load_oracle(p)
    msg = str(ei.value)
    assert str(p) in msg and "output_hash16" in msg and ids_hash16([7, 8, 9]) in msg


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"extra_field": 1}, "extra_field: unknown key"),
        ({"format_version": 2}, "unsupported format_version 2"),
        ({"certifies": []}, "certifies"),
        ({"does_not_certify": None}, "does_not_certify"),
        ({"input_ids": []}, "input_ids"),
        ({"input_ids": [1, -2]}, "input_ids"),
        ({"max_new_tokens": 2}, "below the expected length"),
        ({"name": "bad name"}, "name"),
        ({"output_hash16": "XYZ"}, "output_hash16"),
        ({"tokenizer": {"name": "t", "files": {"tokenizer.json": "abc"}}}, "tokenizer.files"),
    ],
)
def test_validation_errors(tmp_path: Path, changes: dict[str, Any], needle: str) -> None:
    p = _write(tmp_path, _doc(**changes))
    with pytest.raises(SpecError) as ei:
        load_oracle(p)
    assert str(p) in str(ei.value) and needle in str(ei.value)


def test_missing_file_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="no such oracle file"):
        load_oracle(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(SpecError, match="YAML syntax error"):
        load_oracle(bad)
    lst = tmp_path / "list.yaml"
    lst.write_text("- 1\n")
    with pytest.raises(SpecError, match="must be a mapping"):
        load_oracle(lst)


def test_dump_load_round_trip_and_write_refusal(tmp_path: Path) -> None:
    o = parse_oracle(_doc(service={"model": "m", "tp_size": 8}, provenance={"case_id": "c000"},
                          tokenizer={"name": "t", "files": {"tokenizer.json": "a" * 64}}))
    text = dump_oracle(o)
    assert "input_ids: [1, 2, 3]" in text
    p = write_oracle(o, tmp_path / "sub" / "demo.yaml")
    assert load_oracle(p) == o
    with pytest.raises(OracleError, match="already exists"):
        write_oracle(o, p)
    o2 = Oracle.model_validate({**o.model_dump(), "description": "changed"})
    write_oracle(o2, p, force=True)
    assert load_oracle(p).description == "changed"
    assert sorted(x.name for x in p.parent.iterdir()) == ["demo.yaml"]  # no temporary left behind


# ---------------------------------------------------------------------------------------------- CLI


@pytest.mark.parametrize(("group", "command"), [("oracle", "check"), ("oracle", "capture"), ("oracle", "repeat"),
                                                ("compare", "tensors")])
def test_help_has_an_example(group: str, command: str) -> None:
    import importlib

    from harness.cli import _GROUPS

    assert (f"{group}_cmd", group) in _GROUPS
    app = importlib.import_module(f"harness.cli.{group}_cmd").app
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Example" in result.output


def test_integrity_over_records() -> None:
    from harness.oracle.model import integrity_over_records
    from harness.records import RequestRecord

    def decode(ids: object) -> str:
        return "".join(chr(97 + int(i) % 26) for i in ids)  # type: ignore[attr-defined]

    def rec(rid: str, ids: list[int], text: str | None, mode: str = "cumulative",
            err: str | None = None) -> RequestRecord:
        return RequestRecord(rid=rid, send_ns=0, done_ns=1, output_ids=np.array(ids, dtype=np.int32),
                             final_text=text, output_mode=mode,
                             error=err)

    res = integrity_over_records([rec("a", [0, 1], "ab"), rec("b", [0, 1], "ax"), rec("c", [0], None),
                                  rec("d", [2], "c", "delta"), rec("e", [0], "a", err="http 500")], decode)
    assert (res.checked, res.passed, res.failed, res.skipped) == (2, 1, ("b",), 3)
    assert not res.ok
