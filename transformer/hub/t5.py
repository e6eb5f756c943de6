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
    tying                      one ``shared`` matrix for both stacks ("all" v1.0, "embeddings" v1.1)

and two versions, told apart by ``feed_forward_proj`` and ``tie_word_embeddings``:

    v1.0 (t5-small, ...)       "relu", tied generator, the decoder output times d_model^-0.5 (``rescale_output``)
    v1.1, Flan-T5              "gated-gelu": (gelu_new(x wi_0) * x wi_1) wo (``gated_ff``), a generator of its
                               own (``lm_head``, ``tying="embeddings"``), no rescale

``transformers`` 5 saves a v1.1 config with ``scale_decoder_outputs: false`` and ``tie_word_embeddings: true``
(and then keeps ``lm_head`` untied when the file holds one of its own); both spellings are read here. The
generator has no bias in T5: ours is zeros. The ``<unk>`` id is T5's vocabulary's (2); a tokenizer that says
otherwise replaces it.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

from ..network.config import TransformerConfig
from .family_config import T5, FamilyError, t5_config_of
from .mapping import Names, attention_names, first_present, gather, norm_names, their_shapes

FAMILY = T5
_EMBEDDINGS = ("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight")
_ATTENTION = ("q", "k", "v", "o")
config_of = t5_config_of  # config.json -> TransformerConfig, torch-free (family_config.py)


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
