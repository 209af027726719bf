"""No spec a fuzzer can write crashes the loader or the planner or keeps them busy: every mutated spec
gives a clean ``DsvError`` or a valid plan, quickly (issue 14, point 10)."""

from __future__ import annotations

import copy
import math
import re
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.errors import DsvError
from harness.inputs.plan import Plan
from harness.inputs.spec import MAX_CONCURRENCY, MAX_ROUNDS, CampaignSpec, load_spec
from harness.run.campaign import load_corpora, make_plan

REPO = Path(__file__).resolve().parents[2]
BASE: dict[str, Any] = {
    "name": "fuzz", "claim_class": "native-ar", "labels": ["demo"],
    "service": {"name": "sim-fuzz", "backend": "sim", "sim": {"profile": "paper-tp8"}, "startup_timeout_s": 60},
    "corpora": {"decode": str(REPO / "corpora" / "sim-code-512"), "prefill": str(REPO / "corpora" / "sim-code-8k")},
    "decode": {"tiers": [1, 2, 4], "rounds": 3, "min_resident_seconds": 1.0, "warmup_waves": 1,
               "max_new_tokens": 160},
    "prefill": {"tiers": [1, 2], "rounds": 3, "warmup_waves": 1, "max_new_tokens": 1, "cache_defeat": "salt"},
    "order": ["prefill", "decode"],
    "request_timeout_s": 30,
    "client": {"deadline_factor": 4, "deadline_grace_s": 60, "max_event_bytes": 4194304},
}

SCALARS = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([0, 1, -1, 3 * 10**7, 2**31, 2**63, 4096, 4097, 10**20]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(["../../../x", "a" * 300, "[bold]x[/]", "<img src=x onerror=alert(1)>", "", "decode",
                     "prefill", "fresh", "salt", "1e20", ".inf"]),
)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=6), st.dictionaries(st.text(max_size=8), inner, max_size=4)), max_leaves=12)


INTS = st.one_of(st.integers(min_value=0, max_value=70), st.sampled_from([4096, 4097, 65536, 3 * 10**7, 2**31, 10**20]),
                 st.integers(min_value=-3, max_value=10**6))
FLOATS = st.one_of(st.floats(min_value=1e-9, max_value=1e9), st.sampled_from([0.0, -1.0, 1e300, 7 * 86400.0 + 1]),
                   st.floats(allow_nan=True, allow_infinity=True))


def _edge_like(value: Any) -> st.SearchStrategy[Any]:
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return INTS
    if isinstance(value, float):
        return FLOATS
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return st.lists(INTS, min_size=0, max_size=70)
    if isinstance(value, str):
        return st.one_of(st.just(value), st.text(max_size=20), st.sampled_from(["../../../x", "a" * 300]))
    return VALUES


def _paths(d: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(d, dict):
        for k, v in d.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(d, list):
        for i, v in enumerate(d):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated_specs(draw: st.DrawFn) -> str:
    spec = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = _paths(spec)
        path = draw(st.sampled_from(paths))
        parent: Any = spec
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["edge", "edge", "edge", "edge", "replace", "delete", "add", "nest"]))
        if action == "edge":  # a value of the same type at or past its limits: keeps most specs valid
            parent[path[-1]] = draw(_edge_like(parent[path[-1]]))
        elif action == "delete" and isinstance(parent, dict):
            parent.pop(path[-1], None)
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.text(max_size=12))] = draw(VALUES)
        elif action == "nest":  # a deeply nested value, written as flow YAML below
            parent[path[-1]] = f"DEEP{draw(st.integers(min_value=1, max_value=6000))}END"
        else:
            parent[path[-1]] = draw(VALUES)
    text = yaml.safe_dump(spec, sort_keys=False, allow_unicode=True, width=10**9)
    text = re.sub(r"DEEP(\d+)END", lambda m: "[" * int(m.group(1)) + "1" + "]" * int(m.group(1)), text)
    if draw(st.integers(min_value=0, max_value=3)) == 0:  # and raw edits of the text itself
        for _ in range(draw(st.integers(min_value=1, max_value=3))):
            i = draw(st.integers(min_value=0, max_value=len(text)))
            text = text[:i] + draw(st.sampled_from(["\n", ":", " ", "[", "{", "- ", "&a ", "*a", "!!python/object "
                                                    "x", "\t", "'"])) + text[i:]
    return text


def _valid_plan(plan: Plan) -> None:
    assert plan.cells
    for cell in plan.cells:
        assert 1 <= cell.concurrency <= MAX_CONCURRENCY
        assert 1 <= cell.rounds <= MAX_ROUNDS
        assert cell.max_new_tokens >= 1
        assert cell.min_resident_seconds is None or math.isfinite(cell.min_resident_seconds)
    assert plan.estimate_s is None or math.isfinite(plan.estimate_s)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
          derandomize=True)
@given(mutated_specs())
def test_mutated_specs_give_clean_errors_or_valid_plans(tmp_path_factory: Any, text: str) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        loaded = load_spec(path)
        if isinstance(loaded.spec, CampaignSpec):  # an ABBA screen or a sweep has no matrix plan
            _valid_plan(make_plan(loaded.spec, load_corpora(loaded)))
    except DsvError as exc:  # a clean error: what it says and how the command line exits
        err: DsvError | None = exc
    else:
        err = None
    assert err is None or (err.message and err.exit_code in (2, 3, 8))


@st.composite
def numeric_specs(draw: st.DrawFn) -> str:
    """Only numbers change (to values within or just past their limits): mostly valid specs that size
    work as much as the limits allow."""
    spec = copy.deepcopy(BASE)
    for path in _paths(spec):
        parent: Any = spec
        for key in path[:-1]:
            parent = parent[key]
        value = parent[path[-1]]
        if isinstance(value, int | float) and not isinstance(value, bool) and draw(st.booleans()):
            parent[path[-1]] = draw(st.one_of(
                st.sampled_from([1, 2, 64, 100, 1000, 4096, 4097, 1 << 20, (1 << 20) + 1, 7 * 86400]),
                st.integers(min_value=1, max_value=4096)) if isinstance(value, int) else st.one_of(
                st.sampled_from([1e-6, 0.5, 3600.0, 7 * 86400.0, 7 * 86400.0 + 1]),
                st.floats(min_value=1e-6, max_value=7 * 86400.0)))
    return yaml.safe_dump(spec, sort_keys=False)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(numeric_specs())
def test_specs_at_their_limits_plan_quickly(tmp_path_factory: Any, text: str) -> None:
    path = tmp_path_factory.mktemp("edge") / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        loaded = load_spec(path)
        assert isinstance(loaded.spec, CampaignSpec)
        _valid_plan(make_plan(loaded.spec, load_corpora(loaded)))
    except DsvError as exc:  # only a limit can refuse these specs
        err: DsvError | None = exc
    else:
        err = None
    assert err is None or (err.exit_code == 2 and ("than or equal" in err.message or "tier" in err.message))
