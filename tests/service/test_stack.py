"""harness.service.identity.stack: which processes of a tree are ranks (the role the server names), and the
library requirements against a snapshot."""

from __future__ import annotations

import subprocess
import sys
import time

from harness.inputs.spec import ServiceProfile
from harness.service.identity.stack import rank_roles, violations


def test_a_process_titled_as_a_rank_is_a_worker_role() -> None:
    rank = subprocess.Popen(["bash", "-c", f"exec -a sglang::scheduler_TP3 {sys.executable} -c 'import time; "
                             "time.sleep(30)'"])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        deadline = time.monotonic() + 10
        roles: dict[int, str] = {}
        while time.monotonic() < deadline and rank.pid not in roles:  # until exec has replaced bash
            roles = rank_roles([rank.pid, other.pid])
        assert roles == {rank.pid: "sglang::scheduler_TP3"}
    finally:
        for p in (rank, other):
            p.kill()
            p.wait()


def test_nothing_required_nothing_checked_and_an_attached_service_cannot_be_read() -> None:
    assert violations(ServiceProfile(), None) == []
    needs = ServiceProfile(identity={"require_libraries": [{"name": "libccl.so*"}]})
    (msg,) = violations(needs, None)
    assert "cannot be read" in msg
