"""Shared helpers of the report tests: a small synthetic workspace and output comparison."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synthetic_archives import (
    synthetic_historical_entries,
    write_abba_archive,
    write_formal_archive,
    write_historical_ledger,
    write_sweep_archive,
)

from harness.report.render import normalize_build_time

BUILD_TIME = "2026-11-29T12:34:56Z"


def make_workspace(root: Path, *, historical: bool = True) -> dict[str, str]:
    """Two formal archives (one with memory, oracles and a failed round), one ABBA screen, one rate
    sweep and a historical ledger. Returns {name: archive_id}."""
    f1 = write_formal_archive(root, campaign="matrix-a", seed=1, tiers=(1, 2, 4, 8), memory_devices=2,
                              memory_samples=12, oracles=True, failed_round=("decode", 4, 1),
                              created_wall="2026-11-20T10:00:00+0000")
    f2 = write_formal_archive(root, campaign="matrix-b", seed=2, tiers=(1, 64), created_wall="2026-11-25T10:00:00+0000")
    ab = write_abba_archive(root, campaign="screen-a", seed=3, created_wall="2026-11-26T10:00:00+0000")
    sw = write_sweep_archive(root, campaign="sweep-a", seed=4, created_wall="2026-11-27T10:00:00+0000")
    if historical:
        write_historical_ledger(root, synthetic_historical_entries(4))
    return {"f1": f1.archive_id, "f2": f2.archive_id, "abba": ab.archive_id, "sweep": sw.archive_id}


def stand_in_findings(archive: Any) -> list[dict[str, Any]]:
    """Finding-shaped dicts (the harness.evidence.rules interface) for tests that must not depend on the
    evidence rules: a blocking finding on the C1 decode cell of every formal archive, an archive-level
    info finding everywhere."""
    out: list[dict[str, Any]] = [{"rule": "stand-in-info", "severity": "info", "message": "archive-level note",
                                  "remedy": "none", "archive_id": archive.archive_id, "rows": ()}]
    if archive.manifest["run"]["kind"] == "formal-matrix":
        cell = next(c["cell_id"] for c in archive.json("results.json")["cells"]
                    if c["workload"] == "decode" and c["concurrency"] == 1)
        out.append({"rule": "stand-in-blocking", "severity": "blocking", "message": f"cell {cell} is bad",
                    "remedy": "re-run it", "archive_id": archive.archive_id, "rows": (f"{cell}.r0",)})
    return out


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path -> bytes), text outputs with the build time normalised."""
    out: dict[str, bytes] = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            if p.suffix in (".html", ".md"):
                data = normalize_build_time(data.decode("utf-8")).encode("utf-8")
            out[p.relative_to(root).as_posix()] = data
    return out
