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

from pathlib import Path
from typing import Any

from ..file_caps import FileTooLargeError, read_config_json
from ..network.config import TransformerConfig
from .fields import Fields, short
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
        document = read_config_json(path)
    except FileNotFoundError:
        raise MarianConfigError(f"{Path(folder)}: missing {CONFIG_FILE}") from None
    except FileTooLargeError as error:
        raise MarianConfigError(str(error)) from None
    except OSError as error:  # its strerror only: str(error) names the path the file resolved to
        raise MarianConfigError(f"{CONFIG_FILE}: cannot be read ({error.strerror})") from None
    except ValueError as error:  # JSONFileError: the file and where its text breaks
        raise MarianConfigError(f"not readable JSON: {error}") from None
    if not isinstance(document, dict):
        raise MarianConfigError(f"{path}: expected a JSON object")
    return document


def marian_config(document: dict[str, Any], unk_id: int) -> TransformerConfig:
    """The ``TransformerConfig`` of a Marian config.json's object; MarianConfigError for any other model type, for a
    setting our network does not have, or for a field of the wrong type (the message names it)."""
    kind = document.get("model_type")
    if kind not in SUPPORTED_TYPES:
        raise MarianConfigError(f"model_type {short(kind)} is not supported: this package reads "
                                f"{', '.join(SUPPORTED_TYPES)} models (the opus-mt family), as transformers' "
                                "MarianMTModel computes them")
    field = Fields(document, error=MarianConfigError)
    field.same((("n_heads", "encoder_attention_heads", "decoder_attention_heads"),
                ("d_ff", "encoder_ffn_dim", "decoder_ffn_dim")))
    activation = field.text("activation_function", "gelu")
    if activation not in _ACTIVATIONS:
        raise MarianConfigError(f"activation_function {short(activation)} is not supported "
                                f"(supported: {', '.join(sorted(_ACTIVATIONS))})")
    shared = field.flag("share_encoder_decoder_embeddings", True)
    src_vocab = field.integer("vocab_size", low=1)
    tgt_vocab = src_vocab if shared else field.integer("decoder_vocab_size", src_vocab, low=1)
    pad_id = field.integer("pad_token_id")
    try:
        return TransformerConfig(
            src_vocab_size=src_vocab, tgt_vocab_size=tgt_vocab, d_model=field.integer("d_model", low=1),
            n_heads=field.integer("encoder_attention_heads", low=1), n_layers=field.integer("encoder_layers", low=1),
            n_encoder_layers=field.integer("encoder_layers", low=1),
            n_decoder_layers=field.integer("decoder_layers", low=1), d_ff=field.integer("encoder_ffn_dim", low=1),
            dropout=field.number("dropout", 0.1, low=0, high=1, high_open=True),
            max_len=field.integer("max_position_embeddings", low=1), pad_id=pad_id,
            eos_id=field.integer("eos_token_id"), bos_id=field.integer("decoder_start_token_id", pad_id),
            unk_id=unk_id, norm_first=False, activation=_ACTIVATIONS[activation],
            tying="all" if shared else "generator" if field.flag("tie_word_embeddings", True) else "none",
            positional="marian", scale_embedding=field.flag("scale_embedding", False), final_norm=False,
        )
    except (TypeError, ValueError) as error:
        raise MarianConfigError(f"config.json does not describe a valid model: {error}") from None
