"""Reports: a frozen snapshot of verified archives, rendered as figures, HTML, Markdown and LaTeX.

Data flows one way: workspace -> :mod:`.collect` (select, verify, load; edge) ->
:mod:`.snapshot` (package: freeze every shown value; pure) -> ``results.json`` -> :mod:`.render` (figures
from :mod:`.figures`, the summary card and description from :mod:`.summary`, each kind's view from
:mod:`.kind_views` and the other template views from
:mod:`.views`, jinja2 templates from ``reports/templates/``; edge). :mod:`.build` holds the
two entry points used by ``dsv4h report build``: ``build_report`` (from a workspace) and
``build_from_snapshot`` (from a snapshot file alone). :mod:`.config` is the report config
(``reports/<name>/report.yaml``); :mod:`.sweep` writes the rate-sweep section on its own
(``dsv4h sweep report``). Labelled synthetic archives for tests and benchmarks are test data
(``tests/synthetic_archives.py``), not part of the package.

Nothing is imported here, so reading a config or a snapshot does not import matplotlib.
"""
