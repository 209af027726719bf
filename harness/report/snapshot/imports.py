"""The report's "Imported results (external claims)" section (pure).

One entry per imported archive (``external.json``, harness.store.peers): the tool, source file and its
SHA-256, request count and the figures as the peer tool computed them (harness.store.peers.figures:
request and output throughput, TTFT/TPOT/ITL p50/p99 in ms), and the data origin its file gives
(``simulated``, ``external`` or ``unknown``). These are claims of another tool: they are listed in
their own section and never enter a measured table, figure or key number.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.report.snapshot.archives import ArchiveContent
from harness.store.peers.figures import import_figures
from harness.store.runblock import read_run_block


def import_entry(archive_id: str, manifest: Mapping[str, Any], external: Mapping[str, Any]) -> dict[str, Any]:
    """One imported archive's entry: :func:`import_figures` plus archive id, campaign, claim class,
    creation time and the source file's SHA-256."""
    run = read_run_block(dict(manifest), f"archive {archive_id}")
    return {"archive_id": archive_id, "campaign": run.campaign, "claim_class": run.claim_class,
            "created_wall": run.created_wall, "source_sha256": external.get("source_sha256"),
            **import_figures(external)}


def import_entries(contents: Sequence[ArchiveContent]) -> list[dict[str, Any]]:
    """The entries of every imported archive among ``contents``, in their order."""
    return [import_entry(c.archive_id, c.manifest, c.external) for c in contents if c.external is not None]
