"""Gemma-2 (``Gemma2ForCausalLM``; Gemma Team 2024): Llama's layout with RMSNorm as (1 + w), a norm after each
sub-layer too (sandwich), GeGLU (tanh GELU), embeddings times sqrt(d_model), scores scaled by
``query_pre_attn_scalar``^-1/2, soft-capped attention scores and logits, and a sliding window on alternate
layers (the first of each pair)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...checkpoints.errors import CheckpointError
from ...network.config import TransformerConfig
from ..family_config import Family, check_type, fields
from ..fields import Fields
from ._decoder import LLAMA_EMBEDDINGS, LM_EXAMPLES, layer_types, llama_like, llama_names


def gemma_switches(document: Mapping[str, Any], family: str, pattern: int, softcaps: tuple[float | None, ...]
                   ) -> dict[str, Any]:
    """What Gemma-2 and -3 share: norms, scale, window (one full layer in each ``pattern``), soft-caps."""
    field = fields(document, family)
    if field.flag("use_bidirectional_attention", False):
        raise CheckpointError(f"the {family} config.json sets use_bidirectional_attention: not a causal LM")
    n_layers = field.integer("num_hidden_layers", low=1)
    pattern = field.integer("sliding_window_pattern", pattern, low=1)
    default = ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n_layers)]
    types = layer_types(document, family, n_layers, default)
    caps = {}
    for name, ours, default_cap in (("attn_logit_softcapping", "attn_softcap", softcaps[0]),
                                    ("final_logit_softcapping", "logit_softcap", softcaps[1])):
        value = document.get(name, default_cap)
        caps[ours] = None if value is None else Fields({name: value}, family=family, error=CheckpointError
                                                       ).number(name, low=0, high=1e6, low_open=True)
    return dict(norm="rms_unit_offset", sandwich_norm=True, scale_embedding=True, embedding_scale_rounded=True,
                query_pre_attn_scalar=field.number("query_pre_attn_scalar", 256, low=0, high=1e9, low_open=True),
                sliding_window=field.integer("sliding_window", 4096, low=1) if types else None, layer_types=types,
                **caps)


def config_of(document: Mapping[str, Any]) -> TransformerConfig:
    """The ``TransformerConfig`` of a Gemma-2 config.json."""
    check_type(document, ("gemma2",), "Gemma-2")
    return llama_like(document, "Gemma-2", activation="gelu_tanh", hidden_act=("gelu_pytorch_tanh",),
                      default_tie=True, **gemma_switches(document, "Gemma-2", 2, (50.0, 30.0)))


FAMILY = Family(model_type="gemma2", name="Gemma-2", display_name="Gemma-2", config_of=config_of,
                layer_names=llama_names, embeddings=LLAMA_EMBEDDINGS, tokenizer_files=("tokenizer.json",),
                kind="decoder", examples=LM_EXAMPLES,
                registered_tokenizer="GemmaTokenizer")
