"""Stage 6, store (edge: files): :mod:`.archive` (hashed, atomic, never-overwritten result archives),
:mod:`.runblock` (the manifest's typed, versioned run block) and :mod:`.ledger` (Parquet ledgers).

May import: ``measure`` and every earlier stage.
"""
