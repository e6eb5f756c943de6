"""Tiny ``transformers`` decoder-only models of each family, built in the tests (no network), and ours from them.

As family_models.py does for the encoder-decoders: every parameter drawn at random from a private generator, every
norm's weight away from 1 (or, for Gemma's (1 + w), away from 0) and every bias away from 0, float64, eager
attention. The Hugging Face loading layer (the family files) is not part of the network, so the config reading
and the weight-name tables that join a ``transformers`` model to ours live here, as plain dictionaries: the
network's switches are what is proven, against ``AutoModelForCausalLM``'s logits and attention weights.

GPT-2's Conv1D layers keep their matrices as (in, out); ours are nn.Linear's (out, in): the mapping transposes
them (a loading concern, kept out of the network).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from transformer.checkpoints.checkpoint import load_weights
from transformer.network.config import TransformerConfig
from transformer.network.model import Transformer

VOCAB = 48
LENGTH = 24  # tokens per row: past every sliding window below and each band of the llama3 scaling (d_k 16)
WINDOW = 5  # the sliding window of Mistral and Gemma
# llama3 with an original context of 64: wavelengths 2 pi / theta_i of d_k 16 fall in all three bands (< 16 kept,
# 16..64 interpolated, > 64 divided by the factor)
LLAMA3 = {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
          "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
COMMON = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=40, num_hidden_layers=4, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16, max_position_embeddings=64, rms_norm_eps=1e-6, pad_token_id=0,
              bos_token_id=1, eos_token_id=2, attention_dropout=0.0)


@dataclass
class Pair:
    """One family's reference model and ours."""

    name: str
    reference: torch.nn.Module  # AutoModelForCausalLM, eager attention, float64, eval
    ours: Transformer  # float64, eval


def reference_config(name: str):  # noqa: ANN201  (a transformers config)
    """The tiny ``transformers`` config of one family."""
    import transformers as tf

    configs = {
        "gpt2": lambda: tf.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=3, n_head=4, n_positions=64, n_inner=40,
                                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=1,
                                      eos_token_id=2),
        "llama": lambda: tf.LlamaConfig(**COMMON, rope_parameters=dict(LLAMA3), tie_word_embeddings=False),
        "llama-linear": lambda: tf.LlamaConfig(**COMMON, rope_parameters={"rope_type": "linear", "factor": 4.0,
                                                                          "rope_theta": 500.0}),
        "mistral": lambda: tf.MistralConfig(**COMMON, sliding_window=WINDOW, tie_word_embeddings=False),
        "qwen2": lambda: tf.Qwen2Config(**COMMON, tie_word_embeddings=True),
        "qwen3": lambda: tf.Qwen3Config(**COMMON, tie_word_embeddings=False),
        "gemma2": lambda: tf.Gemma2Config(**COMMON, sliding_window=WINDOW, query_pre_attn_scalar=24,
                                          attn_logit_softcapping=3.0, final_logit_softcapping=5.0),
        "gemma3_text": lambda: tf.Gemma3TextConfig(
            **COMMON | {"num_hidden_layers": 6}, sliding_window=WINDOW, query_pre_attn_scalar=24,
            rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                             "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6}}),
    }
    config = configs[name]()
    config._attn_implementation = "eager"  # attention weights as the equation reads, for output_attentions
    return config


NAMES = ("gpt2", "llama", "llama-linear", "mistral", "qwen2", "qwen3", "gemma2", "gemma3_text")


