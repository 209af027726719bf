"""Stage 7, evidence: :mod:`.rules` (pure: every evidence rule as findings over an archive's plain
data), :mod:`.guard` (pure: refuse comparisons across claim or protocol classes), :mod:`.io`
(load a typed archive for the rules, ``check_archive``, write verdicts back into the ledgers).

May import: ``store`` and every earlier stage.
"""
