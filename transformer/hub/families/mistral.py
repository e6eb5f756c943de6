"""Mistral (``MistralForCausalLM``; Jiang et al. 2023): Llama's layout with a sliding window on every layer
(``sliding_window``; null in v0.2 and later: every key seen)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...network.config import TransformerConfig
from ..family_config import Family, check_type, fields
from ._decoder import LLAMA_EMBEDDINGS, LM_EXAMPLES, llama_like, llama_names


def config_of(document: Mapping[str, Any]) -> TransformerConfig:
    """The ``TransformerConfig`` of a Mistral config.json."""
    check_type(document, ("mistral",), "Mistral")
    window = fields(document, "Mistral").integer("sliding_window", 0, low=0) or None
    return llama_like(document, "Mistral", activation="silu", hidden_act=("silu",), default_tie=False,
                      norm="rms_float32", sliding_window=window)


FAMILY = Family(model_type="mistral", name="Mistral", display_name="Mistral", config_of=config_of,
                layer_names=llama_names, embeddings=LLAMA_EMBEDDINGS, tokenizer_files=("tokenizer.json",),
                kind="decoder", examples=LM_EXAMPLES,
                registered_tokenizer="TokenizersBackend")
