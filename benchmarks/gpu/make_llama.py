"""Make a randomly initialised Llama locally (no hub): config -> weights (bf16) -> save_pretrained,
plus the committed tokenizer the corpora were built with (corpora/tokenizers/dsv4h-sim-bpe-8k).

    python3 benchmarks/gpu/make_llama.py OUT_DIR [--layers 8] [--hidden 1024]

Runs on the H200 host (transformers and torch are in its image); random weights, so answers are
gibberish: this model exists to put a real GPU engine in dsv4h's loop, not to answer questions.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOKENIZER = REPO / "corpora" / "tokenizers" / "dsv4h-sim-bpe-8k"
CHAT_TEMPLATE = ("{% for m in messages %}<｜User｜>{{ m['content'] }}{% endfor %}"
                 "{% if add_generation_prompt %}<｜Assistant｜>{% endif %}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    vocab = json.loads((TOKENIZER / "tokenizer.json").read_text())
    added = vocab.get("added_tokens") or []
    tok_size = max([*vocab["model"]["vocab"].values(), *(t["id"] for t in added)]) + 1
    eos = next(t["id"] for t in added if "end" in t["content"])
    bos = next(t["id"] for t in added if "begin" in t["content"])
    torch.manual_seed(args.seed)
    cfg = LlamaConfig(vocab_size=max(tok_size, 8192), hidden_size=args.hidden, intermediate_size=args.hidden * 11 // 4,
                      num_hidden_layers=args.layers, num_attention_heads=args.hidden // 64,
                      num_key_value_heads=args.hidden // 64, max_position_embeddings=4096,
                      bos_token_id=bos, eos_token_id=eos, pad_token_id=eos, torch_dtype="bfloat16")
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(args.out)
    shutil.copyfile(TOKENIZER / "tokenizer.json", args.out / "tokenizer.json")
    config = json.loads((TOKENIZER / "tokenizer_config.json").read_text())
    config["chat_template"] = CHAT_TEMPLATE  # servers apply it to chat messages; recorded in the profile
    (args.out / "tokenizer_config.json").write_text(json.dumps(config, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps({"out": str(args.out), "layers": args.layers, "hidden": args.hidden, "vocab": cfg.vocab_size,
                      "params_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 1), "eos": eos}))


if __name__ == "__main__":
    main()
