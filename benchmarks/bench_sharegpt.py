"""Benchmark: ``dsv4h corpus import-sharegpt`` (harness.inputs.corpus.synth.import_sharegpt) on one long
conversation of growing size, and on one huge single turn.

Each file holds one conversation of alternating human/gpt turns of about ``--turn-chars`` characters
(ShareGPT-like English and code text) up to the target size; it is imported with the default
``--max-input 32768`` and with ``--max-input 1048576`` (every turn fits), with the committed
``dsv4h-sim-bpe-8k`` tokenizer, in a fresh child process which reports seconds, cases and its peak RSS.
The import tokenizes each turn once and leaves a conversation once its history is past ``--max-input``.
Writes ``benchmarks/results/import_sharegpt.json`` and prints a table. Usage::

    .venv/bin/python benchmarks/bench_sharegpt.py [--sizes-kb 441,883,1770] [--huge-turn-mb 20] [--max-inputs 32768]

With ``--max-input 1048576`` every turn of these files fits, so each answered turn's case holds the whole
history before it: the output grows with the square of the conversation (509 cases of up to 500k IDs at
1.77 MB), and so do time and memory; the tokenizing itself stays linear.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TOK = ROOT / "corpora" / "tokenizers" / "dsv4h-sim-bpe-8k"
_TEXT = ("How do I read a file line by line in Python and strip the newline? for line in open(path): "
         "print(line.rstrip('\\n')) # the with-statement closes it; sort the items in place with items.sort(). ")

_CHILD = """
import json, sys, time
from pathlib import Path
from harness.inputs.corpus.synth import import_sharegpt
t0 = time.perf_counter()
c = import_sharegpt(Path(sys.argv[2]), source=Path(sys.argv[1]), tokenizer=Path(sys.argv[3]),
                    max_input=int(sys.argv[4]))
t1 = time.perf_counter()
hwm = [ln for ln in open("/proc/self/status") if ln.startswith("VmHWM:")]
print(json.dumps({"seconds": t1 - t0, "cases": len(c), "peak_rss_bytes": int(hwm[0].split()[1]) * 1024}))
"""


def conversation(size: int, turn_chars: int) -> list[dict[str, Any]]:
    text = (_TEXT * (turn_chars // len(_TEXT) + 1))[:turn_chars]
    turns, total, k = [], 0, 0
    while total < size:
        turns.append({"from": "human" if k % 2 == 0 else "gpt", "value": f"{k} {text}"})
        total += turn_chars + 40
        k += 1
    return [{"id": "long", "conversations": turns}]


def _child(src: Path, out: Path, max_input: int) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(src), str(out), str(TOK), str(max_input)],
                          capture_output=True,
                          text=True, cwd=ROOT, check=True, env=os.environ | {"PYTHONPATH": str(ROOT)})
    return dict(json.loads(proc.stdout.splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes-kb", default="441,883,1770")
    ap.add_argument("--turn-chars", type=int, default=1700)
    ap.add_argument("--max-inputs", default="32768,1048576", help="--max-input values to run each file with")
    ap.add_argument("--huge-turn-mb", type=float, default=20.0, help="one human turn of this size (0: skip)")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cases: list[tuple[str, list[dict[str, Any]]]] = [
            (f"{kb} KB conversation", conversation(kb * 1000, args.turn_chars))
            for kb in (int(x) for x in args.sizes_kb.split(","))]
        if args.huge_turn_mb:
            huge = "x " * int(args.huge_turn_mb * 5e5)
            cases.append((f"{args.huge_turn_mb:g} MB single turn", [{"id": "huge", "conversations": [
                {"from": "human", "value": "hello"}, {"from": "gpt", "value": "hi"},
                {"from": "human", "value": huge}, {"from": "gpt", "value": "ok"}]}]))
        for i, (label, convs) in enumerate(cases):
            src = Path(tmp) / f"c{i}.json"
            src.write_text(json.dumps(convs))
            for max_input in (int(x) for x in args.max_inputs.split(",")):
                r = _child(src, Path(tmp) / f"out{i}-{max_input}", max_input)
                rows.append({"case": label, "max_input": max_input, "file_bytes": src.stat().st_size,
                             "turns": len(convs[0]["conversations"]), **r})
    print(f"{'case':<26}{'max-input':>10}{'file KB':>9}{'turns':>7}{'cases':>7}{'seconds':>9}{'peak RSS MB':>13}")
    for r in rows:
        print(f"{r['case']:<26}{r['max_input']:>10}{r['file_bytes'] / 1e3:>9.0f}{r['turns']:>7}{r['cases']:>7}"
              f"{r['seconds']:>9.2f}"
              f"{r['peak_rss_bytes'] / 1e6:>13.0f}")
    out = ROOT / "benchmarks" / "results" / "import_sharegpt.json"
    out.write_text(json.dumps({"benchmark": "bench_sharegpt", "tokenizer": TOK.name,
                               "python": sys.version.split()[0], "machine": platform.machine(),
                               "cpus": os.cpu_count(), "rows": rows}, indent=1) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
