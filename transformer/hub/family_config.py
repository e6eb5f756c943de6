"""What a family is, without torch: the ``Family`` record each file of ``hub/families/`` declares, and the helpers
its config reader uses (``fields``, ``build``, ``special_id``, ``CheckpointError``).

A family is data: its config.json reader (config.json's object -> ``TransformerConfig``), its weight-name tables
(``layer_names``: our parameter name -> theirs; ``Embeddings``: where the shared matrix, the generator and the
logits bias may be stored), its tokenizer (a ``fast_tokenizer`` layout and the classes it reproduces, or Marian's
own files), and what the app shows of it (its display name, its default languages, its example inputs). One
machinery reads every family: ``mapping.py`` turns the tables into the state dict and the shapes to check
(``mapping.weights_of(family, tensors, config)``, ``mapping.expected_shapes(family, config)``), and
``families.family_of`` finds the family of a ``model_type``.

Nothing here imports torch: the Model page draws its architecture diagram from config.json with a family's
``config_of`` before torch is imported (ui/sections/architecture.py: torch alone takes about 1.5 s;
tests/test_app_family_pages.py checks it in a fresh interpreter).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..checkpoints.errors import CheckpointError
from ..network.config import TransformerConfig
from .fields import Fields, short

Names = dict[str, str | tuple[str, ...]]  # our name -> theirs (a tuple: parts concatenated in order, q k v)
ConfigOf = Callable[[Mapping[str, Any]], TransformerConfig]
LayerNames = Callable[[TransformerConfig], Names]

# Inputs for a model that reads English (the app offers them; no expected output is claimed).
ENGLISH_EXAMPLES = ("The cat sleeps.", "I would like a cup of coffee, please.", "Where is the train station?",
                    "The weather is nice today, so we are going for a walk in the park.",
                    "Machine translation has improved a lot in recent years.")


@dataclass(frozen=True)
class Embeddings:
    """Where a family stores its embeddings, generator and logits bias, by their names in the weight files.

    With shared embeddings (``tying``) the one shared matrix may be under any of ``shared`` (``save_pretrained``
    keeps one of a tied group, old ``.bin`` files every one), and under ``head`` too when the generator is tied;
    otherwise the source embedding is the first present of ``source``, the target one of ``target``. An untied
    generator is ``head`` (or, with ``head_optional``, the shared matrix when the file has none, as ``transformers``
    5 ties it then). ``logits_bias`` is the generator's bias (zeros where the file or the family has none).
    ``tied_head_must_match``: a tied config whose file holds a different ``head`` is refused (T5: the two versions
    of ``transformers`` disagree on such a file).
    """

    shared: tuple[str, ...]
    source: tuple[str, ...] = ()
    target: tuple[str, ...] = ()
    head: str = "lm_head.weight"
    logits_bias: str | None = None
    head_optional: bool = False
    tied_head_must_match: bool = False


@dataclass(frozen=True)
class Family:
    """Everything this package knows of one ``model_type``, declared in ``hub/families/<model_type>.py``."""

    model_type: str  # config.json's "model_type"
    name: str  # how messages name it ("M2M100")
    display_name: str  # how the app names it beside a folder's name ("NLLB (m2m_100)")
    config_of: ConfigOf  # config.json's object -> TransformerConfig (CheckpointError naming what does not map)
    layer_names: LayerNames  # our parameter name -> theirs, for everything but ``embeddings``
    embeddings: Embeddings
    tokenizer_files: tuple[str, ...]  # the tokenizer files a folder must hold
    tokenizer_layout: str | None = None  # a ``fast_tokenizer`` layout; None: Marian's own files (hub.tokenizer)
    tokenizer_classes: tuple[str, ...] = ()  # tokenizer_config.json's tokenizer_class values the layout reproduces
    optional_tokenizer_files: tuple[str, ...] = ()  # read when present (Marian's target_vocab.json)
    default_languages: tuple[str | None, str | None] = (None, None)  # (source, target) codes of a multilingual one
    examples: tuple[str, ...] = ENGLISH_EXAMPLES  # the app's example inputs (English)
    examples_folder_prefix: str | None = None  # only a folder named so reads English ("opus-mt-en-")
    examples_by_source_language: bool = False  # only when the chosen source language is English
    kind: str = "encoder-decoder"  # or "decoder": a decoder-only language model (its tokenizer: ``lm_tokenizer``)
    transposed: tuple[str, ...] = ()  # their tensors stored (in, out), named by suffix (GPT-2's Conv1D)
    optional_prefix: str | None = None  # their names may lack this prefix (GPT-2's "transformer.")
    registered_tokenizer: str | None = None  # a decoder's tokenizer class as transformers registers it for the
    # model_type (``lm_pipelines.CLASSES``: GPT2Tokenizer, Qwen2Tokenizer, GemmaTokenizer, TokenizersBackend)

    def examples_for(self, folder_name: str, src_lang: str | None) -> list[str]:
        """The example inputs for a folder of this family read from ``src_lang``: none where the model does not
        read English (a folder named for another source, a multilingual one set to another language)."""
        if self.examples_folder_prefix is not None and not folder_name.lower().startswith(self.examples_folder_prefix):
            return []
        code = (src_lang or "").lower()
        if self.examples_by_source_language and not (code == "en" or code.startswith(("en_", "eng_"))):
            return []
        return list(self.examples)


def fields(document: Mapping[str, Any], family: str) -> Fields:
    """``document``'s fields read by type (``fields.Fields``), a wrong one a CheckpointError naming the field."""
    return Fields(document, family=family, error=CheckpointError)


def build(family: str, **values: Any) -> TransformerConfig:
    """``TransformerConfig(**values)``, its ValueError as a CheckpointError that names the family."""
    try:
        return TransformerConfig(**values)
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"the {family} config.json does not describe a valid model: {error}") from None


def special_id(document: Mapping[str, Any], name: str, default: int, family: str) -> int:
    """An id of config.json (an int; eos may be a list in some configs: refused, naming it)."""
    value = document.get(name, default)
    if value is None:
        value = default
    if isinstance(value, bool) or not isinstance(value, int):
        raise CheckpointError(f"{family}: {name} must be one id, got {short(value)}")
    return value


def check_type(document: Mapping[str, Any], model_types: tuple[str, ...], family: str) -> None:
    """CheckpointError when config.json's ``model_type`` is not one of ``model_types``."""
    kind = document.get("model_type")
    if kind not in model_types:
        raise CheckpointError(f"model_type {short(kind)} is not {family} ({', '.join(model_types)})")


def attention_names(ours: str, theirs: str, parts: tuple[str, str, str, str], bias: bool) -> Names:
    """One attention sub-layer: our ``in_proj`` from their q, k, v (concatenated) and ``w_o`` from their out."""
    q, k, v, out = parts
    names: Names = {f"{ours}.in_proj.weight": tuple(f"{theirs}.{p}.weight" for p in (q, k, v)),
                    f"{ours}.w_o.weight": f"{theirs}.{out}.weight"}
    if bias:
        names[f"{ours}.in_proj.bias"] = tuple(f"{theirs}.{p}.bias" for p in (q, k, v))
        names[f"{ours}.w_o.bias"] = f"{theirs}.{out}.bias"
    return names


def norm_names(ours: str, theirs: str, config: TransformerConfig) -> Names:
    """A norm's weight (and bias, for LayerNorm; RMSNorm has none)."""
    kinds = ("weight", "bias") if config.norm == "layer" else ("weight",)
    return {f"{ours}.{kind}": f"{theirs}.{kind}" for kind in kinds}