def config_of(name: str, hf) -> TransformerConfig:  # noqa: ANN001  (a transformers config)
    """Our config of a ``transformers`` config: the switches each family sets (docs/architecture.md's table)."""
    if name == "gpt2":
        return TransformerConfig(
            src_vocab_size=hf.vocab_size, tgt_vocab_size=hf.vocab_size, d_model=hf.n_embd, n_heads=hf.n_head,
            n_layers=hf.n_layer, d_ff=hf.n_inner, dropout=0.0, max_len=hf.n_positions, pad_id=0, bos_id=1, eos_id=2,
            norm_first=True, activation="gelu_new", tying="generator", layer_norm_eps=hf.layer_norm_epsilon,
            positional="learned", scale_embedding=False, decoder_only=True)
    gemma = name.startswith("gemma")
    rope = hf.rope_parameters
    full, local = (rope["full_attention"], rope["sliding_attention"]) if "full_attention" in rope else (rope, None)
    types = getattr(hf, "layer_types", None)
    sliding = getattr(hf, "sliding_window", None) if (types is None or "sliding_attention" in types) else None
    return TransformerConfig(
        src_vocab_size=hf.vocab_size, tgt_vocab_size=hf.vocab_size, d_model=hf.hidden_size,
        n_heads=hf.num_attention_heads, n_kv_heads=hf.num_key_value_heads, d_head=hf.head_dim,
        n_layers=hf.num_hidden_layers, d_ff=hf.intermediate_size, dropout=0.0, max_len=hf.max_position_embeddings,
        pad_id=0, bos_id=1, eos_id=2, norm_first=True, gated_ff=True,
        activation="gelu_tanh" if gemma else "silu", tying="generator" if hf.tie_word_embeddings else "none",
        layer_norm_eps=hf.rms_norm_eps, positional="rotary", scale_embedding=gemma, embedding_scale_rounded=gemma,
        norm="rms_unit_offset" if gemma else "rms_float32", bias=False, qkv_bias=name == "qwen2",
        qk_norm=name in ("qwen3", "gemma3_text"), sandwich_norm=gemma, decoder_only=True,
        softmax_float32=True, rope_theta=full["rope_theta"], rope_scaling=full.get("rope_type", "default"),
        rope_factor=full.get("factor", 1.0), rope_low_freq_factor=full.get("low_freq_factor", 1.0),
        rope_high_freq_factor=full.get("high_freq_factor", 4.0),
        rope_original_max_len=full.get("original_max_position_embeddings", 8192),
        rope_local_theta=local["rope_theta"] if local is not None else None,
        sliding_window=sliding,
        layer_types=tuple(t.split("_")[0] for t in types) if sliding and types is not None else None,
        attn_softcap=getattr(hf, "attn_logit_softcapping", None),
        logit_softcap=getattr(hf, "final_logit_softcapping", None),
        query_pre_attn_scalar=getattr(hf, "query_pre_attn_scalar", None) if gemma else None)


def weights_of(name: str, state: dict[str, torch.Tensor], config: TransformerConfig) -> dict[str, torch.Tensor]:
    """A ``transformers`` state dict -> ours (a tied matrix once, as ``checkpoint.weights_of`` stores it)."""
    if name == "gpt2":
        return _gpt2_weights(state, config)
    ours = {"tgt_embed.weight": state["model.embed_tokens.weight"], "decoder.norm.weight": state["model.norm.weight"],
            "generator.bias": torch.zeros(config.tgt_vocab_size, dtype=torch.float64)}
    if config.tying != "generator":
        ours["generator.weight"] = state["lm_head.weight"]
    norms = {"input_layernorm": "self_attn_residual.norm", "post_attention_layernorm": "feed_forward_residual.norm"}
    if config.sandwich_norm:
        norms = {"input_layernorm": "self_attn_residual.norm",
                 "post_attention_layernorm": "self_attn_residual.post_norm",
                 "pre_feedforward_layernorm": "feed_forward_residual.norm",
                 "post_feedforward_layernorm": "feed_forward_residual.post_norm"}
    for i in range(config.n_decoder_layers):
        theirs, mine = f"model.layers.{i}", f"decoder.layers.{i}"
        attention = f"{theirs}.self_attn"
        ours[f"{mine}.self_attn.in_proj.weight"] = torch.cat([state[f"{attention}.{p}_proj.weight"] for p in "qkv"])
        if config.qkv_bias:
            ours[f"{mine}.self_attn.in_proj.bias"] = torch.cat([state[f"{attention}.{p}_proj.bias"] for p in "qkv"])
        ours[f"{mine}.self_attn.w_o.weight"] = state[f"{attention}.o_proj.weight"]
        if config.qk_norm:
            ours[f"{mine}.self_attn.q_norm.weight"] = state[f"{attention}.q_norm.weight"]
            ours[f"{mine}.self_attn.k_norm.weight"] = state[f"{attention}.k_norm.weight"]
        for part, theirs_part in (("w_1", "gate_proj"), ("w_3", "up_proj"), ("w_2", "down_proj")):
            ours[f"{mine}.feed_forward.{part}.weight"] = state[f"{theirs}.mlp.{theirs_part}.weight"]
        for their_norm, our_norm in norms.items():
            ours[f"{mine}.{our_norm}.weight"] = state[f"{theirs}.{their_norm}.weight"]
    return ours


