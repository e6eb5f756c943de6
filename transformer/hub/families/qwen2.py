"""Qwen2 and Qwen2.5 (``Qwen2ForCausalLM``; Yang et al. 2024): Llama's layout with biases on W^Q, W^K, W^V only;
a sliding window only where ``use_sliding_window`` is set (from layer ``max_window_layers`` on)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...network.config import TransformerConfig
from ..family_config import Family, check_type, fields
from ._decoder import LLAMA_EMBEDDINGS, LM_EXAMPLES, layer_types, llama_like, llama_names


def qwen_window(document: Mapping[str, Any], family: str) -> dict[str, Any]:
    """Qwen's sliding window: off unless ``use_sliding_window``, then on layers from ``max_window_layers``."""
    field = fields(document, family)
    if not field.flag("use_sliding_window", False):
        return {}
    window = field.integer("sliding_window", low=1)
    n_layers = field.integer("num_hidden_layers", low=1)
    first = field.integer("max_window_layers", 28, low=0)
    default = ["sliding_attention" if i >= first else "full_attention" for i in range(n_layers)]
    types = layer_types(document, family, n_layers, default)
    return {"sliding_window": window, "layer_types": types} if types else {}


def config_of(document: Mapping[str, Any]) -> TransformerConfig:
    """The ``TransformerConfig`` of a Qwen2 config.json."""
    check_type(document, ("qwen2",), "Qwen2")
    return llama_like(document, "Qwen2", activation="silu", hidden_act=("silu",), default_tie=False,
                      norm="rms_float32", qkv_bias=True, **qwen_window(document, "Qwen2"))


FAMILY = Family(model_type="qwen2", name="Qwen2", display_name="Qwen2", config_of=config_of,
                layer_names=llama_names, embeddings=LLAMA_EMBEDDINGS, tokenizer_files=("tokenizer.json",),
                kind="decoder", examples=LM_EXAMPLES,
                registered_tokenizer="Qwen2Tokenizer")
