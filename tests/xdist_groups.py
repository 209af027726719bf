"""Suite-wide collection rules (loaded by tests/conftest.py, which only re-exports this hook so that mypy,
which cannot tell two modules named conftest apart, checks it here).

Under pytest-xdist (``-n N --dist loadgroup``, as ``.ci/run`` and the README run the suite) a file's
tests stay on one worker, in order, sharing their module fixtures, and every test that needs the
vLLM CPU engine or the Slurm cluster runs on one worker, one at a time: both use the machine's whole
CPU (the one-host cluster has 2 CPUs and each test asks for both), so two at once would only queue
or starve each other. Most of the suite waits on the simulator's model time rather than computing,
which is why several workers on 2 cores finish sooner.
"""

from __future__ import annotations

import pytest

HEAVY_GROUP = "engine-and-slurm"


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook turns the marks into node-id suffixes
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        heavy = item.get_closest_marker("engine") is not None or item.get_closest_marker("slurm") is not None
        item.add_marker(pytest.mark.xdist_group(HEAVY_GROUP if heavy else item.nodeid.split("::", 1)[0]))
