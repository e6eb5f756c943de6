"""BART and mBART (``BartForConditionalGeneration``, ``MBartForConditionalGeneration``; mBART-50 included) as our
network: ``config_of``, ``weights_of``, ``expected_shapes``.

BART (Lewis et al. 2020) and mBART (Liu et al. 2020; Tang et al. 2020 for mBART-50) are the encoder-decoder of
the paper with these switches (network/config.py):

    positional="learned", position_offset=2   a trained table per stack, position p at row p + 2
    embedding_norm                            a LayerNorm right after embeddings + positions (layernorm_embedding)
    BART:  norm_first=False, final_norm=False post-LN, as the paper, no norm after the stacks
    mBART: norm_first=True,  final_norm=True  pre-LN, a LayerNorm after each stack (layer_norm)
    scale_embedding                           from config.json (bart-base: false; mbart-large-50: true)
    activation                                activation_function (gelu: the exact erf GELU)
    tie_embeddings                            one ``shared`` matrix for both stacks and the generator
    generator bias                            ``final_logits_bias`` (zeros where a file leaves it out)

The legacy fairseq flags some config.json files still carry (``normalize_before``, ``add_final_layer_norm``,
``normalize_embedding``, ``static_position_embeddings``) are ignored, as ``transformers`` ignores them: the
model_type decides. The layers' names are Marian's (hub/weights.py's ``layer_names``). ``<unk>`` is 3 in both
vocabularies (``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3); a tokenizer that says otherwise replaces it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from ..network.config import TransformerConfig
from .mapping import FamilyError, Names, build, first_present, gather, get, norm_names, same, special_id, their_shapes
from .weights import layer_names as marian_layer_names

MODEL_TYPES = ("bart", "mbart")
UNK_ID = 3
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_new", "silu": "silu", "swish": "silu"}
EMBEDDINGS = ("model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight")
SAME_IN_BOTH_STACKS = (("n_heads", "encoder_attention_heads", "decoder_attention_heads"),
                       ("d_ff", "encoder_ffn_dim", "decoder_ffn_dim"))


def config_of(document: Mapping[str, Any]) -> TransformerConfig:
    """The ``TransformerConfig`` of a BART or mBART config.json; FamilyError for a setting this network lacks."""
    kind = document.get("model_type")
    if kind not in MODEL_TYPES:
        raise FamilyError(f"model_type {kind!r} is not BART or mBART ({', '.join(MODEL_TYPES)})")
    family = {"bart": "BART", "mbart": "mBART"}[kind]
    fields = shared_fields(document, family)
    pre_norm = kind == "mbart"
    return build(family, **fields, norm_first=pre_norm, final_norm=pre_norm, embedding_norm=True,
                 positional="learned", position_offset=2, unk_id=UNK_ID)


def shared_fields(document: Mapping[str, Any], family: str) -> dict[str, Any]:
    """The fields BART, mBART and M2M100 spell alike in config.json (sizes, activation, ids, tying, scale)."""
    same(document, SAME_IN_BOTH_STACKS, family)
    activation = document.get("activation_function", "gelu")
    if activation not in ACTIVATIONS:
        raise FamilyError(f"{family}: activation_function {activation!r} is not supported "
                          f"(supported: {', '.join(sorted(ACTIVATIONS))})")
    vocab = get(document, "vocab_size", family=family)
    pad = special_id(document, "pad_token_id", 1, family)
    eos = special_id(document, "eos_token_id", 2, family)
    return dict(
        src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=get(document, "d_model", family=family),
        n_heads=get(document, "encoder_attention_heads", family=family),
        n_layers=get(document, "encoder_layers", family=family),
        n_encoder_layers=get(document, "encoder_layers", family=family),
        n_decoder_layers=get(document, "decoder_layers", family=family),
        d_ff=get(document, "encoder_ffn_dim", family=family), dropout=float(document.get("dropout", 0.1)),
        max_len=get(document, "max_position_embeddings", family=family), pad_id=pad, eos_id=eos,
        bos_id=special_id(document, "decoder_start_token_id", eos, family), activation=ACTIVATIONS[activation],
        tie_embeddings=True, untied_generator=document.get("tie_word_embeddings", True) is False,
        scale_embedding=bool(document.get("scale_embedding", False)), layer_norm_eps=1e-5,
    )


def layer_names(config: TransformerConfig) -> Names:
    """Our parameter name -> theirs, for everything but the embeddings and the generator."""
    names: Names = dict(marian_layer_names(config))
    for stack, side in (("encoder", "src"), ("decoder", "tgt")):
        if config.positional == "learned":
            names[f"positional.{side}.weight"] = f"model.{stack}.embed_positions.weight"
        if config.embedding_norm:
            names |= norm_names(f"{stack}.embed_norm", f"model.{stack}.layernorm_embedding", config)
        if config.final_norm:
            names |= norm_names(f"{stack}.norm", f"model.{stack}.layer_norm", config)
    return names


def embeddings_and_generator(tensors: Mapping[str, Tensor], config: TransformerConfig, family: str,
                             bias_name: str | None) -> dict[str, Tensor]:
    """The shared matrix (under any of its names), the generator (``lm_head``, or the shared matrix when tied)
    and its bias (``bias_name``, else zeros)."""
    tied = ("lm_head.weight",) if config.generator_tied else ()
    shared = first_present(tensors, EMBEDDINGS + tied, family)
    ours = {"src_embed.weight": shared}
    if not config.generator_tied:
        ours["generator.weight"] = first_present(tensors, ("lm_head.weight",), family)
    bias = tensors.get(bias_name) if bias_name else None
    ours["generator.bias"] = bias.reshape(-1) if bias is not None else torch.zeros(config.tgt_vocab_size,
                                                                                   dtype=shared.dtype)
    return ours


def weights_of(tensors: Mapping[str, Tensor], config: TransformerConfig) -> dict[str, Tensor]:
    """``BartForConditionalGeneration``'s (or mBART's) state dict -> ours (the shared matrix once)."""
    family = "mBART" if config.norm_first else "BART"
    return gather(tensors, layer_names(config), family) | embeddings_and_generator(
        tensors, config, family, "final_logits_bias")


def embedding_shapes(config: TransformerConfig) -> dict[str, tuple[int, ...]]:
    """Their embedding, generator and logits-bias names -> shapes."""
    shapes = {name: (config.tgt_vocab_size, config.d_model) for name in (*EMBEDDINGS, "lm_head.weight")}
    shapes["final_logits_bias"] = (1, config.tgt_vocab_size)
    return shapes


def expected_shapes(config: TransformerConfig) -> dict[str, tuple[int, ...]]:
    """Their name -> shape, of every tensor ``weights_of`` may read, from the config alone."""
    return their_shapes(layer_names(config), config) | embedding_shapes(config)
