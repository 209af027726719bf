"""Suite-wide hooks: see tests/xdist_groups.py (mypy checks them there, and skips this file)."""

from xdist_groups import pytest_collection_modifyitems, pytest_xdist_make_scheduler

__all__ = ["pytest_collection_modifyitems", "pytest_xdist_make_scheduler"]
