"""Llama (``LlamaForCausalLM``; Touvron et al. 2023, Llama 2; Llama 3.x; SmolLM2 and TinyLlama share it) as our
decoder-only network: pre-norm RMSNorm, SwiGLU feed-forward, rotary positions (default, linear or llama3 scaling),
grouped-query attention, no biases; the generator tied to the embedding where ``tie_word_embeddings`` (SmolLM2,
Llama-3.2) says so."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...network.config import TransformerConfig
from ..family_config import Family, check_type
from ._decoder import LLAMA_EMBEDDINGS, LM_EXAMPLES, llama_like, llama_names


def config_of(document: Mapping[str, Any]) -> TransformerConfig:
    """The ``TransformerConfig`` of a Llama config.json."""
    check_type(document, ("llama",), "Llama")
    return llama_like(document, "Llama", activation="silu", hidden_act=("silu",), default_tie=False,
                      norm="rms_float32")


FAMILY = Family(model_type="llama", name="Llama", display_name="Llama", config_of=config_of,
                layer_names=llama_names, embeddings=LLAMA_EMBEDDINGS, tokenizer_files=("tokenizer.json",),
                kind="decoder", examples=LM_EXAMPLES)
