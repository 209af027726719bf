"""Suite-wide scheduling rules (loaded by tests/conftest.py, which only re-exports these hooks so that
mypy, which cannot tell two modules named conftest apart, checks them here).

Under pytest-xdist (``-n N``, as ``.ci/run`` and the README run the suite) a file's tests stay on one
worker, in order, sharing their module fixtures, and every file that needs the vLLM CPU engine or the
Slurm cluster (:data:`HEAVY_PATHS`) runs on one worker, one test at a time: both use the machine's
whole CPU (the one-host cluster has 2 CPUs and each test asks for both), so two at once would only
queue or starve each other. Most of the suite waits on the simulator's model time rather than
computing, which is why several workers on 2 cores finish sooner.

The grouping is a scheduler of its own (``pytest_xdist_make_scheduler``) keyed on the node id's file,
not xdist's ``xdist_group`` marks: xdist 3.8 applies those by rewriting ``Item._nodeid``, which pytest
9.2 no longer reads (node ids come from ``Item._id``).
"""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

HEAVY_GROUP = "engine-and-slurm"
HEAVY_PATHS = ("tests/engine/", "tests/service/test_multinode_slurm.py", "tests/run/test_slurm_cluster.py")


def scope_of(nodeid: str) -> str:
    """The unit one worker takes whole: the node id's file, or :data:`HEAVY_GROUP` for a heavy file."""
    path = nodeid.split("::", 1)[0]
    return HEAVY_GROUP if path.startswith(HEAVY_PATHS) else path


class FileScheduling(LoadScopeScheduling):  # type: ignore[misc]
    """xdist's scope scheduling with :func:`scope_of` as the scope."""

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> FileScheduling:
    return FileScheduling(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    stray = [item.nodeid for item in items
             if (item.get_closest_marker("engine") or item.get_closest_marker("slurm"))
             and scope_of(item.nodeid) != HEAVY_GROUP]
    if stray:
        raise pytest.UsageError("tests marked engine or slurm outside tests/xdist_groups.HEAVY_PATHS (add "
                                f"their file there, so they never run beside each other): {stray[:5]}")
