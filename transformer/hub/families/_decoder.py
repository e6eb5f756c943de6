"""What the decoder-only families share: config.json's rotary, attention and id fields read once, and the
weight-name table of the Llama layout (``model.layers.{i}.self_attn.q_proj`` ...), which Mistral, Qwen2/3 and
Gemma-2/3 keep. Not a family itself (its name starts with ``_``); each family's file declares its switches.

Which family sets which switch (docs/families.md has the table):

| switch | gpt2 | llama | mistral | qwen2 | qwen3 | gemma2 | gemma3_text |
|---|---|---|---|---|---|---|---|
| positions | learned | rotary | rotary | rotary | rotary | rotary | rotary (a base per layer type) |
| norm | LayerNorm | RMSNorm | RMSNorm | RMSNorm | RMSNorm | RMSNorm (1 + w) | RMSNorm (1 + w) |
| feed-forward | GELU (tanh) | SwiGLU | SwiGLU | SwiGLU | SwiGLU | GeGLU (tanh) | GeGLU (tanh) |
| biases | all | none | none | q, k, v | none | none | none |
| q/k norms | | | | | yes | | yes |
| sandwich norms | | | | | | yes | yes |
| sliding window | | | every layer | (off) | (off) | alternate layers | 5 of 6 layers |
| soft-caps | | | | | | attention, logits | |
| embeddings x sqrt(d) | | | | | | yes | yes |

Refused by name, never approximated: RoPE scalings other than default / linear / llama3 (yarn, dynamic,
longrope), biases on every attention projection (``attention_bias``), biases in the feed-forward (``mlp_bias``),
a sliding window on some layers only where the family does not say which.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...checkpoints.errors import CheckpointError
from ...network.config import ROPE_SCALINGS, TransformerConfig
from ..family_config import Embeddings, Names, build, fields, norm_names
from ..fields import Fields, short

ROPE_FIELDS = ("rope_type", "type", "rope_theta", "factor", "low_freq_factor", "high_freq_factor",
               "original_max_position_embeddings")
LLAMA_EMBEDDINGS = Embeddings(shared=(), target=("model.embed_tokens.weight",), head="lm_head.weight")
LAYER_TYPE_NAMES = {"full_attention": "full", "sliding_attention": "sliding"}
# The app's example prompts for a language model: a fact, a story, code, a list, and an indirect object (Wang et al.
# 2022's name-mover circuit: the Patching page swaps the names)
LM_EXAMPLES = ("The capital of France is", "Once upon a time, there was a little", "def fibonacci(n):",
               "The three primary colours are red,", "When Mary and John went to the store, John gave a drink to")


def special_ids(document: Mapping[str, Any], family: str, vocab: int) -> dict[str, int]:
    """pad, bos and eos ids for our config: config.json's ``eos_token_id`` may be a list (its first is ours; the
    whole list is read by the tokenizer for decoding), ``pad_token_id`` is often null (then the first EOS, as
    ``generate`` pads with it)."""
    values: dict[str, int] = {}
    for ours, name in (("bos_id", "bos_token_id"), ("eos_id", "eos_token_id"), ("pad_id", "pad_token_id")):
        value = document.get(name)
        if isinstance(value, list) and value and name == "eos_token_id":
            value = value[0]
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < vocab:
            raise CheckpointError(f"the {family} config.json: {name} must be an id below vocab_size {vocab}, "
                                  f"got {short(value)}")
        values[ours] = value
    values.setdefault("eos_id", values.get("bos_id", 0))
    values.setdefault("bos_id", values["eos_id"])
    values.setdefault("pad_id", values["eos_id"])
    return values


def rope_settings(document: Mapping[str, Any], family: str, default_theta: float = 10000.0) -> dict[str, Any]:
    """Our rotary fields from config.json: ``rope_parameters`` (transformers 5) or ``rope_scaling`` with a
    top-level ``rope_theta`` (older files); Gemma-3's per-layer-type form gives the full layers' scaling and the
    sliding layers' base (``rope_local_base_freq`` in older files)."""
    parameters = document.get("rope_parameters")
    local_theta = None
    if isinstance(parameters, Mapping) and "full_attention" in parameters:
        local = parameters.get("sliding_attention") or {}
        local_theta = local.get("rope_theta") if isinstance(local, Mapping) else None
        if isinstance(local, Mapping) and local.get("rope_type", "default") != "default":
            raise CheckpointError(f"the {family} config.json: the sliding layers' RoPE scaling "
                                  f"{short(local.get('rope_type'))} is not supported (only default)")
        parameters = parameters.get("full_attention") or {}
    if parameters is None:
        parameters = document.get("rope_scaling") or {}
    if not isinstance(parameters, Mapping):
        raise CheckpointError(f"the {family} config.json: rope_parameters must be an object, got {short(parameters)}")
    rope = Fields(parameters, family=family, error=CheckpointError)
    kind = parameters.get("rope_type", parameters.get("type", "default"))
    if kind not in ROPE_SCALINGS:
        raise CheckpointError(f"the {family} config.json: RoPE scaling {short(kind)} is not supported (supported: "
                              f"{', '.join(ROPE_SCALINGS)})")
    top = fields(document, family)
    theta = parameters.get("rope_theta", document.get("rope_theta", default_theta))
    if local_theta is None and "rope_local_base_freq" in document:
        local_theta = top.number("rope_local_base_freq", low=1, high=1e12)
    values = dict(rope_theta=Fields({"rope_theta": theta}, family=family, error=CheckpointError).number(
        "rope_theta", low=1, high=1e12), rope_scaling=kind)
    if kind != "default":
        values["rope_factor"] = rope.number("factor", low=1, high=1e6)
    if kind == "llama3":
        values |= dict(rope_low_freq_factor=rope.number("low_freq_factor", low=0, high=1e6, low_open=True),
                       rope_high_freq_factor=rope.number("high_freq_factor", low=0, high=1e6, low_open=True),
                       rope_original_max_len=rope.integer("original_max_position_embeddings", low=1))
    if local_theta is not None:
        values["rope_local_theta"] = Fields({"theta": local_theta}, family=family, error=CheckpointError).number(
            "theta", low=1, high=1e12)
    return values


