"""Record governance: :mod:`.record_claims` (record claims and closures, pure), :mod:`.gates`, :mod:`.history`
(freeze/reveal, historical evidence), :mod:`.base` (shared helpers), :mod:`.io` (the ledger side).

May import: ``oracle`` and every earlier stage.
"""
