"""``service.json`` of any shape (another host's archive: its hashes verify, its values can be any JSON)
reaches every reader of a service's stack without an exception: ``harness.service.identity.record_shape``
gives the readers the shapes dsv4h writes (docs/trust.md)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.governance.gates import GateSelectors, _library_workers
from harness.inputs.spec import ServiceProfile
from harness.report.snapshot.sections import stack_entry
from harness.service.identity.identity import identity_hash, service_fingerprint
from harness.service.identity.mapped_rules import library_workers, worker_pids
from harness.service.identity.record_shape import clean_service_doc, clean_stack
from harness.service.identity.runtime_identity import identity_entries, runtime_identity
from harness.service.identity.stack import violations

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                    max_leaves=12)


def _either(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """The shape dsv4h writes, or any JSON value in its place."""
    return st.one_of(good, JSON)


LIB = st.fixed_dictionaries({"path": _either(st.sampled_from(["/x/libcuda.so.1", "/y/libccl.so.2"])),
                             "sha256": _either(st.just("a" * 64))})
ENTRY = st.fixed_dictionaries({"libraries": _either(st.lists(_either(LIB), max_size=3)),
                               "role": _either(st.just("sglang::scheduler_TP0")), "error": _either(st.none())})
SNAP = st.fixed_dictionaries({"pids": _either(st.dictionaries(st.sampled_from(["1", "2", "3"]), _either(ENTRY),
                                                              max_size=3)),
                              "files": _either(st.dictionaries(st.text(max_size=6), _either(st.just("b" * 64)),
                                                               max_size=2)),
                              "root": _either(st.sampled_from(["1", 1]))})
TREE = st.fixed_dictionaries({"name": _either(st.just("sglang")),
                              "git": _either(st.fixed_dictionaries({"commit": _either(st.just("c" * 40)),
                                                                    "dirty_paths": _either(st.lists(JSON, max_size=2)),
                                                                    "untracked_count": JSON}))})
STACK = st.fixed_dictionaries({
    "model": _either(st.fixed_dictionaries({"files": JSON, "shard_headers": JSON, "weights": JSON,
                                            "statement": JSON})),
    "source_trees": _either(st.lists(_either(TREE), max_size=2)),
    "mapped": _either(st.fixed_dictionaries({"at_start": _either(SNAP), "at_end": _either(SNAP)})),
    "runtime_identity": _either(st.fixed_dictionaries({"hash": JSON, "components": JSON})),
})
SERVICE = st.fixed_dictionaries({"name": JSON, "server_info": JSON, "process": JSON, "command": JSON,
                                 "env_diff": JSON, "stack": _either(STACK)})
DOC = _either(st.fixed_dictionaries({"services": _either(st.lists(_either(SERVICE), max_size=3)),
                                     "legs": JSON}))

NEEDS = ServiceProfile(identity={"require_libraries": [{"name": "libccl.so*"}]})


@settings(max_examples=int(__import__("os").environ.get("DSV4H_FUZZ_EXAMPLES", "300")), deadline=None)
@given(DOC)
def test_every_stack_reader_takes_any_document(doc: Any) -> None:
    clean = clean_service_doc(doc)
    services = clean.get("services") or []
    assert all(isinstance(s, dict) for s in services)
    for s in services:
        stack = s.get("stack")
        stack_entry(stack)
        service_fingerprint(s)
        identity_entries(s)
        runtime_identity(s, packages=None)
        mapped = (stack or {}).get("mapped") or {}
        for snap in (mapped.get("at_start"), mapped.get("at_end")):
            if snap is not None:
                worker_pids(snap)
                library_workers(snap, "libccl.so*", "a" * 64)
                violations(NEEDS, snap)
    identity_hash(services)
    _library_workers(GateSelectors(library="libccl.so*"), services)


def test_known_shapes_are_kept_and_wrong_ones_emptied() -> None:
    stack = {"model": [1], "source_trees": [{"name": "s", "git": "dirty"}, 7],
             "mapped": {"at_start": {"pids": {"1": {"libraries": [{"path": "/a/libccl.so.1"}, "x"], "role": 3},
                                              "2": "gone"}, "files": [], "root": "1"}, "at_end": 5},
             "runtime_identity": {"hash": "h", "components": ["a"]}}
    assert clean_stack(stack) == {
        "model": None, "source_trees": [{"name": "s", "git": {}}],
        "mapped": {"at_start": {"pids": {"1": {"libraries": [{"path": "/a/libccl.so.1"}], "role": None}},
                                "files": {}, "root": "1"}, "at_end": None},
        "runtime_identity": {"hash": "h", "components": {}}}
    assert clean_service_doc([1]) == {"services": [], "legs": {},
                                      "shape_errors": ["service.json is a list, not an object"]}
    assert clean_service_doc({"services": [{"name": "a"}, 3]}) == {
        "services": [{"name": "a"}], "shape_errors": ["1 service entries are not objects"]}


def test_a_well_formed_document_comes_back_unchanged() -> None:
    """Identities are hashed from what readers get: the cleaning must not touch what dsv4h wrote."""
    import json
    from pathlib import Path

    docs = sorted((Path(__file__).resolve().parents[1] / "fixtures").rglob("service.json"))
    assert docs
    for path in docs:
        doc = json.loads(path.read_text())
        assert clean_service_doc(doc) == doc, path
    # and a stack as dsv4h records one, of this test's own process tree
    import os

    from harness.service.identity.mapped import HashCache
    from harness.service.identity.stack import stack_at_start

    stack = stack_at_start(ServiceProfile(), os.getpid(), Path(os.environ.get("TMPDIR", "/tmp")),
                           {"command": ["python"], "server_info": {}}, HashCache())
    assert stack["mapped"]["at_start"]["pids"]
    doc = {"services": [{"name": "s", "command": ["python"], "stack": stack}], "legs": {"A1": {"service_index": 1}}}
    assert clean_service_doc(json.loads(json.dumps(doc))) == json.loads(json.dumps(doc))
