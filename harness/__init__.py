"""dsv4h: benchmarking and evidence-governance harness for LLM serving (SGLang, vLLM).

Pure modules (spec, plan, metrics, evidence, SSE parsing, command building) hold the logic; side
effects (processes, HTTP, files, clocks) live in ``service/``, ``load/``, ``sim/``, ``archive``,
``ledger``, ``report/``, ``pipeline`` and ``cli``.
"""

__version__ = "0.1.0"
