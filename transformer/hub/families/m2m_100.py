"""M2M100 and NLLB-200 (``M2M100ForConditionalGeneration``, model_type ``m2m_100``) as our network.

M2M100 (Fan et al. 2021, "Beyond English-Centric Multilingual Machine Translation") and the dense NLLB-200
models (NLLB Team 2022) are fairseq's pre-LN Transformer:

    positional="fairseq"        the sinusoid of ``M2M100SinusoidalPositionalEmbedding``: sines then cosines,
                                frequencies 10000^(-i/(d/2 - 1)), float32, positions from pad_id + 1 (not a
                                weight: a function of the sizes)
    norm_first, final_norm      pre-LN, a LayerNorm after each stack (layer_norm)
    scale_embedding             from config.json (true in every released model: times sqrt(d_model))
    activation                  activation_function (relu)
    tying="all"                 one ``shared`` matrix for both stacks and the generator; no logits bias

The layers' names are BART's (and Marian's). NLLB-MoE (model_type ``nllb_moe``) has expert layers this
network lacks, and is not read here. ``<unk>`` is 3 (``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3). Only
NLLB's tokenizer (``NllbTokenizer``) is read; M2M100's own ``M2M100Tokenizer`` is refused by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...network.config import TransformerConfig
from ..family_config import Embeddings, Family, build, check_type
from .bart import EMBEDDINGS, UNK_ID, layer_names, shared_fields

NAME = "M2M100"
DEFAULTS = {"activation_function": "relu", "scale_embedding": True}  # M2M100Config's own defaults


def config_of(document: Mapping[str, Any]) -> TransformerConfig:
    """The ``TransformerConfig`` of an M2M100 / NLLB config.json; CheckpointError for a setting this network lacks."""
    check_type(document, ("m2m_100",), "M2M100 / NLLB")
    return build(NAME, **shared_fields({**DEFAULTS, **document}, NAME), norm_first=True, final_norm=True,
                 embedding_norm=False, positional="fairseq", unk_id=UNK_ID)


FAMILY = Family(
    model_type="m2m_100", name=NAME, display_name="NLLB (m2m_100)", config_of=config_of, layer_names=layer_names,
    embeddings=Embeddings(shared=EMBEDDINGS), tokenizer_files=("tokenizer.json",), tokenizer_layout="nllb",
    tokenizer_classes=("NllbTokenizer", "NllbTokenizerFast"),
    default_languages=("eng_Latn", "deu_Latn"), examples_by_source_language=True,
)
