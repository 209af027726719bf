"""``dsv4h sla run`` and ``dsv4h campaign run`` of an sla-search spec (harness.cli.sla_cmd): the help
with its example, a malformed spec refused with exit status and the field, and one short search run
through ``campaign run`` (the kind registry) printing its probe table and bracket."""

from __future__ import annotations

import json
from pathlib import Path

from ledger_helpers import ledger_table
from testkit import only_archive, ran, run_cli

from harness.cli.sla_cmd import bracket_line

REPO = Path(__file__).resolve().parents[2]


def test_help_has_an_example() -> None:
    code, out, _ = run_cli("sla", "run", "--help")
    assert code == 0 and "Example: dsv4h sla run campaigns/sla-demo.yaml" in out


def test_malformed_spec_is_refused_naming_the_field(tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text((REPO / "campaigns/sla-demo.yaml").read_text().replace("precision_req_s: 1", "precision: 1")
                    .replace("service: profiles/", f"service: {REPO}/campaigns/profiles/")
                    .replace("corpus: ../corpora", f"corpus: {REPO}/corpora"))
    code, _, err = run_cli("sla", "run", str(spec), "-w", str(tmp_path / "ws"))
    assert code != 0 and str(spec) in err and "search.precision" in err
    assert not (tmp_path / "ws" / "archives").exists()


def test_campaign_run_dispatches_an_sla_search(tmp_path: Path) -> None:
    spec = tmp_path / "sla.yaml"
    spec.write_text((REPO / "campaigns/sla-demo.yaml").read_text().replace("max_probes: 10", "max_probes: 1")
                    .replace("count: 20", "count: 4")
                    .replace("service: profiles/", f"service: {REPO}/campaigns/profiles/")
                    .replace("corpus: ../corpora", f"corpus: {REPO}/corpora"))
    ws = tmp_path / "ws"
    code, out, err = run_cli("campaign", "run", str(spec), "-w", str(ws))
    assert ran(code, out, err), out + err
    assert "kind sla-search" in out and "SLA search probes" in out and "probe 0: 3 req/s" in out
    assert "bracket: highest passing" in out and "probe-cap" in out
    archive = only_archive(ws)
    assert json.loads((archive / "sla.json").read_text())["n_probes"] == 1
    assert [r["kind"] for r in ledger_table(ws, "runs").to_pylist()] == ["sla-search"]


def test_bracket_line_never_one_number() -> None:
    line = bracket_line({"bracket": {"highest_passing_req_s": 9.75, "lowest_failing_req_s": 10.5, "monotone": True},
                         "end": "converged", "width": 0.75, "width_unit": "req_s", "n_probes": 6,
                         "settings": {"precision": 1.0}})
    assert line == ("bracket: highest passing 9.75 req/s, lowest failing 10.50 req/s; converged, width 0.750 req/s "
                    "(precision 1.000 req/s, 6 probes)")
