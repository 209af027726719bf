"""Benchmark: building, extending, loading and verifying frozen token-ID corpora.

Builds the shipped corpora's recipes into a temporary directory from this Python's standard library with the
committed tokenizers (``corpora/rebuild.sh`` has the same recipes), ``--repeats`` times each, and times:

- build: ``sim-code-512`` (64 x 511-512 tokens, fresh), ``extend 32->64`` of it, ``sim-code-8k``
  (64 x 8191-8192 tokens), ``tiny-code-128`` (16 x 100-128 tokens);
- load (``load_corpus``: parse + verify every case hash) and ``verify_corpus`` of each built corpus;
- optionally (``--train``) tokenizer training (8192 and 512 vocabularies).

It also checks that every repeat produced byte-identical files and that they equal the committed corpora.
Targets: the 64 x 8K build in seconds, loading a 64 x 8K corpus < 1 s.
Writes ``benchmarks/results/corpus_build.json`` and prints a table. Usage::

    .venv/bin/python benchmarks/bench_corpus_build.py [--repeats 3] [--train]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tokenizers

from harness.inputs.corpus import CASES_FILE, MANIFEST_FILE, load_corpus, verify_corpus
from harness.inputs.corpus.build import (
    DEEPSEEK_SPECIAL_TOKENS,
    STDLIB_EXCLUDE,
    TINY_SPECIAL_TOKENS,
    build_corpus,
    python_source_revision,
    stdlib_dir,
    train_tokenizer,
)

ROOT = Path(__file__).resolve().parent.parent
T8 = ROOT / "corpora" / "tokenizers" / "dsv4h-sim-bpe-8k"
TINY = ROOT / "corpora" / "tokenizers" / "tiny-bpe-512"
CHAT = "harness.inputs.corpus.build:deepseek_v4_chat"
V = sys.version_info
SOURCE: dict[str, Any] = {"source_repository": "https://github.com/python/cpython",
          "source_revision": f"v{V.major}.{V.minor}.{V.micro}", "source_root": "Lib",
          "exclude": list(STDLIB_EXCLUDE)}


def timed(fn: Callable[[], Any], repeats: int) -> tuple[list[float], Any]:
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return times, result


def files_of(path: Path) -> tuple[bytes, bytes]:
    return (path / MANIFEST_FILE).read_bytes(), (path / CASES_FILE).read_bytes()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--train", action="store_true", help="also time tokenizer training")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "corpus_build.json")
    args = ap.parse_args()
    lib = stdlib_dir()
    rows: list[dict[str, Any]] = []
    identical: dict[str, bool] = {}

    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)

        def build(name: str, **kw: Any) -> Callable[[], Path]:
            def run() -> Path:
                c = build_corpus(lib, name=name, overwrite=True, **SOURCE, **kw)
                return c.path
            return run

        # (label, committed corpus to compare with, what to compare, build, new cases, max tokens);
        # a fresh 64-case build has the same cases as the 32 -> 64 extension, but a different history
        recipes: list[tuple[str, str, str, Callable[[], Path], int, int]] = [
            ("sim-code-512 (64 cases, fresh)", "sim-code-512", "cases",
             build("sim-code-512", tokenizer_path=T8, token_range=(511, 512), n_cases=64,
                   out_dir=tmp / "sim-code-512-fresh", max_per_file=2, chat_encoding=CHAT), 64, 512),
            ("sim-code-512 (32 cases)", "", "none",
             build("sim-code-512", tokenizer_path=T8, token_range=(511, 512), n_cases=32,
                   out_dir=tmp / "sim-code-512-32", max_per_file=2, chat_encoding=CHAT), 32, 512),
            ("sim-code-512 (extend 32->64)", "sim-code-512", "all",
             build("sim-code-512", tokenizer_path=T8, token_range=None, n_cases=64,
                   out_dir=tmp / "sim-code-512", extend=tmp / "sim-code-512-32"), 32, 512),
            ("sim-code-8k (64 cases)", "sim-code-8k", "all",
             build("sim-code-8k", tokenizer_path=T8, token_range=(8191, 8192), n_cases=64,
                   out_dir=tmp / "sim-code-8k", max_per_file=1, chat_encoding=CHAT), 64, 8192),
            ("tiny-code-128 (16 cases)", "tiny-code-128", "all",
             build("tiny-code-128", tokenizer_path=TINY, token_range=(100, 128), n_cases=16,
                   out_dir=tmp / "tiny-code-128", max_per_file=1), 16, 128),
        ]
        for label, committed, compare, fn, new_cases, hi in recipes:
            outputs = []
            times = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                path = fn()
                times.append(time.perf_counter() - t0)
                outputs.append(files_of(path))
            same = all(o == outputs[0] for o in outputs)
            if compare != "none":
                ref = files_of(ROOT / "corpora" / committed)
                same = same and (outputs[0] == ref if compare == "all" else outputs[0][1] == ref[1])
            identical[label] = same
            rows.append({"step": f"build {label}", "cases": new_cases, "max_tokens": hi,
                         "times_s": times, "median_s": statistics.median(times), "min_s": min(times),
                         "identical": same})

        for name in ("sim-code-512", "sim-code-8k", "tiny-code-128"):
            path = tmp / name
            load_corpus(path)  # warm the page cache
            times, c = timed(lambda p=path: load_corpus(p), max(args.repeats, 5))  # type: ignore[misc]
            rows.append({"step": f"load {name}", "cases": len(c), "max_tokens": c.token_range[1],
                         "times_s": times, "median_s": statistics.median(times), "min_s": min(times)})
            times, problems = timed(lambda p=path: verify_corpus(p), max(args.repeats, 5))  # type: ignore[misc]
            assert problems == []
            rows.append({"step": f"verify {name}", "cases": len(c), "max_tokens": c.token_range[1],
                         "times_s": times, "median_s": statistics.median(times), "min_s": min(times)})

        if args.train:
            for label, vocab, specials in (("train tokenizer vocab 8192", 8192, DEEPSEEK_SPECIAL_TOKENS),
                                           ("train tokenizer vocab 512", 512, TINY_SPECIAL_TOKENS)):
                times, _ = timed(lambda v=vocab, s=specials, n=label: train_tokenizer(  # type: ignore[misc]
                    lib, tmp / n.replace(" ", "-"), vocab_size=v, special_tokens=s, exclude=STDLIB_EXCLUDE,
                    overwrite=True), args.repeats)
                rows.append({"step": label, "cases": 0, "max_tokens": 0, "times_s": times,
                             "median_s": statistics.median(times), "min_s": min(times)})

    print(f"{'step':<45} {'cases':>5} {'median s':>9} {'min s':>8}  identical")
    for r in rows:
        ident = "" if "identical" not in r else ("yes" if r["identical"] else "NO")
        print(f"{r['step']:<45} {r['cases']:>5} {r['median_s']:>9.3f} {r['min_s']:>8.3f}  {ident}")
    report = {
        "benchmark": "corpus_build",
        "command": "python benchmarks/bench_corpus_build.py " + " ".join(sys.argv[1:]),
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "cpus": os.cpu_count(), "tokenizers": tokenizers.__version__,
                    "source": python_source_revision()},
        "repeats": args.repeats,
        "rows": rows,
        "all_identical": all(identical.values()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    if not report["all_identical"]:
        sys.exit("some builds were not byte-identical across repeats or to the committed corpora")


if __name__ == "__main__":
    main()
