"""mBART (``MBartForConditionalGeneration``; Liu et al. 2020, and mBART-50: Tang et al. 2020) as our network:
BART's tables (families/bart.py) with pre-LN.

    norm_first=True, final_norm=True          pre-LN, a LayerNorm after each stack (layer_norm)
    scale_embedding                           from config.json (mbart-large-50: true)

and the rest as BART: learned positions at row p + 2, an embedding norm, one ``shared`` matrix, a logits bias.
Only mBART-50's tokenizer (``MBart50Tokenizer``: the language code first, then the text, then ``</s>``) is read;
mBART-25's ``MBartTokenizer`` puts the code last and is refused by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...network.config import TransformerConfig
from ..family_config import Embeddings, Family, build, check_type
from .bart import EMBEDDINGS, UNK_ID, layer_names, shared_fields


def config_of(document: Mapping[str, Any]) -> TransformerConfig:
    """The ``TransformerConfig`` of an mBART config.json; CheckpointError for a setting this network lacks."""
    check_type(document, ("mbart",), "mBART")
    return build("mBART", **shared_fields(document, "mBART"), norm_first=True, final_norm=True,
                 embedding_norm=True, positional="learned", position_offset=2, unk_id=UNK_ID)


FAMILY = Family(
    model_type="mbart", name="mBART", display_name="mBART-50 (mbart)", config_of=config_of, layer_names=layer_names,
    embeddings=Embeddings(shared=EMBEDDINGS, logits_bias="final_logits_bias"),
    tokenizer_files=("tokenizer.json",), tokenizer_layout="mbart50",
    tokenizer_classes=("MBart50Tokenizer", "MBart50TokenizerFast"),
    default_languages=("en_XX", "de_DE"), examples_by_source_language=True,
)
