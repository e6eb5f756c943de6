"""GPT-2 (``GPT2LMHeadModel``; Radford et al. 2019) as our decoder-only network: pre-norm LayerNorm, a learned
position table, GELU with the tanh approximation (``gelu_new``), biases everywhere, and the generator tied to the
token embedding.

Its weights: the attention and feed-forward layers are Conv1D, whose matrices are stored (in, out), the transpose
of nn.Linear's (out, in): ``Family.transposed`` names them, and the loader transposes them as it reads (a loading
concern, kept out of the network). The original repositories store the ``GPT2Model``'s names without the
``transformer.`` prefix (``h.0.attn.c_attn.weight``), ``save_pretrained`` of ``GPT2LMHeadModel`` with it: both are
read (``Family.optional_prefix``). Their causal-mask buffers (``h.0.attn.bias``) are not weights and are skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...checkpoints.errors import CheckpointError
from ...network.config import TransformerConfig
from ..family_config import Embeddings, Family, Names, build, check_type, fields, norm_names
from ..fields import short
from ._decoder import LM_EXAMPLES, special_ids

CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
ACTIVATIONS = {"gelu_new": "gelu_new", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu"}


def config_of(document: Mapping[str, Any]) -> TransformerConfig:
    """The ``TransformerConfig`` of a GPT-2 config.json; CheckpointError for what this network lacks."""
    check_type(document, ("gpt2",), "GPT-2")
    field = fields(document, "GPT-2")
    for name in ("scale_attn_by_inverse_layer_idx", "add_cross_attention"):
        if field.flag(name, False):
            raise CheckpointError(f"the GPT-2 config.json sets {name}: not in this network's GPT-2")
    activation = field.text("activation_function", "gelu_new")
    if activation not in ACTIVATIONS:
        raise CheckpointError(f"the GPT-2 config.json: activation_function {short(activation)} is not supported "
                              f"(supported: {', '.join(ACTIVATIONS)})")
    vocab, d_model = field.integer("vocab_size", low=1), field.integer("n_embd", low=1)
    return build("GPT-2", src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=d_model,
                 n_heads=field.integer("n_head", low=1), n_layers=field.integer("n_layer", low=1),
                 d_ff=field.integer("n_inner", 4 * d_model, low=1), dropout=0.0,
                 max_len=field.integer("n_positions", low=1), norm_first=True, activation=ACTIVATIONS[activation],
                 tying="generator" if field.flag("tie_word_embeddings", True) else "none",
                 layer_norm_eps=field.number("layer_norm_epsilon", 1e-5, low=0, high=1, low_open=True),
                 positional="learned", scale_embedding=False, decoder_only=True,
                 scale_attention=field.flag("scale_attn_weights", True), **special_ids(document, "GPT-2", vocab))


def layer_names(config: TransformerConfig) -> Names:
    """Our parameter name -> theirs (with the ``transformer.`` prefix; the Conv1D matrices transposed on read)."""
    names: Names = {"positional.tgt.weight": "transformer.wpe.weight"}
    names |= norm_names("decoder.norm", "transformer.ln_f", config)
    pairs = {"attn.c_attn": "self_attn.in_proj", "attn.c_proj": "self_attn.w_o", "mlp.c_fc": "feed_forward.w_1",
             "mlp.c_proj": "feed_forward.w_2"}
    for i in range(config.n_decoder_layers):
        theirs, ours = f"transformer.h.{i}", f"decoder.layers.{i}"
        for their_conv, our_linear in pairs.items():
            names[f"{ours}.{our_linear}.weight"] = f"{theirs}.{their_conv}.weight"
            names[f"{ours}.{our_linear}.bias"] = f"{theirs}.{their_conv}.bias"
        names |= norm_names(f"{ours}.self_attn_residual.norm", f"{theirs}.ln_1", config)
        names |= norm_names(f"{ours}.feed_forward_residual.norm", f"{theirs}.ln_2", config)
    return names


FAMILY = Family(model_type="gpt2", name="GPT-2", display_name="GPT-2", config_of=config_of, layer_names=layer_names,
                embeddings=Embeddings(shared=(), target=("transformer.wte.weight",), head="lm_head.weight"),
                tokenizer_files=("tokenizer.json",), kind="decoder", examples=LM_EXAMPLES,
                registered_tokenizer="GPT2Tokenizer", transposed=CONV1D, optional_prefix="transformer.")
