"""Orchestration (edge): :mod:`.campaign` (formal matrices) and :mod:`.abba` (ABBA screens), both on
the one skeleton of :mod:`.session` (governance check, archive preamble, service session, finish:
finalize -> ledgers -> evidence) and the wave runner of :mod:`.wave` with the client's self-check of
:mod:`.selfcheck` (event-loop delay, CPU share, simulator late steps per wave); :mod:`.recover` rolls
forward the partial archives a killed run left behind. :mod:`.slurm` submits a campaign as a Slurm
job and ends it into a workspace (its batch script and Slurm's answers: :mod:`.slurm_script`, pure).

May import: every earlier stage (not ``report`` or ``cli``).
"""
