"""BART (``BartForConditionalGeneration``; Lewis et al. 2020) as our network, and what mBART and M2M100 share
with it (``shared_fields``, ``layer_names``, ``EMBEDDINGS``).

BART is the encoder-decoder of the paper with these switches (network/config.py):

    positional="learned", position_offset=2   a trained table per stack, position p at row p + 2
    embedding_norm                            a LayerNorm right after embeddings + positions (layernorm_embedding)
    norm_first=False, final_norm=False        post-LN, as the paper, no norm after the stacks
    scale_embedding                           from config.json (bart-base: false)
    activation                                activation_function (gelu: the exact erf GELU)
    tying="all"                               one ``shared`` matrix for both stacks and the generator
    generator bias                            ``final_logits_bias`` (zeros where a file leaves it out)

The legacy fairseq flags some config.json files still carry (``normalize_before``, ``add_final_layer_norm``,
``normalize_embedding``, ``static_position_embeddings``) are ignored, as ``transformers`` ignores them: the
model_type decides. The layers' names are Marian's (fairseq's). ``<unk>`` is 3 (``<s>`` 0, ``<pad>`` 1,
``</s>`` 2, ``<unk>`` 3); a tokenizer that says otherwise replaces it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...checkpoints.errors import CheckpointError
from ...network.config import TransformerConfig
from ..family_config import Embeddings, Family, Names, build, check_type, fields, norm_names, special_id
from ..fields import short
from .marian import layer_names as fairseq_layer_names

UNK_ID = 3  # "<unk>" of BART's, mBART's and NLLB's vocabularies (<s> 0, <pad> 1, </s> 2, <unk> 3)
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_new", "silu": "silu", "swish": "silu"}
SAME_IN_BOTH_STACKS = (("n_heads", "encoder_attention_heads", "decoder_attention_heads"),
                       ("d_ff", "encoder_ffn_dim", "decoder_ffn_dim"))
EMBEDDINGS = ("model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight")


def config_of(document: Mapping[str, Any]) -> TransformerConfig:
    """The ``TransformerConfig`` of a BART config.json; CheckpointError for a setting this network lacks."""
    check_type(document, ("bart",), "BART")
    return build("BART", **shared_fields(document, "BART"), norm_first=False, final_norm=False,
                 embedding_norm=True, positional="learned", position_offset=2, unk_id=UNK_ID)


def shared_fields(document: Mapping[str, Any], family: str) -> dict[str, Any]:
    """The fields BART, mBART and M2M100 spell alike in config.json (sizes, activation, ids, tying, scale)."""
    field = fields(document, family)
    field.same(SAME_IN_BOTH_STACKS)
    activation = field.text("activation_function", "gelu")
    if activation not in ACTIVATIONS:
        raise CheckpointError(f"{family}: activation_function {short(activation)} is not supported "
                          f"(supported: {', '.join(sorted(ACTIVATIONS))})")
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
        bos_id=special_id(document, "decoder_start_token_id", eos, family), activation=ACTIVATIONS[activation],
        tying="embeddings" if document.get("tie_word_embeddings", True) is False else "all",
        scale_embedding=field.flag("scale_embedding", False), layer_norm_eps=1e-5,
    )


def layer_names(config: TransformerConfig) -> Names:
    """Our parameter name -> theirs, for everything but the embeddings and the generator (fairseq's layers, and
    the learned positions, embedding norm and final norm where the config has them)."""
    names = fairseq_layer_names(config)
    for stack, side in (("encoder", "src"), ("decoder", "tgt")):
        if config.positional == "learned":
            names[f"positional.{side}.weight"] = f"model.{stack}.embed_positions.weight"
        if config.embedding_norm:
            names |= norm_names(f"{stack}.embed_norm", f"model.{stack}.layernorm_embedding", config)
        if config.final_norm:
            names |= norm_names(f"{stack}.norm", f"model.{stack}.layer_norm", config)
    return names


FAMILY = Family(
    model_type="bart", name="BART", display_name="BART", config_of=config_of, layer_names=layer_names,
    embeddings=Embeddings(shared=EMBEDDINGS, logits_bias="final_logits_bias"),
    tokenizer_files=("tokenizer.json",), tokenizer_layout="bart",
    tokenizer_classes=("BartTokenizer", "BartTokenizerFast", "RobertaTokenizer", "RobertaTokenizerFast"),
)
