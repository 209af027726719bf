"""Oracles: :mod:`.model` (pure: fixed-input greedy completions, hashes, comparisons), :mod:`.live`
(edge: check, capture and repeat against a server), :mod:`.sentinels` (checks around measurement).

May import: ``evidence`` and every earlier stage.
"""
