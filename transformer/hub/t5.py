"""T5 and Flan-T5 (``T5ForConditionalGeneration``) as our network: ``config_of``, ``weights_of``, ``expected_shapes``.

T5 (Raffel et al. 2020, "Exploring the Limits of Transfer Learning with a Unified Text-to-Text Transformer") is
the encoder-decoder of the paper with these switches (network/config.py):

    positional="relative"      no absolute positions; a bucketed bias per head, one table per stack
                               (the first block's ``relative_attention_bias``), added in every layer
    norm="rms", norm_first     pre-norm RMSNorm (``T5LayerNorm``: no mean, no bias, eps 1e-6), and a final norm
    scale_attention=False      scores Q K^T, no 1/sqrt(d_k) (T5 folds it into the initialisation of W^Q)
    bias=False                 no biases in attention or feed-forward
    d_head=d_kv                a head's width is its own setting (Flan-T5-small: 6 heads of 64 in d_model 512)
    scale_embedding=False      embeddings as they are
    tie_embeddings             one ``shared`` matrix for both stacks

and two versions, told apart by ``feed_forward_proj`` and ``tie_word_embeddings``:

    v1.0 (t5-small, ...)       "relu", tied generator, the decoder output times d_model^-0.5 (``rescale_output``)
    v1.1, Flan-T5              "gated-gelu": (gelu_new(x wi_0) * x wi_1) wo (``gated_ff``), a generator of its
                               own (``lm_head``, ``untied_generator``), no rescale

``transformers`` 5 saves a v1.1 config with ``scale_decoder_outputs: false`` and ``tie_word_embeddings: true``
(and then keeps ``lm_head`` untied when the file holds one of its own); both spellings are read here. The
generator has no bias in T5: ours is zeros. The ``<unk>`` id is T5's vocabulary's (2); a tokenizer that says
otherwise replaces it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from ..network.config import TransformerConfig
from .mapping import (
    FamilyError,
    Names,
    attention_names,
    build,
    first_present,
    gather,
    get,
    norm_names,
    special_id,
    their_shapes,
)

FAMILY = "T5"
MODEL_TYPES = ("t5",)
UNK_ID = 2  # "<unk>" of T5's SentencePiece vocabulary (pad 0, eos 1, unk 2)
# transformers' ACT2FN names -> ours; "gated-gelu" means gelu_new (T5Config's backward-compatible special case)
_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_new", "silu": "silu", "swish": "silu"}
_EMBEDDINGS = ("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight")
_ATTENTION = ("q", "k", "v", "o")


def config_of(document: Mapping[str, Any]) -> TransformerConfig:
    """The ``TransformerConfig`` of a T5 config.json; FamilyError for a setting this network lacks."""
    kind = document.get("model_type")
    if kind not in MODEL_TYPES:
        raise FamilyError(f"model_type {kind!r} is not T5 ({', '.join(MODEL_TYPES)})")
    if document.get("is_encoder_decoder", True) is not True:
        raise FamilyError("T5: only the encoder-decoder (is_encoder_decoder true) is a translation model")
    projection = str(document.get("feed_forward_proj", "relu"))
    parts = projection.split("-")
    gated = parts[0] == "gated" and len(parts) == 2
    if len(parts) > 2 or (len(parts) == 2 and not gated):
        raise FamilyError(f"T5: feed_forward_proj {projection!r} is neither 'ACT' nor 'gated-ACT'")
    activation = "gelu_new" if projection == "gated-gelu" else parts[-1]
    if activation not in _ACTIVATIONS:
        raise FamilyError(f"T5: the activation {activation!r} of feed_forward_proj is not supported "
                          f"(supported: {', '.join(sorted(_ACTIVATIONS))})")
    rescale = rescales(document)
    pad = special_id(document, "pad_token_id", 0, FAMILY)
    layers = get(document, "num_layers", 6, FAMILY)
    return build(
        FAMILY, src_vocab_size=get(document, "vocab_size", family=FAMILY),
        tgt_vocab_size=get(document, "vocab_size", family=FAMILY), d_model=get(document, "d_model", 512, FAMILY),
        n_heads=get(document, "num_heads", 8, FAMILY), d_head=get(document, "d_kv", 64, FAMILY),
        n_layers=layers, n_encoder_layers=layers, n_decoder_layers=document.get("num_decoder_layers") or layers,
        d_ff=get(document, "d_ff", 2048, FAMILY), dropout=float(document.get("dropout_rate", 0.1)),
        max_len=int(document.get("n_positions") or 512), pad_id=pad,
        eos_id=special_id(document, "eos_token_id", 1, FAMILY),
        bos_id=special_id(document, "decoder_start_token_id", pad, FAMILY), unk_id=UNK_ID,
        norm_first=True, activation=_ACTIVATIONS[activation], tie_embeddings=True, untied_generator=not rescale,
        layer_norm_eps=float(document.get("layer_norm_epsilon", 1e-6)), positional="relative",
        scale_embedding=False, final_norm=True,
        relative_buckets=get(document, "relative_attention_num_buckets", 32, FAMILY),
        relative_max_distance=get(document, "relative_attention_max_distance", 128, FAMILY),
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
                names |= norm_names(f"{ours}.sublayer{j + 1}.norm", f"{theirs}.{j}.layer_norm", config)
            ff = len(attentions)  # the feed-forward block's index: 1 in the encoder, 2 in the decoder
            dense = f"{theirs}.{ff}.DenseReluDense"
            if config.gated_ff:
                names |= {f"{ours}.feed_forward.w_1.weight": f"{dense}.wi_0.weight",
                          f"{ours}.feed_forward.w_3.weight": f"{dense}.wi_1.weight"}
            else:
                names[f"{ours}.feed_forward.w_1.weight"] = f"{dense}.wi.weight"
            names[f"{ours}.feed_forward.w_2.weight"] = f"{dense}.wo.weight"
            names |= norm_names(f"{ours}.sublayer{ff + 1}.norm", f"{theirs}.{ff}.layer_norm", config)
        names |= norm_names(f"{stack}.norm", f"{stack}.final_layer_norm", config)
    return names


def weights_of(tensors: Mapping[str, Tensor], config: TransformerConfig) -> dict[str, Tensor]:
    """``T5ForConditionalGeneration``'s state dict -> ours (the shared matrix once; the generator's bias zeros).

    A v1.1 config whose file holds no ``lm_head.weight`` gets the shared matrix as its generator, as
    ``transformers`` 5 ties it then; a v1.0 (tied) config whose file holds an ``lm_head`` different from the
    shared matrix is refused: ``transformers`` 4 would ignore it and 5 would use it.
    """
    shared = first_present(tensors, _EMBEDDINGS + (("lm_head.weight",) if config.generator_tied else ()), FAMILY)
    ours = gather(tensors, layer_names(config), FAMILY)
    ours["src_embed.weight"] = shared
    head = tensors.get("lm_head.weight")
    if config.generator_tied:
        if head is not None and head is not shared and not torch.equal(head, shared):
            raise FamilyError("T5: lm_head.weight differs from the shared embedding, but config.json ties them "
                              "(tie_word_embeddings); the two versions of transformers disagree on such a file")
    else:
        ours["generator.weight"] = shared if head is None else head
    ours["generator.bias"] = torch.zeros(config.tgt_vocab_size, dtype=shared.dtype)
    return ours


def expected_shapes(config: TransformerConfig) -> dict[str, tuple[int, ...]]:
    """Their name -> shape, of every tensor ``weights_of`` may read, from the config alone."""
    shapes = their_shapes(layer_names(config), config)
    for name in (*_EMBEDDINGS, "lm_head.weight"):
        shapes[name] = (config.tgt_vocab_size, config.d_model)
    return shapes
