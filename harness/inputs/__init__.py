"""Stage 1, inputs (pure but for reading files): what a run is asked to do.

- :mod:`.spec`: campaign, ABBA and service-profile models; ``load_spec`` validates a YAML file and
  resolves every path it names once (``LoadedSpec.paths``).
- :mod:`.plan`: cells, rounds and waves with stable ids and a time estimate.
- :mod:`.corpus`: the frozen token-ID corpus format (load, verify); :mod:`.corpus_build` builds and
  extends one over :mod:`.corpus_sources` (file selection, templates), :mod:`.corpus_walk` (spans)
  and :mod:`.corpus_train` (tokenizer training).
- :mod:`.tokenizer`: tokenizer identity and loading.

May import: ``errors``, ``hashing``, ``records``, ``formats``, ``aio``, ``engines``.
"""
