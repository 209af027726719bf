"""Oracle checks, captures and repeats against the REAL simulator (HTTP on 127.0.0.1, profile fast)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.errors import OracleError, ServerUnreachable
from harness.hashing import ids_hash16
from harness.inputs.corpus import load_corpus, resolve_corpus_path
from harness.oracle.live import (
    capture_oracle,
    check_oracle,
    describe_service,
    repeat_oracle,
    simulator_decode,
)
from harness.oracle.model import Oracle, load_oracle, write_oracle
from harness.sim import running_simulator
from harness.sim.tokens import decode_tokens

REPO = Path(__file__).resolve().parents[2]
FRANCE = REPO / "oracles" / "france.yaml"
runner = CliRunner()


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with running_simulator(profile="fast") as url:
        yield url


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wrong(o: Oracle, position: int) -> Oracle:
    out = list(o.expected_output_ids)
    out[position] = 12345
    return Oracle.model_validate({**o.model_dump(), "name": "wrong", "expected_output_ids": out,
                                  "output_hash16": ids_hash16(out)})


def test_france_passes(sim_url: str) -> None:
    res = check_oracle(sim_url, load_oracle(FRANCE), decode=decode_tokens)
    assert res.passed, res.summary()
    assert res.got_hash16 == res.expected_hash16 == "6f41fe2f01d52507"
    assert res.first_divergence is None and res.error is None
    assert res.finish_reason == "stop" and res.cached_tokens == 0 and res.cache_salt
    assert res.text == "The capital of France is **Paris**." and res.text_matches is True
    assert res.service_url == sim_url and res.summary().startswith("PASS france: hash 6f41fe2f01d52507")


def test_wrong_expected_output_fails_at_the_right_position(sim_url: str) -> None:
    res = check_oracle(sim_url, _wrong(load_oracle(FRANCE), 5))
    assert not res.passed and res.error is None
    assert res.first_divergence == 5
    assert res.got_hash16 == "6f41fe2f01d52507" != res.expected_hash16
    assert "first divergence at position 5" in res.summary()


def test_shipped_sim_code_oracle_passes_on_fast(sim_url: str) -> None:
    res = check_oracle(sim_url, load_oracle(REPO / "oracles" / "sim-code-c000.yaml"))
    assert res.passed, res.summary()


def test_capture_then_check_round_trips(sim_url: str, tmp_path: Path) -> None:
    case = load_corpus(resolve_corpus_path("sim-code-512")).case("c001")
    o = capture_oracle(sim_url, case.ids_list(), name="c001", max_new_tokens=64, decode=decode_tokens,
                       tokenizer_identity={"name": "dsv4h-sim-bpe-8k"}, provenance={"case_id": "c001"})
    assert o.service["label"] == "simulated" and o.service["model_path"].startswith("sim://")
    assert o.provenance["finish_reason"] in ("stop", "length") and o.provenance["cached_tokens"] == 0
    assert o.expected_text == decode_tokens(o.expected_output_ids)
    assert o.output_hash16 == ids_hash16(o.expected_output_ids) and len(o.certifies) == 1
    p = write_oracle(o, tmp_path / "c001.yaml")
    again = load_oracle(p)
    assert again == o
    res = check_oracle(sim_url, again)
    assert res.passed, res.summary()


def test_repeat_10_passes_with_one_unique_output(sim_url: str) -> None:
    seen: list[int] = []
    res = repeat_oracle(sim_url, load_oracle(FRANCE), 10, progress=lambda k, n, rec: seen.append(k))
    assert res.passed and res.n == 10 and res.unique == 1 and res.differing == () and res.errors == ()
    assert seen == list(range(1, 11))
    assert set(res.capture_hashes) == {"6f41fe2f01d52507"}


def test_repeat_plain_ids_uses_the_majority(sim_url: str) -> None:
    res = repeat_oracle(sim_url, [0, 5, 6, 7], 3, max_new_tokens=8)
    assert res.passed and not res.expected_given and res.unique == 1
    with pytest.raises(ValueError, match="max_new_tokens"):
        repeat_oracle(sim_url, [0, 5, 6, 7], 3)


def test_repeat_against_wrong_oracle_lists_every_capture(sim_url: str) -> None:
    res = repeat_oracle(sim_url, _wrong(load_oracle(FRANCE), 2), 3)
    assert not res.passed and res.unique == 1
    assert [(d.capture, d.position) for d in res.differing] == [(1, 2), (2, 2), (3, 2)]


def test_http_errors_are_failed_results_not_exceptions() -> None:
    with running_simulator(profile="fast", fault="http_500") as url:
        res = check_oracle(url, load_oracle(FRANCE))
    assert not res.passed and res.error is not None and "500" in res.error
    assert res.summary().startswith("FAIL france: request failed")


def test_failed_captures_are_listed_by_number() -> None:
    with running_simulator(profile="fast", fault="error_event:2", fault_every=3) as url:
        res = repeat_oracle(url, load_oracle(FRANCE), 6)
    assert not res.passed
    assert [k for k, _ in res.errors] == [3, 6]


def test_unreachable_server_raises() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(ServerUnreachable):
        check_oracle(url, load_oracle(FRANCE))
    with pytest.raises(ServerUnreachable):
        repeat_oracle(url, load_oracle(FRANCE), 2)


def test_capture_refuses_a_failed_response() -> None:
    with running_simulator(profile="fast", fault="http_500") as url, pytest.raises(OracleError, match="500"):
        capture_oracle(url, [0, 1, 2], name="x", max_new_tokens=4)


def test_describe_service_and_decoder(sim_url: str) -> None:
    ident = describe_service(sim_url)
    assert ident["label"] == "simulated" and ident["sim_profile"] == "fast"
    assert simulator_decode(ident) is decode_tokens
    assert simulator_decode({"model_path": "deepseek"}) is None


# ---------------------------------------------------------------------------------------------- CLI


def test_cli_check_capture_repeat(sim_url: str, tmp_path: Path) -> None:
    from harness.cli.oracle_cmd import app

    ok = runner.invoke(app, ["check", "--service", sim_url, "--oracle", str(FRANCE)])
    assert ok.exit_code == 0, ok.output
    assert "PASS france: hash 6f41fe2f01d52507" in ok.output and "[simulated]" in ok.output
    assert "The capital of France is **Paris**." in ok.output

    out = tmp_path / "mine.yaml"
    cap = runner.invoke(app, ["capture", "--service", sim_url, "--input-ids", "[0, 11, 12, 13]",
                              "--max-new-tokens", "8", "--out", str(out)])
    assert cap.exit_code == 0, cap.output
    mine = load_oracle(out)
    assert mine.name == "mine" and mine.request_max_new_tokens == 8

    again = runner.invoke(app, ["capture", "--service", sim_url, "--input-ids", "[0, 11]", "--out", str(out)])
    assert isinstance(again.exception, OracleError)

    corpus = runner.invoke(app, ["capture", "--service", sim_url, "--corpus", "sim-code-512", "--case", "c002",
                                 "--max-new-tokens", "16", "--out", str(tmp_path / "c002.yaml")])
    assert corpus.exit_code == 0, corpus.output
    c002 = load_oracle(tmp_path / "c002.yaml")
    assert c002.tokenizer is not None and c002.tokenizer.name == "dsv4h-sim-bpe-8k"
    assert c002.provenance["corpus"] == "sim-code-512" and c002.provenance["case_id"] == "c002"

    rep = runner.invoke(app, ["repeat", "--service", sim_url, "--oracle", str(out), "--n", "4"])
    assert rep.exit_code == 0, rep.output
    assert "PASS 4/4" in rep.output

    bad_path = tmp_path / "wrong.yaml"
    write_oracle(_wrong(load_oracle(FRANCE), 3), bad_path)
    bad = runner.invoke(app, ["check", "--service", sim_url, "--oracle", str(bad_path)])
    assert isinstance(bad.exception, OracleError) and bad.exception.exit_code == 8
    assert "first divergence at position 3" in bad.output and "position 3: expected 12345, got 8760" in bad.output
    rep_bad = runner.invoke(app, ["repeat", "--service", sim_url, "--oracle", str(bad_path), "--n", "2"])
    assert isinstance(rep_bad.exception, OracleError)
    assert "capture 1: hash 6f41fe2f01d52507, first divergence at position 3" in rep_bad.output


def test_cli_check_starts_and_stops_a_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.cli.oracle_cmd import app

    profile = tmp_path / "sim-fast.yaml"
    profile.write_text("name: sim-fast\nbackend: sim\nsim:\n  profile: fast\nstartup_timeout_s: 60\n")
    monkeypatch.chdir(tmp_path)  # the service's logs go under the working directory
    res = runner.invoke(app, ["check", "--service", str(profile), "--oracle", str(FRANCE),
                              "--oracle", str(REPO / "oracles" / "sim-code-c000.yaml")])
    assert res.exit_code == 0, res.output
    assert "starting service sim-fast" in res.output
    assert "PASS france" in res.output and "PASS sim-code-c000" in res.output
    url = next(line.split()[-1] for line in res.output.splitlines() if line.startswith("service ready at"))
    with pytest.raises(ServerUnreachable):  # stopped after the check
        check_oracle(url, load_oracle(FRANCE))
    assert any((tmp_path / "logs").iterdir())
