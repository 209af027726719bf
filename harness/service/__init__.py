"""Stage 2, service (edge): the server being measured.

- :mod:`.manager`: start (GPU ownership checked first) or attach, health, identity verification
  from the running server, stop only the owned tree; :mod:`.process`: owned process trees (every
  live one stopped at exit as a last resort); :mod:`.registry`: launched servers recorded in the
  workspace, so one a killed dsv4h left behind is found and stopped.
- :mod:`.command` / :mod:`.sglang_flags`: SGLang launch commands (pure) and their check against the
  installed version; :mod:`.witness`: backend witnesses written by the patch series.
- :mod:`.gpu` (pure parsers), :mod:`.gpu_probe`, :mod:`.ownership`, :mod:`.memory`: GPU owners and memory.
- :mod:`.identity` (hash of the served configuration), :mod:`.environment` (host, versions, clock anchor).

May import: ``patches``, ``sim``, ``inputs`` and the base modules.
"""
