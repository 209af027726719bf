"""Stage 6, store (edge: files): :mod:`.archive` (hashed, atomic, never-overwritten result archives),
:mod:`.runblock` (the manifest's typed, versioned run block), :mod:`.ledger` (package: Delta Lake ledgers)
and :mod:`.peers` (package: peer tools' result files in and out).

May import: ``measure`` and every earlier stage.
"""
