"""Report configuration: which archives a report shows and what it adds (pure: reads one file).

A report config is a YAML mapping (``reports/<name>/report.yaml``); every key is optional::

    title: dsv4h demo report
    description: A note shown after the generated description.
    select:                      # filters combine with AND; none given = every archive
      campaigns: [quick, abba-demo]
      kinds: [formal-matrix, abba, rate-sweep]
      labels: [simulated]        # an archive must carry every label listed
      since: 2026-11-01          # created_wall date, inclusive (UTC)
      until: 2026-12-31
      archive_ids: [3e7fd55e]    # ids or unique prefixes; each must exist
      statuses: [complete]
    historical: true             # include <workspace>/ledgers/historical/*.parquet when present
    historical_figure:           # which historical entries the milestones figure draws
      metrics: [single_request_output]
      protocol_classes: null     # default: all but formal and abba-screen
      min_entries: 2
      max_panels: 4
    memory: true                 # include memory.parquet samples of the archives when present
    findings: true               # run harness.evidence.rules.check_archive when available
    limits: ["free text limits added to the report's Limits section"]

Errors raise ``SpecError`` naming the file and the field path (``select.kinds.0: ...``).

Report config format history (``REPORT_CONFIG_FORMAT_VERSION``):
  1 - first version (2026-11-29). Later additions that older configs still satisfy: kind ``rate-sweep``
      (2026-12-01); ``description`` became a note after the description the report generates from its
      content (2026-12-01); kind ``sla-search`` (2026-12-02); every kind of the kind descriptor
      (``harness.kinds``: ``matched-sd``, ``quick-bench``, ``external`` too) (2026-12-03).
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from harness.errors import SpecError
from harness.formats import Strict, parse_model, read_yaml
from harness.kinds import KINDS

__all__ = ["load_report_config"]

REPORT_CONFIG_FORMAT_VERSION = 1

ArchiveStatus = Literal["complete", "partial", "failed"]



def _known_kind(value: str) -> str:
    if value not in KINDS:
        raise ValueError(f"{value!r} is not a kind; one of {', '.join(KINDS)}")
    return value


class Selection(Strict):
    """Archive filters. Each given filter must hold (AND); an omitted filter selects everything."""

    campaigns: list[str] | None = Field(None, description="campaign (or screen) names, exact match")
    kinds: list[Annotated[str, AfterValidator(_known_kind)]] | None = Field(
        None, description="run kinds (harness.kinds: formal-matrix, abba, ...)")
    labels: list[str] | None = Field(None, description="the archive must carry every one of these labels")
    since: date | None = Field(None, description="first created_wall date included (UTC)")
    until: date | None = Field(None, description="last created_wall date included (UTC)")
    archive_ids: list[str] | None = Field(None, description="archive ids or unique id prefixes; each must exist")
    statuses: list[ArchiveStatus] | None = None




class HistoricalFigure(Strict):
    """Which historical entries the milestones figure (Figure 2 style) draws; every entry is always
    listed in the historical table. Entries are grouped into panels by (claim class, metric, unit);
    the largest groups come first."""

    metrics: list[str] | None = Field(None, description="only these metrics (default: every metric)")
    protocol_classes: list[str] | None = Field(
        None, description="only these protocol classes (default: every class except formal and abba-screen, "
                          "whose historical cells and legs are tables, not milestones)")
    min_entries: int = Field(2, ge=1, description="a panel needs at least this many entries")
    max_panels: int = Field(4, ge=1, le=12)


class ReportConfig(Strict):
    """What a report shows. See the module docstring for the YAML form."""

    format_version: Literal[1] = 1
    title: str = "dsv4h report"
    description: str = Field("", description="a note shown after the description generated from the content")
    select: Selection = Selection()
    historical: bool = True
    historical_figure: HistoricalFigure = HistoricalFigure()
    memory: bool = True
    findings: bool = True
    limits: list[str] = Field(default_factory=list)


def load_report_config(path: Path) -> ReportConfig:
    """Read and validate a report config. Raises ``SpecError`` naming the file, field and fix."""
    data = read_yaml(path)
    if data is None:
        data = {}
    cfg = parse_model(ReportConfig, data, str(path))
    sel = cfg.select
    if sel.since is not None and sel.until is not None and sel.since > sel.until:
        raise SpecError(f"{path}: select.since ({sel.since}) is after select.until ({sel.until})",
                        hint="swap the dates or remove one of them")
    return cfg
