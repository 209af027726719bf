"""Small builders shared by tests in several folders."""

from __future__ import annotations

from typing import Any

from harness.store.runblock import RunBlock


def run_block(**fields: Any) -> RunBlock:
    """A complete run block for a hand-made archive; ``fields`` override the defaults."""
    base: dict[str, Any] = {"campaign": "test", "kind": "formal-matrix", "claim_class": "native-ar",
                            "protocol_class": "formal", "backend": "sim", "service_name": "sim",
                            "created_wall": "2026-11-30T00:00:00+0000", "run_token": "test"}
    return RunBlock.model_validate(base | fields)
