"""Model patches on an installed SGLang tree (edge): :mod:`.series` (all-or-nothing apply/revert and the
state file) over :mod:`.series_spec` (the series file and its models), :mod:`.series_status` (what is
applied, identity), :mod:`.package_tree` (locating the installed package) and :mod:`.unified_diff`
(pure diff parsing and applying).

May import: ``sim``, ``inputs`` and the base modules.
"""
