"""Stage 1, inputs (pure but for reading files): what a run is asked to do.

- :mod:`.spec`: campaign, ABBA and service-profile models; ``load_spec`` validates a YAML file and
  resolves every path it names once (``LoadedSpec.paths``).
- :mod:`.plan`: cells, rounds and waves with stable ids and a time estimate.
- :mod:`.corpus` (package): the frozen token-ID corpus format (:mod:`.corpus.frozen`: load, verify);
  :mod:`.corpus.build` builds and extends one over :mod:`.corpus.sources` (file selection, templates),
  :mod:`.corpus.walk` (spans) and :mod:`.corpus.train` (tokenizer training).
- :mod:`.tokenizer`: tokenizer identity and loading.

May import: ``errors``, ``hashing``, ``records``, ``formats``, ``aio``, ``engines``.
"""
