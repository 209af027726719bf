"""Stage 5, measure (pure): numbers from raw records.

- :mod:`.metrics`: the one definition of every rate and latency (docs/metrics.md), record-level and
  vectorised over record tables (``request_timings``).
- :mod:`.results`: waves -> rounds -> cells (median of three rounds), result tables.
- :mod:`.abba`: ABBA leg statistics, ratio, drift, spread, output match.
- :mod:`.tensors`: kernel-level tensor comparisons (bitwise, max abs, relative L2, cosine).

May import: ``load``, ``service``, ``patches``, ``sim``, ``inputs`` and the base modules.
"""
