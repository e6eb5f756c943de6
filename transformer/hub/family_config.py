"""config.json -> ``TransformerConfig`` for every family (marian, t5, bart, mbart, m2m_100), without torch.

The field names of each family's config.json are read here and only here: the loaders take their family's
``config_of`` from this module (t5.py, bart.py, m2m100.py keep it under that name; ``families.FAMILIES`` is built
on ``CONFIG_READERS``), and the Model page draws its architecture diagram with ``config_of`` from config.json
before torch is imported (ui/sections/architecture.py's ``first_config``: torch alone takes about 1.5 s). So this
module imports nothing that imports torch (tests/test_app_family_pages.py checks it in a fresh interpreter).

What each family's switches mean is said in its module's docstring (t5.py: Raffel et al. 2020; bart.py: Lewis et
al. 2020, Liu et al. 2020; m2m100.py: Fan et al. 2021, NLLB Team 2022; config.py for Marian). ``unk_id`` is the
family's usual ``<unk>``, a placeholder the loader replaces with the tokenizer's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..network.config import TransformerConfig
from .config import marian_config
from .fields import Fields, short


class FamilyError(ValueError):
    """A Hugging Face config or set of weights this network cannot compute as ``transformers`` does; the message
    says which setting or tensor."""


def fields(document: Mapping[str, Any], family: str) -> Fields:
    """``document``'s fields read by type (``fields.Fields``), a wrong one a FamilyError naming the field."""
    return Fields(document, family=family, error=FamilyError)


def build(family: str, **values: Any) -> TransformerConfig:
    """``TransformerConfig(**values)``, its ValueError as a FamilyError that names the family."""
    try:
        return TransformerConfig(**values)
    except (TypeError, ValueError) as error:
        raise FamilyError(f"the {family} config.json does not describe a valid model: {error}") from None


def special_id(document: Mapping[str, Any], name: str, default: int, family: str) -> int:
    """An id of config.json (an int; eos may be a list in some configs: refused, naming it)."""
    value = document.get(name, default)
    if value is None:
        value = default
    if isinstance(value, bool) or not isinstance(value, int):
        raise FamilyError(f"{family}: {name} must be one id, got {short(value)}")
    return value


# --- T5 and Flan-T5 (t5.py) ---
T5 = "T5"
T5_TYPES = ("t5",)
T5_UNK_ID = 2  # "<unk>" of T5's SentencePiece vocabulary (pad 0, eos 1, unk 2)
# transformers' ACT2FN names -> ours; "gated-gelu" means gelu_new (T5Config's backward-compatible special case)
_T5_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_new", "silu": "silu", "swish": "silu"}


def t5_config_of(document: Mapping[str, Any]) -> TransformerConfig:
    """The ``TransformerConfig`` of a T5 config.json; FamilyError for a setting this network lacks or a field of the
    wrong type (named)."""
    kind = document.get("model_type")
    if kind not in T5_TYPES:
        raise FamilyError(f"model_type {short(kind)} is not T5 ({', '.join(T5_TYPES)})")
    if document.get("is_encoder_decoder", True) is not True:
        raise FamilyError("T5: only the encoder-decoder (is_encoder_decoder true) is a translation model")
    field = fields(document, T5)
    projection = field.text("feed_forward_proj", "relu")
    parts = projection.split("-")
    gated = parts[0] == "gated" and len(parts) == 2
    if len(parts) > 2 or (len(parts) == 2 and not gated):
        raise FamilyError(f"T5: feed_forward_proj {short(projection)} is neither 'ACT' nor 'gated-ACT'")
    activation = "gelu_new" if projection == "gated-gelu" else parts[-1]
    if activation not in _T5_ACTIVATIONS:
        raise FamilyError(f"T5: the activation {short(activation)} of feed_forward_proj is not supported "
                          f"(supported: {', '.join(sorted(_T5_ACTIVATIONS))})")
    rescale = t5_rescales(document)
    pad = special_id(document, "pad_token_id", 0, T5)
    layers = field.integer("num_layers", 6, low=1)
    buckets = field.integer("relative_attention_num_buckets", 32, low=4)  # fewer: relative_bucket divides by 0
    distance = field.integer("relative_attention_max_distance", 128, low=1)
    if distance <= buckets // 2:  # the log-spaced buckets span from the exact ones (buckets // 2) to it
        raise FamilyError(f"the T5 config.json: relative_attention_max_distance ({distance}) must be more than "
                          f"relative_attention_num_buckets // 2 ({buckets // 2}), the buckets of exact distances")
    return build(
        T5, src_vocab_size=field.integer("vocab_size", low=1), tgt_vocab_size=field.integer("vocab_size", low=1),
        d_model=field.integer("d_model", 512, low=1), n_heads=field.integer("num_heads", 8, low=1),
        d_head=field.integer("d_kv", 64, low=1), n_layers=layers, n_encoder_layers=layers,
        n_decoder_layers=field.integer("num_decoder_layers", layers, low=1),
        d_ff=field.integer("d_ff", 2048, low=1),
        dropout=field.number("dropout_rate", 0.1, low=0, high=1, high_open=True),
        max_len=field.integer("n_positions", 512, low=1), pad_id=pad,
        eos_id=special_id(document, "eos_token_id", 1, T5),
        bos_id=special_id(document, "decoder_start_token_id", pad, T5), unk_id=T5_UNK_ID,
        norm_first=True, activation=_T5_ACTIVATIONS[activation], tying="all" if rescale else "embeddings",
        layer_norm_eps=field.number("layer_norm_epsilon", 1e-6, low=0, high=1, low_open=True),
        positional="relative", scale_embedding=False, final_norm=True,
        relative_buckets=buckets, relative_max_distance=distance,
        norm="rms", gated_ff=gated, scale_attention=False, bias=False, rescale_output=rescale,
    )


