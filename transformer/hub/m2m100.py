"""M2M100 and NLLB-200 (``M2M100ForConditionalGeneration``, model_type ``m2m_100``) as our network:
``config_of``, ``weights_of``, ``expected_shapes``.

M2M100 (Fan et al. 2021, "Beyond English-Centric Multilingual Machine Translation") and the dense NLLB-200
models (NLLB Team 2022) are fairseq's pre-LN Transformer:

    positional="fairseq"        the sinusoid of ``M2M100SinusoidalPositionalEmbedding``: sines then cosines,
                                frequencies 10000^(-i/(d/2 - 1)), float32, positions from pad_id + 1
    norm_first, final_norm      pre-LN, a LayerNorm after each stack (layer_norm)
    scale_embedding             from config.json (true in every released model: times sqrt(d_model))
    activation                  activation_function (relu)
    tying="all"                 one ``shared`` matrix for both stacks and the generator; no logits bias

The layers' names are BART's (and Marian's). NLLB-MoE (model_type ``nllb_moe``) has expert layers this
network lacks, and is not read here. ``<unk>`` is 3 (``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3).
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import Tensor

from ..network.config import TransformerConfig
from .bart import embedding_shapes, embeddings_and_generator, layer_names
from .family_config import M2M100, m2m100_config_of
from .mapping import gather, their_shapes

FAMILY = M2M100
config_of = m2m100_config_of  # config.json -> TransformerConfig, torch-free (family_config.py)


def weights_of(tensors: Mapping[str, Tensor], config: TransformerConfig) -> dict[str, Tensor]:
    """``M2M100ForConditionalGeneration``'s state dict -> ours (the shared matrix once; the generator's bias
    zeros: M2M100 has none). The sinusoid is not a weight: it is a function of the sizes."""
    return gather(tensors, layer_names(config), FAMILY) | embeddings_and_generator(tensors, config, FAMILY, None)


def expected_shapes(config: TransformerConfig) -> dict[str, tuple[int, ...]]:
    """Their name -> shape, of every tensor ``weights_of`` may read, from the config alone."""
    shapes = their_shapes(layer_names(config), config) | embedding_shapes(config)
    del shapes["final_logits_bias"]
    return shapes
