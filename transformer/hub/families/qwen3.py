"""Qwen3 (``Qwen3ForCausalLM``; Qwen team 2025): Llama's layout with an RMSNorm of each head's queries and keys
before the rotation (q/k norm), no biases; Qwen2's optional sliding window."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...network.config import TransformerConfig
from ..family_config import Family, check_type
from ._decoder import LLAMA_EMBEDDINGS, LM_EXAMPLES, llama_like, llama_names
from .qwen2 import qwen_window


def config_of(document: Mapping[str, Any]) -> TransformerConfig:
    """The ``TransformerConfig`` of a Qwen3 config.json."""
    check_type(document, ("qwen3",), "Qwen3")
    return llama_like(document, "Qwen3", activation="silu", hidden_act=("silu",), default_tie=False,
                      norm="rms_float32", qk_norm=True, **qwen_window(document, "Qwen3"))


FAMILY = Family(model_type="qwen3", name="Qwen3", display_name="Qwen3", config_of=config_of,
                layer_names=llama_names, embeddings=LLAMA_EMBEDDINGS, tokenizer_files=("tokenizer.json",),
                kind="decoder", examples=LM_EXAMPLES,
                registered_tokenizer="Qwen2Tokenizer")
