"""A Marian ``config.json`` (as ``transformers`` writes it) -> our ``TransformerConfig``, or a clear refusal.

The mapping, field by field (``transformers``' name -> ours):

    vocab_size -> src_vocab_size;  decoder_vocab_size (separate vocabularies) or vocab_size -> tgt_vocab_size
    d_model -> d_model;  encoder_layers / decoder_layers -> n_encoder_layers / n_decoder_layers
    encoder_attention_heads (= decoder_attention_heads) -> n_heads;  encoder_ffn_dim (= decoder_ffn_dim) -> d_ff
    max_position_embeddings -> max_len;  activation_function -> activation ("swish" is "silu")
    scale_embedding -> scale_embedding;  share_encoder_decoder_embeddings -> tying "all"
    tie_word_embeddings (separate vocabularies) -> tying "generator"
    pad_token_id / eos_token_id / decoder_start_token_id -> pad_id / eos_id / bos_id

and what every Marian model has: post-LN, no final LayerNorm, Marian's sinusoid layout, LayerNorm eps 1e-5.
The ``<unk>`` id comes from the vocabulary (vocab.json), not from the config.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..file_caps import MAX_CONFIG_BYTES, FileTooLargeError, read_capped
from ..network.config import TransformerConfig
from .folder import CONFIG_FILE

SUPPORTED_TYPES = ("marian",)
# transformers' activation names -> ours (ACT2FN: "swish" and "silu" are the same function)
_ACTIVATIONS = {"swish": "silu", "silu": "silu", "relu": "relu", "gelu": "gelu"}


class MarianConfigError(ValueError):
    """A Hugging Face config this package cannot read as a Marian model; the message says why."""


def read_document(folder: str | Path) -> dict[str, Any]:
    """The JSON object of ``folder/config.json`` (at most ``MAX_CONFIG_BYTES``, checked before it is read)."""
    path = Path(folder) / CONFIG_FILE
    try:
        document = json.loads(read_capped(path, MAX_CONFIG_BYTES).decode("utf-8"))
    except FileNotFoundError:
        raise MarianConfigError(f"{Path(folder)}: missing {CONFIG_FILE}") from None
    except FileTooLargeError as error:
        raise MarianConfigError(str(error)) from None
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise MarianConfigError(f"{path}: not readable JSON ({error})") from None
    if not isinstance(document, dict):
        raise MarianConfigError(f"{path}: expected a JSON object")
    return document


def marian_config(document: dict[str, Any], unk_id: int) -> TransformerConfig:
    """The ``TransformerConfig`` of a Marian config.json's object; MarianConfigError for any other model type or
    for a setting our network does not have (the message names it)."""
    kind = document.get("model_type")
    if kind not in SUPPORTED_TYPES:
        raise MarianConfigError(f"model_type {kind!r} is not supported: this package reads "
                                f"{', '.join(SUPPORTED_TYPES)} models (the opus-mt family), as transformers' "
                                "MarianMTModel computes them")

    def get(name: str, default: Any = None) -> Any:
        value = document.get(name, default)
        if value is None:
            raise MarianConfigError(f"config.json has no {name!r}")
        return value

    for ours, pair in (("n_heads", ("encoder_attention_heads", "decoder_attention_heads")),
                       ("d_ff", ("encoder_ffn_dim", "decoder_ffn_dim"))):
        first, second = (document.get(name) for name in pair)
        if second is not None and first != second:
            raise MarianConfigError(f"{pair[0]} ({first}) differs from {pair[1]} ({second}); "
                                    f"this network has one {ours} for both stacks")
    activation = get("activation_function", "gelu")
    if activation not in _ACTIVATIONS:
        raise MarianConfigError(f"activation_function {activation!r} is not supported "
                                f"(supported: {', '.join(sorted(_ACTIVATIONS))})")
    shared = bool(document.get("share_encoder_decoder_embeddings", True))
    src_vocab = get("vocab_size")
    tgt_vocab = src_vocab if shared else get("decoder_vocab_size", src_vocab)
    pad_id = get("pad_token_id")
    try:
        return TransformerConfig(
            src_vocab_size=src_vocab, tgt_vocab_size=tgt_vocab, d_model=get("d_model"),
            n_heads=get("encoder_attention_heads"), n_layers=get("encoder_layers"),
            n_encoder_layers=get("encoder_layers"), n_decoder_layers=get("decoder_layers"),
            d_ff=get("encoder_ffn_dim"), dropout=float(document.get("dropout", 0.1)),
            max_len=get("max_position_embeddings"), pad_id=pad_id, eos_id=get("eos_token_id"),
            bos_id=document.get("decoder_start_token_id", pad_id), unk_id=unk_id,
            norm_first=False, activation=_ACTIVATIONS[activation], tying="all" if shared else
            "generator" if document.get("tie_word_embeddings", True) else "none",
            positional="marian", scale_embedding=bool(document.get("scale_embedding", False)), final_norm=False,
        )
    except (TypeError, ValueError) as error:
        raise MarianConfigError(f"config.json does not describe a valid model: {error}") from None


def generation_settings(folder: str | Path, document: dict[str, Any]) -> dict[str, Any]:
    """What ``generation_config.json`` (else config.json) says about decoding: max_length, num_beams."""
    settings: dict[str, Any] = {key: document[key] for key in ("max_length", "num_beams") if key in document}
    path = Path(folder) / "generation_config.json"
    if path.is_file():
        try:
            generation = json.loads(read_capped(path, MAX_CONFIG_BYTES).decode("utf-8"))
        except FileTooLargeError as error:
            raise MarianConfigError(str(error)) from None
        except (OSError, UnicodeDecodeError, ValueError) as error:
            raise MarianConfigError(f"{path}: not readable JSON ({error})") from None
        if isinstance(generation, dict):
            settings.update({key: generation[key] for key in ("max_length", "num_beams") if key in generation})
    return {key: value for key, value in settings.items()
            if isinstance(value, int) and not isinstance(value, bool) and value > 0}