def t5_rescales(document: Mapping[str, Any]) -> bool:
    """Whether the decoder output is scaled by d_model^-0.5 (v1.0): ``scale_decoder_outputs`` where
    ``transformers`` 5 wrote it, else ``tie_word_embeddings`` (absent: true), as ``T5Config`` decides."""
    if "scale_decoder_outputs" in document:
        return document["scale_decoder_outputs"] is not False
    return document.get("tie_word_embeddings", True) is not False


# --- BART and mBART (bart.py), and what M2M100 / NLLB spell alike ---
BART_TYPES = ("bart", "mbart")
BART_UNK_ID = 3  # "<unk>" of BART's, mBART's and NLLB's vocabularies (<s> 0, <pad> 1, </s> 2, <unk> 3)
BART_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_new", "silu": "silu", "swish": "silu"}
SAME_IN_BOTH_STACKS = (("n_heads", "encoder_attention_heads", "decoder_attention_heads"),
                       ("d_ff", "encoder_ffn_dim", "decoder_ffn_dim"))


def bart_config_of(document: Mapping[str, Any]) -> TransformerConfig:
    """The ``TransformerConfig`` of a BART or mBART config.json; FamilyError for a setting this network lacks."""
    kind = document.get("model_type")
    if kind not in BART_TYPES:
        raise FamilyError(f"model_type {short(kind)} is not BART or mBART ({', '.join(BART_TYPES)})")
    family = {"bart": "BART", "mbart": "mBART"}[kind]
    values = shared_fields(document, family)
    pre_norm = kind == "mbart"
    return build(family, **values, norm_first=pre_norm, final_norm=pre_norm, embedding_norm=True,
                 positional="learned", position_offset=2, unk_id=BART_UNK_ID)


def shared_fields(document: Mapping[str, Any], family: str) -> dict[str, Any]:
    """The fields BART, mBART and M2M100 spell alike in config.json (sizes, activation, ids, tying, scale)."""
    field = fields(document, family)
    field.same(SAME_IN_BOTH_STACKS)
    activation = field.text("activation_function", "gelu")
    if activation not in BART_ACTIVATIONS:
        raise FamilyError(f"{family}: activation_function {short(activation)} is not supported "
                          f"(supported: {', '.join(sorted(BART_ACTIVATIONS))})")
    vocab = field.integer("vocab_size", low=1)
    pad = special_id(document, "pad_token_id", 1, family)
    eos = special_id(document, "eos_token_id", 2, family)
    return dict(
        src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=field.integer("d_model", low=1),
        n_heads=field.integer("encoder_attention_heads", low=1), n_layers=field.integer("encoder_layers", low=1),
        n_encoder_layers=field.integer("encoder_layers", low=1),
        n_decoder_layers=field.integer("decoder_layers", low=1), d_ff=field.integer("encoder_ffn_dim", low=1),
        dropout=field.number("dropout", 0.1, low=0, high=1, high_open=True),
        max_len=field.integer("max_position_embeddings", low=1), pad_id=pad, eos_id=eos,
        bos_id=special_id(document, "decoder_start_token_id", eos, family), activation=BART_ACTIVATIONS[activation],
        tying="embeddings" if document.get("tie_word_embeddings", True) is False else "all",
        scale_embedding=field.flag("scale_embedding", False), layer_norm_eps=1e-5,
    )


# --- M2M100 and NLLB-200 (m2m100.py) ---
M2M100 = "M2M100"
M2M100_TYPES = ("m2m_100",)


def m2m100_config_of(document: Mapping[str, Any]) -> TransformerConfig:
    """The ``TransformerConfig`` of an M2M100 / NLLB config.json; FamilyError for a setting this network lacks."""
    kind = document.get("model_type")
    if kind not in M2M100_TYPES:
        raise FamilyError(f"model_type {short(kind)} is not M2M100 / NLLB ({', '.join(M2M100_TYPES)})")
    defaults = {"activation_function": "relu", "scale_embedding": True}  # M2M100Config's own defaults
    fields = shared_fields({**defaults, **document}, M2M100)
    return build(M2M100, **fields, norm_first=True, final_norm=True, embedding_norm=False, positional="fairseq",
                 unk_id=BART_UNK_ID)


# --- Marian (config.py) ---
MARIAN_UNK_ID = 1  # "<unk>" of every opus-mt vocabulary ("</s>" 0, "<unk>" 1, ..., "<pad>" last)


def marian_config_of(document: Mapping[str, Any]) -> TransformerConfig:
    """The ``TransformerConfig`` of a Marian config.json (MarianConfigError, a ValueError, otherwise)."""
    return marian_config(dict(document), unk_id=MARIAN_UNK_ID)


ConfigOf = Callable[[Mapping[str, Any]], TransformerConfig]
# model_type -> its reader; ``families.FAMILIES`` takes each family's ``config_of`` from here.
CONFIG_READERS: dict[str, ConfigOf] = {"marian": marian_config_of, "t5": t5_config_of, "bart": bart_config_of,
                                       "mbart": bart_config_of, "m2m_100": m2m100_config_of}


def config_of(document: Mapping[str, Any]) -> TransformerConfig:
    """The ``TransformerConfig`` of any family's config.json object, by its ``model_type``; a ValueError naming the
    type when no family reads it (``families.family_of`` says more on why), or the setting that does not map."""
    kind = document.get("model_type")
    reader = CONFIG_READERS.get(kind) if isinstance(kind, str) else None
    if reader is None:
        raise FamilyError(f"model_type {short(kind)} is not one of {', '.join(CONFIG_READERS)}")
    return reader(document)
