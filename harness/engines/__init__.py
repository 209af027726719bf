"""Helpers for real engines that run on CPU-only machines (the vLLM CPU build in CI)."""
