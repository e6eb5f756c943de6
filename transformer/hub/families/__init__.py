"""The families this package reads, one file each: ``families/<model_type>.py`` declares one ``Family``
(family_config.py) as ``FAMILY``, and nothing outside this folder names a family's ``model_type``
(tests/test_layout.py checks it). The registry is what this folder holds (``registry``), found when first asked
for: a new family is its file and its tests.

| model_type | models | tokenizer |
|---|---|---|
| marian | Helsinki-NLP/opus-mt-* | source.spm / target.spm / vocab.json (``hub.tokenizer``) |
| t5 | t5-*, google/flan-t5-* | tokenizer.json, layout ``t5`` |
| bart | facebook/bart-* | tokenizer.json, layout ``bart`` |
| mbart | facebook/mbart-large-50* (mBART-50's tokenizer) | tokenizer.json, layout ``mbart50`` |
| m2m_100 | facebook/nllb-200-* (NLLB's tokenizer) | tokenizer.json, layout ``nllb`` |
| gpt2 | openai-community/gpt2, distilgpt2 | tokenizer.json (``lm_tokenizer``: byte-level BPE) |
| llama | SmolLM2, TinyLlama, Llama-3.x | tokenizer.json (``lm_tokenizer``) |
| mistral | Mistral-7B | tokenizer.json (``lm_tokenizer``) |
| qwen2 / qwen3 | Qwen2.5-0.5B, Qwen3-0.6B | tokenizer.json (``lm_tokenizer``) |
| gemma2 / gemma3_text | Gemma-2, Gemma-3 270M / 1B | tokenizer.json (``lm_tokenizer``) |

The decoder-only families (``Family.kind == "decoder"``) open as an ``LMPipeline`` (lm_pipeline.py); what they
share is ``_decoder.py``. Anything else is refused by ``family_of`` with a ValueError naming the type and listing
these: mixture-of-experts models (mixtral, qwen3_moe, ...) say so, other decoder-only architectures (phi3,
falcon, ...) and encoder-only ones (bert, ...) say what they are, and other encoder-decoder types (pegasus,
longt5, whisper, ...) have parts our network does not. Within a family, a folder
whose tokenizer is another (mBART-25's ``MBartTokenizer``, M2M100's ``M2M100Tokenizer``) is refused by
``tokenizer_layout``. Nothing here imports torch: the app reads configs with ``config_of`` before torch.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from functools import cache
from typing import Any

from ...checkpoints.errors import CheckpointError
from ...network.config import TransformerConfig
from ..family_config import Family
from ..fields import short
from ..folder import FolderRecord

DECODER_ONLY = frozenset({"gpt_neo", "gpt_neox", "gptj", "phi", "phi3", "gemma", "gemma3", "falcon", "bloom", "opt",
                          "olmo", "olmo2", "codegen", "ctrl", "xglm", "mpt", "starcoder2", "persimmon", "stablelm",
                          "cohere", "granite", "internlm2", "exaone", "smollm3", "ministral"})
MIXTURE_OF_EXPERTS = frozenset({"mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3", "olmoe",
                                "granitemoe", "phimoe", "jamba", "dbrx", "jetmoe", "minimax", "llama4", "gpt_oss"})
ENCODER_ONLY = frozenset({"bert", "roberta", "xlm-roberta", "distilbert", "albert", "electra", "deberta",
                          "deberta-v2", "camembert", "xlm", "mpnet", "modernbert", "ernie", "layoutlm"})
ORDER = ("marian", "t5", "bart", "mbart", "m2m_100", "gpt2", "llama", "mistral", "qwen2", "qwen3", "gemma2",
         "gemma3_text")  # the order messages list them in; new families follow
TOKENIZER_JSON = "tokenizer.json"


@cache
def registry() -> dict[str, Family]:
    """model_type -> its ``Family``: the ``FAMILY`` of every module of this package (a module whose name starts
    with ``_`` is not a family)."""
    found: dict[str, Family] = {}
    for module in pkgutil.iter_modules(__path__):
        if module.name.startswith("_"):
            continue
        family = getattr(importlib.import_module(f"{__name__}.{module.name}"), "FAMILY", None)
        if not isinstance(family, Family):
            raise TypeError(f"{__name__}.{module.name} declares no FAMILY")
        if family.model_type in found:
            raise TypeError(f"two families declare model_type {family.model_type!r}")
        found[family.model_type] = family
    rank = {name: i for i, name in enumerate(ORDER)}
    return dict(sorted(found.items(), key=lambda item: (rank.get(item[0], len(rank)), item[0])))


def supported() -> tuple[str, ...]:
    """The model_types this package reads ("marian", "t5", "bart", "mbart", "m2m_100", ...)."""
    return tuple(registry())


def family_of(model_type: str | None) -> Family:
    """The family of a config.json's ``model_type``; ValueError naming the type (and what kind of model it is,
    where known) and listing the supported families."""
    families = registry()
    if model_type in families:
        return families[model_type]
    if model_type in MIXTURE_OF_EXPERTS:
        what = ("a mixture-of-experts model: its feed-forward layers are experts chosen by a router, which this "
                "package's network does not have")
    elif model_type in DECODER_ONLY:
        what = "a decoder-only architecture whose parts this package's network does not have"
    elif model_type in ENCODER_ONLY:
        what = "an encoder-only model, which does not generate text"
    else:
        what = "an architecture whose parts this package's encoder-decoder does not have"
    raise ValueError(f"model_type {model_type!r} is not supported: it is {what}; this package reads "
                     f"{', '.join(families)}")


def family_or_none(model_type: str | None) -> Family | None:
    """The family of ``model_type``, or None where no family reads it."""
    return registry().get(model_type) if isinstance(model_type, str) else None


def display_name(model_type: str) -> str:
    """A family in words, as the app names it beside a folder's name ("NLLB (m2m_100)"; an unknown type by its own
    name)."""
    family = family_or_none(model_type)
    return family.display_name if family else model_type


def config_of(document: Mapping[str, Any]) -> TransformerConfig:
    """The ``TransformerConfig`` of any family's config.json object, by its ``model_type``; a CheckpointError naming the
    type when no family reads it (``family_of`` says more on why), or the setting that does not map."""
    kind = document.get("model_type")
    family = family_or_none(kind)
    if family is None:
        raise CheckpointError(f"model_type {short(kind)} is not one of {', '.join(registry())}")
    return family.config_of(document)


def tokenizer_layout(family: Family, record: FolderRecord) -> str | None:
    """The ``fast_tokenizer`` layout of the folder ``record`` holds (None for Marian's own files); ValueError when
    its tokenizer_config.json names a tokenizer class the family's layout does not reproduce, or tokenizer.json is
    missing."""
    if family.tokenizer_layout is None:
        return None
    declared = record.tokenizer_config.get("tokenizer_class")
    if isinstance(declared, str) and declared not in family.tokenizer_classes:
        raise ValueError(f"its tokenizer is {declared}, which this package does not read for model_type "
                         f"{family.model_type!r} (it reads {', '.join(family.tokenizer_classes[::2])})")
    if not (record.path / TOKENIZER_JSON).is_file():
        raise ValueError(f"a {family.model_type} folder needs {TOKENIZER_JSON} (with transformers installed, "
                         "`AutoTokenizer.from_pretrained(folder).save_pretrained(folder)` writes it)")
    return family.tokenizer_layout
