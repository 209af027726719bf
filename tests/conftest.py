"""Suite-wide hooks: see tests/xdist_groups.py (mypy checks them there, and skips this file)."""

from xdist_groups import pytest_collection_modifyitems

__all__ = ["pytest_collection_modifyitems"]
