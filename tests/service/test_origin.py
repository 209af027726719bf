"""The one definition of simulator data (harness.service.identity.origin) and its callers agreeing on it."""

from __future__ import annotations

from typing import Any

import pytest
from testkit import run_block

from harness.evidence.rules.instruments import serves_simulator
from harness.service.identity.origin import run_is_simulated, server_is_simulator, service_is_simulated
from harness.store.peers.parse import origin_of, server_identity

SIM_INFO = {"version": "0.4.6", "dsv4h_simulator": {"profile": "fast"}}
SGLANG_INFO = {"version": "0.4.6.post1", "model_path": "deepseek-ai/DeepSeek-V4", "tp_size": 8}


@pytest.mark.parametrize(("info", "expected"), [
    (SIM_INFO, True),                       # what the built-in simulator reports
    ({"version": "sim-0.1.0"}, True),       # only the version saved (an older simulator, a peer's file)
    (SGLANG_INFO, False),                   # a real SGLang server
    ({"version": "0.5.0rc1-simulated"}, False),  # the prefix only counts at the start
    ({}, False),                            # an attach to a server that reports nothing
    (None, False),                          # no server_info at all (unknown server)
    ("sim-0.1.0", False),                   # not a mapping
    ({"version": 7}, False),
])
def test_server_is_simulator(info: Any, expected: bool) -> None:
    assert server_is_simulator(info) is expected
    assert serves_simulator({"server_info": info}) is expected


@pytest.mark.parametrize(("service", "expected"), [
    ({"backend": "sim", "server_info": SIM_INFO}, True),
    ({"backend": "sim"}, True),                                  # owned simulator, info not read yet
    ({"backend": "attach", "server_info": SIM_INFO}, True),      # an attached 'dsv4h sim serve'
    ({"backend": "attach", "server_info": {"version": "sim-0.1.0"}}, True),
    ({"backend": "attach", "server_info": SGLANG_INFO}, False),
    ({"backend": "attach", "server_info": None}, False),        # an unknown server
    ({"backend": "sglang", "server_info": SGLANG_INFO}, False),
])
def test_service_is_simulated(service: dict[str, Any], expected: bool) -> None:
    assert service_is_simulated(service) is expected
    assert run_is_simulated(["attach"], (), [service]) is expected


@pytest.mark.parametrize(("backend", "labels", "services", "expected"), [
    ("sim", (), (), True),
    ("sglang+sim", (), (), True),            # an ABBA screen with one simulated arm
    ("sglang", ("simulated",), (), True),
    ("sglang", ("smoke",), ({"backend": "sglang", "server_info": SGLANG_INFO},), False),
    ("attach", (), ({"backend": "attach", "server_info": SIM_INFO},), True),
    ("attach", (), ("not a mapping", {"backend": "attach"}), False),
    ("simulator", (), (), False),            # only the backend 'sim' is the simulator
])
def test_run_is_simulated_and_the_run_block_agree(backend: str, labels: tuple[str, ...],
                                                  services: tuple[Any, ...], expected: bool) -> None:
    assert run_is_simulated(backend.split("+"), labels, services) is expected
    block = run_block(backend=backend, labels=labels)
    assert block.simulated is (expected if not services else run_is_simulated(backend.split("+"), labels))


@pytest.mark.parametrize(("info", "origin"), [
    (SIM_INFO, "simulated"), ({"version": "sim-0.1.0"}, "simulated"), (SGLANG_INFO, "external"), (None, "unknown"),
])
def test_an_import_reads_its_origin_the_same_way(info: Any, origin: str) -> None:
    ident = server_identity({"server_info": info} if info is not None else {})
    assert origin_of(ident) == origin
