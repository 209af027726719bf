"""SLA-search specs (harness.inputs.spec.sla): the shipped demo loads; malformed specs name the file and
the field; the probe view is the rate sweep the probes are measured as."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import SpecError
from harness.inputs.spec import SlaSpec, SweepSpec, load_spec, probe_sweep

ROOT = Path(__file__).resolve().parents[2]

BASE = f"""name: sla-x
kind: sla-search
claim_class: native-ar
service: {{backend: sim, sim: {{profile: single-slot}}}}
corpus: {ROOT / 'corpora/sim-code-512'}
arrivals: {{process: constant, count: 8}}
"""


def _load(tmp_path: Path, body: str) -> SlaSpec:
    path = tmp_path / "sla.yaml"
    path.write_text(BASE + body)
    spec = load_spec(path).spec
    assert isinstance(spec, SlaSpec)
    return spec


def test_demo_loads_and_its_probes_are_a_sweep() -> None:
    loaded = load_spec(ROOT / "campaigns" / "sla-demo.yaml")
    spec = loaded.spec
    assert isinstance(spec, SlaSpec) and loaded.kind == "sla-search" and spec.protocol_class == "sla-search"
    assert loaded.paths.corpora == {"sweep": (ROOT / "corpora" / "sim-code-512").resolve()}
    assert spec.limits_s() == {"ttft": 0.06, "tpot": None, "e2e": None}
    view = probe_sweep(spec, [3.0, 6.0])
    assert isinstance(view, SweepSpec) and view.rate_list == [3.0, 6.0] and view.slo.ttft_ms == 60
    assert view.arrivals == spec.arrivals and view.rounds == spec.rounds and view.service == spec.service


@pytest.mark.parametrize(("body", "field", "says"), [
    ("search: {start_req_s: 1, precision_req_s: 1}\n", "limits", "required field is missing"),
    ("limits: {}\nsearch: {start_req_s: 1, precision_req_s: 1}\n", "", "declare at least one of ttft_ms"),
    ("limits: {ttft_ms: 100}\nsearch: {start_req_s: 1}\n", "search", "exactly one of 'precision_req_s'"),
    ("limits: {ttft_ms: 100}\nsearch: {start_req_s: 1, precision_req_s: 1, precision_rel: 0.1}\n", "search",
     "exactly one of"),
    ("limits: {ttft_ms: 100}\nsearch: {start_req_s: 0, precision_req_s: 1}\n", "search.start_req_s",
     "greater than 0"),
    ("limits: {ttft_ms: 100}\nsearch: {start_req_s: 4, precision_req_s: 1, max_rate_req_s: 2}\n", "search",
     "max_rate_req_s must be >= start_req_s"),
    ("limits: {ttft_ms: 100}\nsearch: {start_req_s: 1, precision_req_s: 1, max_probes: 65}\n",
     "search.max_probes", "less than or equal to 64"),
    ("limits: {ttft_ms: -5}\nsearch: {start_req_s: 1, precision_req_s: 1}\n", "limits.ttft_ms", "greater than 0"),
    ("limits: {ttft_ms: 100}\nsearch: {start_req_s: 1, precison_req_s: 1}\n", "search.precison_req_s",
     "precision_req_s"),
    ("limits: {ttft_ms: 100}\nsearch: {start_req_s: 1, precision_req_s: 1}\nrates: [1, 2]\n", "rates",
     "unknown key 'rates'"),
])
def test_malformed_specs_name_the_file_and_field(tmp_path: Path, body: str, field: str, says: str) -> None:
    with pytest.raises(SpecError) as err:
        _load(tmp_path, body)
    text = err.value.message + " " + (err.value.hint or "")
    assert str(tmp_path / "sla.yaml") in text
    assert field in text and says in text, text
