"""Stage 2, service (edge): the server being measured, in three subpackages.

- :mod:`.launch`: starting, owning and stopping services (launch commands and their flag check, the
  manager, the workspace registry, multi-node services in a Slurm allocation).
- :mod:`.identity`: what was served (the identity hash, the served stack: model, source trees,
  mapped libraries, runtime identity; speculation, backend witnesses, the environment, simulator
  origin, the read-back ``service.json`` shape).
- :mod:`.devices`: GPUs and samplers (owners, probes, memory and power samplers).

Below them, shared by ``launch`` and ``devices``: :mod:`.process` (owned process trees, every live
one stopped at exit as a last resort) and :mod:`.http` (every blocking HTTP read of a server, bounded
in bytes and in total time). Inside ``service``: ``launch`` imports ``identity`` and ``devices``,
``identity`` imports ``devices``, never the reverse.

May import: ``patches``, ``sim``, ``inputs`` and the base modules.
"""