def layer_types(document: Mapping[str, Any], family: str, n_layers: int, default: list[str] | None
                ) -> tuple[str, ...] | None:
    """Each layer's attention, "full" or "sliding": config.json's ``layer_types``, else ``default`` (the
    family's pattern); None when every layer is full."""
    types = document.get("layer_types", default)
    if types is None:
        return None
    if not isinstance(types, list) or len(types) != n_layers or any(t not in LAYER_TYPE_NAMES for t in types):
        raise CheckpointError(f"the {family} config.json: layer_types must list {n_layers} of "
                              f"{', '.join(LAYER_TYPE_NAMES)}, got {short(types)}")
    ours = tuple(LAYER_TYPE_NAMES[t] for t in types)
    return ours if "sliding" in ours else None


def llama_like(document: Mapping[str, Any], family: str, *, activation: str, hidden_act: tuple[str, ...],
               default_tie: bool, **switches: Any) -> TransformerConfig:
    """The config of a Llama-layout model (Llama, Mistral, Qwen2/3, Gemma-2/3): sizes, GQA, rotary, ids, tying
    from config.json, and the family's own ``switches`` (norm, q/k norm, sliding window, ...)."""
    field = fields(document, family)
    for name in ("attention_bias", "mlp_bias"):
        if field.flag(name, False):
            raise CheckpointError(f"the {family} config.json sets {name}: biases on every attention or "
                                  "feed-forward projection are not in this network's Llama layout")
    act_name = "hidden_activation" if "hidden_activation" in document else "hidden_act"
    act = field.text(act_name, hidden_act[0])
    if act not in hidden_act:
        raise CheckpointError(f"the {family} config.json: {act_name} {short(act)} is not supported "
                              f"(supported: {', '.join(hidden_act)})")
    vocab = field.integer("vocab_size", low=1)
    d_model = field.integer("hidden_size", low=1)
    n_heads = field.integer("num_attention_heads", low=1)
    n_layers = field.integer("num_hidden_layers", low=1)
    return build(
        family, src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=d_model, n_heads=n_heads,
        n_kv_heads=field.integer("num_key_value_heads", n_heads, low=1),
        d_head=field.integer("head_dim", max(1, d_model // n_heads), low=1), n_layers=n_layers,
        d_ff=field.integer("intermediate_size", low=1), dropout=0.0,
        max_len=field.integer("max_position_embeddings", low=1), norm_first=True, gated_ff=True,
        activation=activation, bias=False, positional="rotary", decoder_only=True, softmax_float32=True,
        tying="generator" if field.flag("tie_word_embeddings", default_tie) else "none",
        layer_norm_eps=field.number("rms_norm_eps", 1e-6, low=0, high=1, low_open=True),
        **special_ids(document, family, vocab), **rope_settings(document, family),
        **{"scale_embedding": False, **switches})


def llama_names(config: TransformerConfig) -> Names:
    """Our parameter name -> theirs in the Llama layout (the embeddings and head are ``LLAMA_EMBEDDINGS``)."""
    names: Names = norm_names("decoder.norm", "model.norm", config)
    sublayer_norms = {"input_layernorm": "self_attn_residual.norm",
                      "post_attention_layernorm": "feed_forward_residual.norm"}
    if config.sandwich_norm:
        sublayer_norms = {"input_layernorm": "self_attn_residual.norm",
                          "post_attention_layernorm": "self_attn_residual.post_norm",
                          "pre_feedforward_layernorm": "feed_forward_residual.norm",
                          "post_feedforward_layernorm": "feed_forward_residual.post_norm"}
    for i in range(config.n_decoder_layers):
        theirs, ours = f"model.layers.{i}", f"decoder.layers.{i}"
        attention = f"{theirs}.self_attn"
        names[f"{ours}.self_attn.in_proj.weight"] = tuple(f"{attention}.{p}_proj.weight" for p in "qkv")
        if config.qkv_bias:
            names[f"{ours}.self_attn.in_proj.bias"] = tuple(f"{attention}.{p}_proj.bias" for p in "qkv")
        names[f"{ours}.self_attn.w_o.weight"] = f"{attention}.o_proj.weight"
        if config.qk_norm:
            names[f"{ours}.self_attn.q_norm.weight"] = f"{attention}.q_norm.weight"
            names[f"{ours}.self_attn.k_norm.weight"] = f"{attention}.k_norm.weight"
        for part, their_part in (("w_1", "gate_proj"), ("w_3", "up_proj"), ("w_2", "down_proj")):
            names[f"{ours}.feed_forward.{part}.weight"] = f"{theirs}.mlp.{their_part}.weight"
        for their_norm, our_norm in sublayer_norms.items():
            names[f"{ours}.{our_norm}.weight"] = f"{theirs}.{their_norm}.weight"
    return names
