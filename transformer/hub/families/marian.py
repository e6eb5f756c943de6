"""Marian (``MarianMTModel``: Helsinki-NLP/opus-mt-*, Junczys-Dowmunt et al. 2018) as our network.

The mapping of config.json, field by field (``transformers``' name -> ours):

    vocab_size -> src_vocab_size;  decoder_vocab_size (separate vocabularies) or vocab_size -> tgt_vocab_size
    d_model -> d_model;  encoder_layers / decoder_layers -> n_encoder_layers / n_decoder_layers
    encoder_attention_heads (= decoder_attention_heads) -> n_heads;  encoder_ffn_dim (= decoder_ffn_dim) -> d_ff
    max_position_embeddings -> max_len;  activation_function -> activation ("swish" is "silu")
    scale_embedding -> scale_embedding;  share_encoder_decoder_embeddings -> tying "all"
    tie_word_embeddings (separate vocabularies) -> tying "generator"
    pad_token_id / eos_token_id / decoder_start_token_id -> pad_id / eos_id / bos_id

and what every Marian model has: post-LN, no final LayerNorm, Marian's sinusoid layout (sines then cosines: not a
weight, a function of the sizes), LayerNorm eps 1e-5, a logits bias (``final_logits_bias``). The ``<unk>`` id is
the vocabulary's (vocab.json), 1 in every opus-mt model; the loader replaces the placeholder with the tokenizer's.
The layers' names (``layer_names``) are fairseq's, which BART, mBART and M2M100 keep too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...checkpoints.errors import CheckpointError
from ...network.config import TransformerConfig
from ..family_config import (
    Embeddings,
    Family,
    Names,
    attention_names,
    build,
    check_type,
    fields,
    norm_names,
)
from ..fields import short

UNK_ID = 1  # "<unk>" of every opus-mt vocabulary ("</s>" 0, "<unk>" 1, ..., "<pad>" last)
# transformers' activation names -> ours (ACT2FN: "swish" and "silu" are the same function)
ACTIVATIONS = {"swish": "silu", "silu": "silu", "relu": "relu", "gelu": "gelu"}
SAME_IN_BOTH_STACKS = (("n_heads", "encoder_attention_heads", "decoder_attention_heads"),
                       ("d_ff", "encoder_ffn_dim", "decoder_ffn_dim"))
_ATTENTION = ("q_proj", "k_proj", "v_proj", "out_proj")
_NORMS = {"encoder": ("self_attn_layer_norm", "final_layer_norm"),
          "decoder": ("self_attn_layer_norm", "encoder_attn_layer_norm", "final_layer_norm")}
# each norm's sub-layer, as network/layers.py's SUBLAYERS names them (that module imports torch; this one must not)
_SUBLAYERS = {"encoder": ("self_attn", "feed_forward"), "decoder": ("self_attn", "cross_attn", "feed_forward")}


def config_of(document: Mapping[str, Any]) -> TransformerConfig:
    """The ``TransformerConfig`` of a Marian config.json; CheckpointError for a setting our network does not have or a
    field of the wrong type (named)."""
    check_type(document, ("marian",), "Marian")
    field = fields(document, "Marian")
    field.same(SAME_IN_BOTH_STACKS)
    activation = field.text("activation_function", "gelu")
    if activation not in ACTIVATIONS:
        raise CheckpointError(f"Marian: activation_function {short(activation)} is not supported "
                          f"(supported: {', '.join(sorted(ACTIVATIONS))})")
    shared = field.flag("share_encoder_decoder_embeddings", True)
    src_vocab = field.integer("vocab_size", low=1)
    tgt_vocab = src_vocab if shared else field.integer("decoder_vocab_size", src_vocab, low=1)
    pad_id = field.integer("pad_token_id")
    return build(
        "Marian", src_vocab_size=src_vocab, tgt_vocab_size=tgt_vocab, d_model=field.integer("d_model", low=1),
        n_heads=field.integer("encoder_attention_heads", low=1), n_layers=field.integer("encoder_layers", low=1),
        n_encoder_layers=field.integer("encoder_layers", low=1),
        n_decoder_layers=field.integer("decoder_layers", low=1), d_ff=field.integer("encoder_ffn_dim", low=1),
        dropout=field.number("dropout", 0.1, low=0, high=1, high_open=True),
        max_len=field.integer("max_position_embeddings", low=1), pad_id=pad_id,
        eos_id=field.integer("eos_token_id"), bos_id=field.integer("decoder_start_token_id", pad_id),
        unk_id=UNK_ID, norm_first=False, activation=ACTIVATIONS[activation],
        tying="all" if shared else "generator" if field.flag("tie_word_embeddings", True) else "none",
        positional="marian", scale_embedding=field.flag("scale_embedding", False), final_norm=False,
    )


def layer_names(config: TransformerConfig) -> Names:
    """Our parameter name -> theirs for every layer (fairseq's names: BART's, mBART's and M2M100's too)."""
    names: Names = {}
    for stack, n_layers in (("encoder", config.n_encoder_layers), ("decoder", config.n_decoder_layers)):
        for i in range(n_layers):
            ours, theirs = f"{stack}.layers.{i}", f"model.{stack}.layers.{i}"
            names |= attention_names(f"{ours}.self_attn", f"{theirs}.self_attn", _ATTENTION, bias=True)
            if stack == "decoder":
                names |= attention_names(f"{ours}.cross_attn", f"{theirs}.encoder_attn", _ATTENTION, bias=True)
            for kind in ("weight", "bias"):
                names[f"{ours}.feed_forward.w_1.{kind}"] = f"{theirs}.fc1.{kind}"
                names[f"{ours}.feed_forward.w_2.{kind}"] = f"{theirs}.fc2.{kind}"
            for sublayer, norm in zip(_SUBLAYERS[stack], _NORMS[stack], strict=True):
                names |= norm_names(f"{ours}.{sublayer}_residual.norm", f"{theirs}.{norm}", config)
    return names


EMBEDDINGS = ("model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight")

FAMILY = Family(
    model_type="marian", name="Marian", display_name="Marian", config_of=config_of, layer_names=layer_names,
    embeddings=Embeddings(shared=EMBEDDINGS, source=("model.encoder.embed_tokens.weight",),
                          target=("model.decoder.embed_tokens.weight",), logits_bias="final_logits_bias"),
    tokenizer_files=("source.spm", "target.spm", "vocab.json"), optional_tokenizer_files=("target_vocab.json",),
    examples_folder_prefix="opus-mt-en-",  # opus-mt-en-de reads English; opus-mt-de-en German
)
