#!/usr/bin/env bash
# Rebuild the shipped tokenizers and corpora from this machine's Python standard library.
# Deterministic: on CPython 3.11.7 with tokenizers 0.23.3 every file comes out byte-identical to the
# committed one (check with `git diff --stat corpora/`). Run from the repository root:
#     bash corpora/rebuild.sh            # corpora only (keeps the committed tokenizers)
#     bash corpora/rebuild.sh --tokenizers   # retrain the tokenizers too
set -euo pipefail
DSV4H=${DSV4H:-.venv/bin/dsv4h}
T8=corpora/tokenizers/dsv4h-sim-bpe-8k
TINY=corpora/tokenizers/tiny-bpe-512
CHAT=harness.inputs.corpus.build:deepseek_v4_chat

if [[ "${1:-}" == "--tokenizers" ]]; then
    $DSV4H corpus train-tokenizer --out $T8 --vocab-size 8192 --specials deepseek --force
    $DSV4H corpus train-tokenizer --out $TINY --vocab-size 512 --specials tiny --model-max-length 1024 --force
fi

# sim-code-512: 32 cases first, then extended to 64 (mirrors the report's 32 -> 64 corpus extension).
$DSV4H corpus build --stdlib --tokenizer $T8 --tokens 511-512 --cases 32 --max-per-file 2 \
    --chat-encoding $CHAT --out corpora/sim-code-512 --force
$DSV4H corpus build --stdlib --tokenizer $T8 --cases 64 --extend corpora/sim-code-512 \
    --out corpora/sim-code-512 --force
# sim-code-8k: 64 prefill prompts, one excerpt per file.
$DSV4H corpus build --stdlib --tokenizer $T8 --tokens 8191-8192 --cases 64 --max-per-file 1 \
    --chat-encoding $CHAT --out corpora/sim-code-8k --force
# tiny-code-128: 16 short prompts for the vLLM CPU test model (vocab 512), no chat encoding.
$DSV4H corpus build --stdlib --tokenizer $TINY --tokens 100-128 --cases 16 --max-per-file 1 \
    --out corpora/tiny-code-128 --force
# mooncake-small: the 20-request Mooncake trace of the replay demo (also tests/fixtures/traces/), blocks of 512.
$DSV4H corpus import-trace corpora/traces/mooncake-small.jsonl --block-size 512 --name mooncake-small \
    --out corpora/mooncake-small --force