def _gpt2_weights(state: dict[str, torch.Tensor], config: TransformerConfig) -> dict[str, torch.Tensor]:
    """GPT-2's names; its Conv1D matrices are (in, out), transposed into nn.Linear's (out, in)."""
    ours = {"tgt_embed.weight": state["transformer.wte.weight"],
            "positional.tgt.weight": state["transformer.wpe.weight"],
            "decoder.norm.weight": state["transformer.ln_f.weight"],
            "decoder.norm.bias": state["transformer.ln_f.bias"],
            "generator.bias": torch.zeros(config.tgt_vocab_size, dtype=torch.float64)}
    for i in range(config.n_decoder_layers):
        theirs, mine = f"transformer.h.{i}", f"decoder.layers.{i}"
        pairs = {"attn.c_attn": "self_attn.in_proj", "attn.c_proj": "self_attn.w_o", "mlp.c_fc": "feed_forward.w_1",
                 "mlp.c_proj": "feed_forward.w_2"}
        for their_conv, our_linear in pairs.items():
            ours[f"{mine}.{our_linear}.weight"] = state[f"{theirs}.{their_conv}.weight"].t().contiguous()
            ours[f"{mine}.{our_linear}.bias"] = state[f"{theirs}.{their_conv}.bias"]
        for their_norm, our_norm in (("ln_1", "self_attn_residual.norm"), ("ln_2", "feed_forward_residual.norm")):
            for kind in ("weight", "bias"):
                ours[f"{mine}.{our_norm}.{kind}"] = state[f"{theirs}.{their_norm}.{kind}"]
    return ours


def randomize(model: torch.nn.Module, seed: int) -> None:
    """Every parameter drawn anew: norm weights 1 + N(0, 0.1^2) (Gemma's (1 + w): w as that, a scale near 2), norm
    biases N(0, 0.1^2), everything else N(0, 0.3^2); buffers (rotary frequencies, Gemma's embedding scale) kept."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, tensor in model.named_parameters():
            noise = torch.randn(tensor.shape, generator=generator, dtype=torch.float64)
            if ("norm" in name or ".ln_" in name) and name.endswith("weight"):
                tensor.copy_(1 + 0.1 * noise)
            elif "norm" in name or ".ln_" in name:
                tensor.copy_(0.1 * noise)
            else:
                tensor.copy_(0.3 * noise)


def build_pair(name: str, seed: int = 0) -> Pair:
    """The reference model of ``name`` with random weights (built in float64), and ours from its config and state."""
    from transformers import AutoModelForCausalLM

    with torch.random.fork_rng():  # transformers initialises from the global generator: keep it unchanged
        reference = AutoModelForCausalLM.from_config(reference_config(name), dtype=torch.float64)
    randomize(reference, seed)
    reference = reference.eval()
    config = config_of(name, reference.config)
    with torch.device("meta"):
        ours = Transformer(config)
    ours.to_empty(device="cpu")
    ours.tie_weights()
    ours = ours.double()
    load_weights(ours, weights_of(name, reference.state_dict(), config), where=name)
    return Pair(name, reference, ours.eval())


def batch(seed: int = 1, length: int = LENGTH) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids (3, length), attention_mask (3, length)): ordinary ids, the second row left-padded by 4 and the third by
    9 (pad id 0, mask 0 there), as a tokenizer pads a batch of prompts for generation."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, VOCAB, (3, length), generator=generator)
    mask = torch.ones(3, length, dtype=torch.long)
    for row, pad in ((1, 4), (2, 9)):
        ids[row, :pad], mask[row, :pad] = 0, 0
    return ids, mask
