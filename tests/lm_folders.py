"""Whole Hugging Face folders of the decoder-only families, built in the tests without a download: a tokenizer
folder of ``lm_tokenizer_folders`` and a tiny random ``transformers`` model of the family (``decoder_models``'
configs, float64, eager attention) saved into it with ``save_pretrained``, as a Hub repository holds them.

| folder | model | tokenizer |
|---|---|---|
| gpt2 | GPT-2 | GPT-2's byte-level BPE |
| smollm2 | Llama (default RoPE, tied) | GPT-2's byte-level BPE, ChatML |
| llama3 | Llama (llama3 RoPE scaling, untied) | Llama-3's, an EOS list in generation_config.json |
| llama2 | Llama (linear RoPE scaling) | SentencePiece BPE with byte fallback, Zephyr's template |
| mistral | Mistral (a sliding window) | SentencePiece BPE, [INST] |
| qwen2 | Qwen2 (q/k/v biases, tied) | Qwen's byte-level BPE, ChatML |
| qwen3 | Qwen3 (q/k norms) | Qwen's, its thinking template |
| gemma2 | Gemma-2 (soft-caps, sandwich norms, alternating window) | Gemma's SentencePiece |
| gemma3_text | Gemma-3 (a rotary base per layer type) | Gemma's, its image tokens |
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from decoder_models import randomize, reference_config
from lm_tokenizer_folders import build_folder

MODELS = {"gpt2": "gpt2", "smollm2": "qwen2", "llama3": "llama", "llama2": "llama-linear", "mistral": "mistral",
          "qwen2": "qwen2", "qwen3": "qwen3", "gemma2": "gemma2", "gemma3_text": "gemma3_text"}
NAMES = tuple(MODELS)


def build_lm_folder(name: str, root: Path, *, seed: int = 0) -> Path:
    """Write the folder ``name`` (one of ``NAMES``) under ``root``: tokenizer files, config.json, float64
    model.safetensors and generation_config.json (the tokenizer's EOS ids). Returns the folder."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    folder = build_folder(name, root)
    ids = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    generation = json.loads((folder / "generation_config.json").read_text(encoding="utf-8"))
    config = reference_config(MODELS[name])
    if name == "smollm2":  # SmolLM2 is a Llama with default RoPE and a tied head
        config = LlamaConfig(**{k: v for k, v in config.to_dict().items() if k in LlamaConfig().to_dict()
                                and k not in ("model_type", "architectures", "tie_word_embeddings")},
                             tie_word_embeddings=True)
        config._attn_implementation = "eager"
    config.vocab_size = ids["vocab_size"]
    if name != "gpt2":  # room for the chat templates' system prompts (GPT-2's learned table stays at 64)
        config.max_position_embeddings = 256
    config.bos_token_id, config.eos_token_id = ids["bos_token_id"], ids["eos_token_id"]
    config.pad_token_id = None
    with torch.random.fork_rng():
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float64)
    randomize(model, seed)
    model.generation_config.eos_token_id = generation["eos_token_id"]
    model.generation_config.pad_token_id = None
    model.save_pretrained(folder)
    (folder / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": ids["bos_token_id"], "eos_token_id": generation["eos_token_id"]}), encoding="utf-8")
    return folder


def reference_model(folder: Path):  # noqa: ANN201  (a transformers model)
    """``AutoModelForCausalLM.from_pretrained(folder)`` in float64 with eager attention, eval mode."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64, attn_implementation="eager").eval()
