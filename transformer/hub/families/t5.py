"""T5 and Flan-T5 (``T5ForConditionalGeneration``) as our network.

T5 (Raffel et al. 2020, "Exploring the Limits of Transfer Learning with a Unified Text-to-Text Transformer") is
the encoder-decoder of the paper with these switches (network/config.py):

    positional="relative"      no absolute positions; a bucketed bias per head, one table per stack
                               (the first block's ``relative_attention_bias``), added in every layer
    norm="rms", norm_first     pre-norm RMSNorm (``T5LayerNorm``: no mean, no bias, eps 1e-6), and a final norm
    scale_attention=False      scores Q K^T, no 1/sqrt(d_k) (T5 folds it into the initialisation of W^Q)
    bias=False                 no biases in attention or feed-forward
    d_head=d_kv                a head's width is its own setting (Flan-T5-small: 6 heads of 64 in d_model 512)
    scale_embedding=False      embeddings as they are
    tying                      one ``shared`` matrix for both stacks ("all" v1.0, "embeddings" v1.1)

and two versions, told apart by ``feed_forward_proj`` and ``tie_word_embeddings``:

    v1.0 (t5-small, ...)       "relu", tied generator, the decoder output times d_model^-0.5 (``rescale_output``)
    v1.1, Flan-T5              "gated-gelu": (gelu_new(x wi_0) * x wi_1) wo (``gated_ff``), a generator of its
                               own (``lm_head``, ``tying="embeddings"``), no rescale

``transformers`` 5 saves a v1.1 config with ``scale_decoder_outputs: false`` and ``tie_word_embeddings: true``
(and then keeps ``lm_head`` untied when the file holds one of its own, and ties it when the file has none); both
spellings are read here. A v1.0 (tied) config whose file holds an ``lm_head`` different from the shared matrix is
refused: ``transformers`` 4 would ignore it and 5 would use it. The generator has no bias in T5: ours is zeros.
The ``<unk>`` id is T5's vocabulary's (2); a tokenizer that says otherwise replaces it. T5 reads its task from a
prefix of the input (appendix D): the examples carry the translation prefix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...checkpoints.errors import CheckpointError
from ...network.config import TransformerConfig
from ..family_config import (
    ENGLISH_EXAMPLES,
    Embeddings,
    Family,
    Names,
    attention_names,
    build,
    check_type,
    fields,
    norm_names,
    special_id,
)
from ..fields import short

NAME = "T5"
UNK_ID = 2  # "<unk>" of T5's SentencePiece vocabulary (pad 0, eos 1, unk 2)
# transformers' ACT2FN names -> ours; "gated-gelu" means gelu_new (T5Config's backward-compatible special case)
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_new", "silu": "silu", "swish": "silu"}
TRANSLATE_PREFIX = "translate English to German: "
_ATTENTION = ("q", "k", "v", "o")


def config_of(document: Mapping[str, Any]) -> TransformerConfig:
    """The ``TransformerConfig`` of a T5 config.json; CheckpointError for a setting this network lacks or a field of the
    wrong type (named)."""
    check_type(document, ("t5",), NAME)
    if document.get("is_encoder_decoder", True) is not True:
        raise CheckpointError("T5: only the encoder-decoder (is_encoder_decoder true) is a translation model")
    field = fields(document, NAME)
    projection = field.text("feed_forward_proj", "relu")
    parts = projection.split("-")
    gated = parts[0] == "gated" and len(parts) == 2
    if len(parts) > 2 or (len(parts) == 2 and not gated):
        raise CheckpointError(f"T5: feed_forward_proj {short(projection)} is neither 'ACT' nor 'gated-ACT'")
    activation = "gelu_new" if projection == "gated-gelu" else parts[-1]
    if activation not in ACTIVATIONS:
        raise CheckpointError(f"T5: the activation {short(activation)} of feed_forward_proj is not supported "
                          f"(supported: {', '.join(sorted(ACTIVATIONS))})")
    rescale = rescales(document)
    pad = special_id(document, "pad_token_id", 0, NAME)
    layers = field.integer("num_layers", 6, low=1)
    buckets = field.integer("relative_attention_num_buckets", 32, low=4)  # fewer: relative_bucket divides by 0
    distance = field.integer("relative_attention_max_distance", 128, low=1)
    if distance <= buckets // 2:  # the log-spaced buckets span from the exact ones (buckets // 2) to it
        raise CheckpointError(f"the T5 config.json: relative_attention_max_distance ({distance}) must be more than "
                          f"relative_attention_num_buckets // 2 ({buckets // 2}), the buckets of exact distances")
    return build(
        NAME, src_vocab_size=field.integer("vocab_size", low=1), tgt_vocab_size=field.integer("vocab_size", low=1),
        d_model=field.integer("d_model", 512, low=1), n_heads=field.integer("num_heads", 8, low=1),
        d_head=field.integer("d_kv", 64, low=1), n_layers=layers, n_encoder_layers=layers,
        n_decoder_layers=field.integer("num_decoder_layers", layers, low=1),
        d_ff=field.integer("d_ff", 2048, low=1),
        dropout=field.number("dropout_rate", 0.1, low=0, high=1, high_open=True),
        max_len=field.integer("n_positions", 512, low=1), pad_id=pad,
        eos_id=special_id(document, "eos_token_id", 1, NAME),
        bos_id=special_id(document, "decoder_start_token_id", pad, NAME), unk_id=UNK_ID,
        norm_first=True, activation=ACTIVATIONS[activation], tying="all" if rescale else "embeddings",
        layer_norm_eps=field.number("layer_norm_epsilon", 1e-6, low=0, high=1, low_open=True),
        positional="relative", scale_embedding=False, final_norm=True,
        relative_buckets=buckets, relative_max_distance=distance,
        norm="rms", gated_ff=gated, scale_attention=False, bias=False, rescale_output=rescale,
    )


def rescales(document: Mapping[str, Any]) -> bool:
    """Whether the decoder output is scaled by d_model^-0.5 (v1.0): ``scale_decoder_outputs`` where
    ``transformers`` 5 wrote it, else ``tie_word_embeddings`` (absent: true), as ``T5Config`` decides."""
    if "scale_decoder_outputs" in document:
        return document["scale_decoder_outputs"] is not False
    return document.get("tie_word_embeddings", True) is not False


def layer_names(config: TransformerConfig) -> Names:
    """Our parameter name -> theirs, for everything but the embeddings and the generator."""
    names: Names = {"encoder.relative_bias.table.weight":
                    "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
                    "decoder.relative_bias.table.weight":
                    "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"}
    for stack, n_layers in (("encoder", config.n_encoder_layers), ("decoder", config.n_decoder_layers)):
        for i in range(n_layers):
            ours, theirs = f"{stack}.layers.{i}", f"{stack}.block.{i}.layer"
            attentions = [("self_attn", f"{theirs}.0.SelfAttention")]
            if stack == "decoder":
                attentions.append(("cross_attn", f"{theirs}.1.EncDecAttention"))
            for j, (part, where) in enumerate(attentions):
                names |= attention_names(f"{ours}.{part}", where, _ATTENTION, bias=False)
                names |= norm_names(f"{ours}.{part}_residual.norm", f"{theirs}.{j}.layer_norm", config)
            ff = len(attentions)  # the feed-forward block's index: 1 in the encoder, 2 in the decoder
            dense = f"{theirs}.{ff}.DenseReluDense"
            if config.gated_ff:
                names |= {f"{ours}.feed_forward.w_1.weight": f"{dense}.wi_0.weight",
                          f"{ours}.feed_forward.w_3.weight": f"{dense}.wi_1.weight"}
            else:
                names[f"{ours}.feed_forward.w_1.weight"] = f"{dense}.wi.weight"
            names[f"{ours}.feed_forward.w_2.weight"] = f"{dense}.wo.weight"
            names |= norm_names(f"{ours}.feed_forward_residual.norm", f"{theirs}.{ff}.layer_norm", config)
        names |= norm_names(f"{stack}.norm", f"{stack}.final_layer_norm", config)
    return names


FAMILY = Family(
    model_type="t5", name=NAME, display_name="T5", config_of=config_of, layer_names=layer_names,
    embeddings=Embeddings(shared=("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight"),
                          head_optional=True, tied_head_must_match=True),
    tokenizer_files=("tokenizer.json",), tokenizer_layout="t5", tokenizer_classes=("T5Tokenizer", "T5TokenizerFast"),
    examples=tuple(TRANSLATE_PREFIX + text for text in ENGLISH_EXAMPLES),
)
