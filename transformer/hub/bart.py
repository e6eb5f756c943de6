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
    tying="all"                               one ``shared`` matrix for both stacks and the generator
    generator bias                            ``final_logits_bias`` (zeros where a file leaves it out)

The legacy fairseq flags some config.json files still carry (``normalize_before``, ``add_final_layer_norm``,
``normalize_embedding``, ``static_position_embeddings``) are ignored, as ``transformers`` ignores them: the
model_type decides. The layers' names are Marian's (hub/weights.py's ``layer_names``). ``<unk>`` is 3 in both
vocabularies (``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3); a tokenizer that says otherwise replaces it.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

from ..network.config import TransformerConfig
from .family_config import bart_config_of
from .mapping import Names, first_present, gather, norm_names, their_shapes
from .weights import layer_names as marian_layer_names

EMBEDDINGS = ("model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight")
config_of = bart_config_of  # config.json -> TransformerConfig, torch-free (family_config.py)


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
