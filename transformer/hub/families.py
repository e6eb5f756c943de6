"""The one dispatch point from a Hugging Face folder's ``model_type`` to what reads it: which families open, and how.

A family is an encoder-decoder translation model type of ``transformers`` that maps onto our ``Transformer``:

| model_type | models | tokenizer (``fast_tokenizer`` layout) |
|---|---|---|
| marian | Helsinki-NLP/opus-mt-* | source.spm / target.spm / vocab.json (``hub.tokenizer``) |
| t5 | t5-*, google/flan-t5-* | tokenizer.json, ``t5`` |
| bart | facebook/bart-* | tokenizer.json, ``bart`` |
| mbart | facebook/mbart-large-50* (mBART-50's tokenizer) | tokenizer.json, ``mbart50`` |
| m2m_100 | facebook/nllb-200-* (NLLB's tokenizer) | tokenizer.json, ``nllb`` |

Anything else is refused by ``family_of`` with a ValueError naming the type and listing these: decoder-only
models (gpt2, llama, ...) and encoder-only ones (bert, ...) cannot translate with an encoder-decoder, and other
encoder-decoder types (pegasus, longt5, whisper, ...) have parts our network does not. Within a family, a folder
whose tokenizer is another (mBART-25's ``MBartTokenizer``, M2M100's ``M2M100Tokenizer``) is refused by
``tokenizer_layout``.

The network side of a family is three functions, which ``load.load_hf`` calls in this order:

- ``config_of(document) -> TransformerConfig``: config.json's object -> our config (special ids from the
  document: ``pad_id``, ``eos_id``, ``bos_id`` = ``decoder_start_token_id``; ``unk_id`` is a placeholder the loader
  replaces with the tokenizer's by ``dataclasses.replace``). A ValueError names what does not map.
- ``expected_shapes(config) -> {their tensor name: shape}``: every tensor ``weights_of`` reads, from the config
  alone; the weight files are checked against it (safetensors headers before any tensor is read) and only these
  names are read.
- ``weights_of(tensors, config) -> state dict``: their tensors (by their names) -> ours, as
  ``checkpoint.weights_of`` stores them (a tied matrix once); a ValueError names the missing ones.

Every family of the table has its mapping (``config.py`` and ``weights.py`` for Marian, ``t5.py``, ``bart.py``
for BART and mBART, ``m2m100.py``), its ``config_of`` in ``family_config.py`` (torch-free: the app draws the
architecture from config.json before torch is imported); adding a family is one more entry in ``FAMILIES`` and
its reader in ``family_config.CONFIG_READERS``: nothing else dispatches on ``model_type``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import Tensor

from ..network.config import TransformerConfig
from . import bart, m2m100, t5
from .family_config import CONFIG_READERS
from .fast_tokenizer import TOKENIZER_CONFIG, TOKENIZER_JSON, read_json
from .weights import expected_marian_shapes, to_ours

ConfigOf = Callable[[dict[str, Any]], TransformerConfig]
WeightsOf = Callable[[dict[str, Tensor], TransformerConfig], dict[str, Tensor]]
ExpectedShapes = Callable[[TransformerConfig], dict[str, tuple[int, ...]]]

DECODER_ONLY = frozenset({"gpt2", "gpt_neo", "gpt_neox", "gptj", "llama", "mistral", "mixtral", "qwen2", "qwen3",
                          "phi", "phi3", "gemma", "gemma2", "gemma3", "falcon", "bloom", "opt", "olmo", "codegen",
                          "ctrl", "xglm", "mpt", "starcoder2", "persimmon", "stablelm"})
ENCODER_ONLY = frozenset({"bert", "roberta", "xlm-roberta", "distilbert", "albert", "electra", "deberta",
                          "deberta-v2", "camembert", "xlm", "mpnet", "modernbert", "ernie", "layoutlm"})


@dataclass(frozen=True)
class Family:
    """What reads one ``model_type``: its network mapping (see the module docstring) and its tokenizer."""

    name: str
    config_of: ConfigOf
    weights_of: WeightsOf
    expected_shapes: ExpectedShapes
    tokenizer_layout: str | None  # a ``fast_tokenizer`` layout; None: Marian's own files
    tokenizer_classes: tuple[str, ...] = ()  # tokenizer_config.json's tokenizer_class values this family reads

# The config.json readers come from family_config.py (no torch: the app draws its diagram with them before torch).
FAMILIES: dict[str, Family] = {
    "marian": Family("marian", CONFIG_READERS["marian"], to_ours, expected_marian_shapes, None),
    "t5": Family("t5", CONFIG_READERS["t5"], t5.weights_of, t5.expected_shapes, "t5",
                 ("T5Tokenizer", "T5TokenizerFast")),
    "bart": Family("bart", CONFIG_READERS["bart"], bart.weights_of, bart.expected_shapes, "bart",
                   ("BartTokenizer", "BartTokenizerFast", "RobertaTokenizer", "RobertaTokenizerFast")),
    "mbart": Family("mbart", CONFIG_READERS["mbart"], bart.weights_of, bart.expected_shapes, "mbart50",
                    ("MBart50Tokenizer", "MBart50TokenizerFast")),
    "m2m_100": Family("m2m_100", CONFIG_READERS["m2m_100"], m2m100.weights_of, m2m100.expected_shapes, "nllb",
                      ("NllbTokenizer", "NllbTokenizerFast")),
}
SUPPORTED = tuple(FAMILIES)  # "marian", "t5", "bart", "mbart", "m2m_100"


def family_of(model_type: str | None) -> Family:
    """The family of a config.json's ``model_type``; ValueError naming the type (and what kind of model it is,
    where known) and listing the supported families."""
    if model_type in FAMILIES:
        return FAMILIES[model_type]
    if model_type in DECODER_ONLY:
        what = "a decoder-only language model, not an encoder-decoder translation model"
    elif model_type in ENCODER_ONLY:
        what = "an encoder-only model, which does not generate text"
    else:
        what = "an architecture whose parts this package's encoder-decoder does not have"
    raise ValueError(f"model_type {model_type!r} is not supported: it is {what}; this package reads the "
                     f"encoder-decoder families {', '.join(SUPPORTED)}")


def tokenizer_layout(family: Family, folder: str | Path) -> str | None:
    """The ``fast_tokenizer`` layout of ``folder`` (None for Marian); ValueError when tokenizer_config.json names
    a tokenizer class the family's layout does not reproduce, or tokenizer.json is missing."""
    if family.tokenizer_layout is None:
        return None
    folder = Path(folder)
    declared = read_json(folder / TOKENIZER_CONFIG).get("tokenizer_class")
    if isinstance(declared, str) and declared not in family.tokenizer_classes:
        raise ValueError(f"its tokenizer is {declared}, which this package does not read for model_type "
                         f"{family.name!r} (it reads {', '.join(family.tokenizer_classes[::2])})")
    if not (folder / TOKENIZER_JSON).is_file():
        raise ValueError(f"a {family.name} folder needs {TOKENIZER_JSON} (with transformers installed, "
                         "`AutoTokenizer.from_pretrained(folder).save_pretrained(folder)` writes it)")
    return family.tokenizer_layout
