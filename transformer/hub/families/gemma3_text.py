"""Gemma-3's text models (``Gemma3ForCausalLM``, model_type ``gemma3_text``: Gemma-3 270M and 1B; Gemma Team
2025): Gemma-2's layout with q/k norms instead of soft-capping, five sliding layers to one full one, and a rotary
base per layer type (the sliding layers' ``rope_local_base_freq``, 10 000; the full layers' 1 000 000, with their
scaling)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...network.config import TransformerConfig
from ..family_config import Family, check_type
from ._decoder import LLAMA_EMBEDDINGS, LM_EXAMPLES, llama_like, llama_names
from .gemma2 import gemma_switches


def config_of(document: Mapping[str, Any]) -> TransformerConfig:
    """The ``TransformerConfig`` of a Gemma-3 text config.json."""
    check_type(document, ("gemma3_text",), "Gemma-3")
    switches = gemma_switches(document, "Gemma-3", 6, (None, None))
    rope = {} if "rope_parameters" in document or "rope_theta" in document else {"rope_theta": 1_000_000.0}
    document = {**document, **rope}
    if "rope_local_base_freq" not in document and not isinstance(document.get("rope_parameters"), Mapping):
        document["rope_local_base_freq"] = 10_000.0
    return llama_like(document, "Gemma-3", activation="gelu_tanh", hidden_act=("gelu_pytorch_tanh",),
                      default_tie=True, qk_norm=True, **switches)


FAMILY = Family(model_type="gemma3_text", name="Gemma-3", display_name="Gemma-3", config_of=config_of,
                layer_names=llama_names, embeddings=LLAMA_EMBEDDINGS, tokenizer_files=("tokenizer.json",),
                kind="decoder", examples=LM_EXAMPLES,
                registered_tokenizer="GemmaTokenizer")
