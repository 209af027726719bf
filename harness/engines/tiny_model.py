"""A tiny Llama model directory made locally, for vLLM's CPU build (docs/hosts.md#vllm-cpu-build).

No weights are shipped: vLLM loads it with ``--load-format dummy``. The directory holds a
``config.json`` for a 2-layer Llama (hidden 128, vocab 512) and the committed 512-token BPE
tokenizer (``corpora/tokenizers/tiny-bpe-512``), so token-ID prompts from ``corpora/tiny-code-128``
fit its vocabulary.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
TOKENIZER_DIR = REPO_ROOT / "corpora" / "tokenizers" / "tiny-bpe-512"

TINY_LLAMA_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "head_dim": 32,
    "vocab_size": 512,
    "max_position_embeddings": 1024,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
}


def make_tiny_llama(directory: Path) -> Path:
    """Write the model directory (config, generation config, tokenizer files); returns it."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(TINY_LLAMA_CONFIG, indent=1) + "\n")
    (directory / "generation_config.json").write_text(
        json.dumps({"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}) + "\n")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(TOKENIZER_DIR / name, directory / name)
    return directory


def vllm_cpu_args(max_model_len: int = 1024) -> list[str]:
    """The launch flags that run the tiny model on vLLM's CPU build (docs/hosts.md#vllm-cpu-build)."""
    return ["--load-format", "dummy", "--dtype", "float32", "--enforce-eager", "--max-model-len",
            str(max_model_len), "--enable-prefix-caching", "--enable-prompt-tokens-details"]


VLLM_CPU_ENV = {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "TOKENIZERS_PARALLELISM": "false"}
