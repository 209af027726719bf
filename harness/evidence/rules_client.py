"""Compatibility module (deprecated): the instrument rules moved to :mod:`harness.evidence.rules.instruments`.

Kept only because ``harness.run.partial`` still imports ``serves_simulator`` from here; new code imports
it from ``harness.evidence`` (or :mod:`harness.evidence.rules.instruments`). Delete this module once that
import has moved.
"""

from __future__ import annotations

from harness.evidence.rules.instruments import serves_simulator

__all__ = ["serves_simulator"]
