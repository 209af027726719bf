"""The report snapshot: select archives and freeze every value a report shows (pure).

A report is rendered only from its snapshot (``results.json`` in the report directory), so
``dsv4h report build --from-snapshot results.json`` rebuilds the same report anywhere, without the
archives. This package is the pure half of that pipeline; it re-exports the public names that code
outside it uses, from the modules that implement them:

- :func:`select_archives` applies a :class:`~harness.report.config.Selection` to archive manifests
  (:mod:`.archives`, with :class:`ArchiveContent` and :func:`is_simulated`);
- :func:`freeze` turns loaded archive contents (:class:`ArchiveContent`, read by
  :mod:`harness.report.collect`) and historical ledger rows into the snapshot document
  (:mod:`.freeze`; per-archive context sections in :mod:`.sections`, the stated
  limits in :mod:`.limits`);
- :func:`snapshot_bytes` / :func:`load_snapshot` write and read it (stable bytes: sorted keys,
  1-space indent, NaN stored as ``null``; :mod:`.io`, which keeps the format history).

Units: every rate is tokens per second (prefill: input tok/s; decode: output tok/s); durations are
seconds; memory is bytes; ``t_ns`` are monotonic-clock nanoseconds; percentages are plain percent
values (10.0 means +10 %). Min/max of rounds or waves are *observed ranges*, never confidence
intervals.

Snapshot layout (top-level keys): ``snapshot_format_version``, ``title``, ``description``, ``selection`` (the
config's filters), ``archives`` (id, manifest SHA-256, status, files count, run identity, ``simulated``,
``host`` from ``environment.json``), ``formal`` (per formal archive: every cell with every round value, every
round, HTTP rates, spec summary, limits), ``screens`` (per ABBA archive: legs with every wave, ratio, drift,
spread, separation, completion equality, verdict, limits), ``sweeps`` (per rate-sweep archive: every offered
rate's round medians and pooled latency, the SLO and the goodput knee), ``speculative`` (``matched``: per
matched AR/SD archive its legs, rates, tokens per step, acceptance, T_SD/T_AR and break-even verdict;
``acceptance``: per archive with speculative counts, summed per cell; :mod:`.speculative`), ``energy`` (per
archive with ``energy.json``: per cell or leg, median output tokens per joule, mean W, methods and sources;
:mod:`.energy`), ``sla`` (per SLA-search archive: limits, rule, the bracket, end, convergence and every
probe; :mod:`.sla`), ``memory`` (samples per device, peak observed in samples), ``historical`` (ledger rows in
ledger order, never mixed with current cells) and ``historical_figure`` (the milestone panels: entry ids per
claim class, metric and unit), ``findings`` (evidence findings, ``findings_source`` says where they came
from), ``services``, ``corpora`` (tokenizer and token ranges when the archive recorded them), ``oracles``
(each check with ``when`` it ran: before or after measurement), ``limits`` (report-wide), ``has_simulated``.
The summary card and the description are derived from the snapshot when rendering
(:mod:`harness.report.summary`).

Snapshot format history (``SNAPSHOT_FORMAT_VERSION``): see :mod:`harness.report.snapshot.io`.
"""

from __future__ import annotations

from harness.report.snapshot.archives import ArchiveContent, select_archives
from harness.report.snapshot.freeze import freeze, historical_figure_groups
from harness.report.snapshot.io import SNAPSHOT_FORMAT_VERSION, json_value, load_snapshot, snapshot_bytes

__all__ = [
    "SNAPSHOT_FORMAT_VERSION",
    "ArchiveContent",
    "freeze",
    "historical_figure_groups",
    "json_value",
    "load_snapshot",
    "select_archives",
    "snapshot_bytes",
]
