"""What a ledger table is, besides its columns (pure): :class:`TableModel`.

A kind declares its tables as a mapping ``table -> TableModel`` in its own measure module (named by
its descriptor entry, ``harness.kinds.KindInfo.row_models``); :data:`harness.measure.rows.ROW_MODELS`
is assembled from those and the tables every kind shares.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa


@dataclass(frozen=True)
class TableModel:
    """A ledger table: its row model, and whether its rows carry latency, ``extra`` and the archive columns.

    ``row_keys``: the columns naming the units an evidence finding can concern (a wave, round, cell or
    probe id: a row is concerned when any of them is named); empty for a table with one row per run
    (any blocking finding concerns it) and for governance tables. ``verdict``: the table has a
    ``verdict`` column that is withheld on an invalid row (``verdict_as_measured`` keeps what was
    measured). ``fill``: fills, from the columns they have, the columns that rows written before a
    column was added lack (applied to every row on its way into the ledger; idempotent)."""

    model: type
    latency: bool = False
    archive: bool = True
    row_keys: tuple[str, ...] = ()
    verdict: bool = False
    fill: Callable[[pa.Table], pa.Table] | None = None
