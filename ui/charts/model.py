"""Charts for the model page: the sizes of figure 1 (the diagram itself is ``ui.sections.architecture``, SVG),
parameters per part, and the comparison with torch.nn.Transformer.

Parameters of one layer, as the config builds it (d = d_model, f = d_ff, d_i = h * d_k, which is d unless a head
has its own width, T5's d_kv): multi-head attention 4 d d_i (W^Q, W^K, W^V, W^O) + 3 d_i + d biases,
feed-forward 2 d f (3 d f gated: W_1, W_3, W_2, T5 v1.1) + f + d biases (2f + d gated), a norm 2 d (LayerNorm:
gain and bias) or d (RMSNorm: gain only); the biases only where the config has them (T5 has none). An encoder
layer has one attention and two norms, a decoder layer two attentions and three; each stack may end with one
more norm, may start with an embedding norm (BART, mBART), and T5's stacks hold a table of relative position
biases (buckets x h). Learned positions (BART, mBART) are a table of (max_len + offset) x d per stack.

A decoder-only model (``config.decoder_only``: GPT-2, Llama, Mistral, Qwen, Gemma) has one stack of layers with one
attention each and no cross-attention, and its keys and values may have fewer heads than its queries (GQA: W^K and
W^V are d x h_kv d_k): attention d (h + 2 h_kv) d_k + h d_k d, biases h d_k + 2 h_kv d_k (+ d where every linear
has them, GPT-2), q/k norms 2 d_k (Qwen3, Gemma-3); two norms per layer, four with Gemma's sandwich norms; one
learned position table (GPT-2) or none (RoPE turns q and k, no parameters).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from transformer.network.config import TransformerConfig

from . import MARGIN, formulas, to_numpy

PARTS = ("src_embed", "tgt_embed", "positional", "encoder", "decoder", "generator")  # positional: learned only
NORM_NAMES = {"layer": "LayerNorm", "rms": "RMSNorm", "rms_float32": "RMSNorm", "rms_unit_offset": "RMSNorm (1 + w)"}
LATEX_NORMS = {"layer": r"\mathrm{LayerNorm}", "rms": r"\mathrm{RMSNorm}", "rms_float32": r"\mathrm{RMSNorm}",
               "rms_unit_offset": r"\mathrm{RMSNorm}_{1 + w}"}  # Gemma: x / rms(x) * (1 + w)
POSITION_NAMES = {  # TransformerConfig.positional -> what the pages call it
    "interleaved": "sinusoid (paper)", "marian": "sinusoid (Marian: sines, then cosines)",
    "fairseq": "sinusoid (fairseq, from pad + 1)", "learned": "learned table per stack",
    "relative": "relative position buckets (T5)", "rotary": "rotary (queries and keys turned by position)",
}


def norm_name(config: TransformerConfig) -> str:
    """"LayerNorm" or "RMSNorm": the model's norm."""
    return NORM_NAMES[config.norm]


def decoder_only_rows(config: TransformerConfig) -> list[tuple[str, Any, str]]:
    """A decoder-only model's sizes and switches (``architecture_table``): one stack, the key/value heads, RoPE and
    its scaling, windows, norms around the sub-layers, soft-caps."""
    c = config
    norm = norm_name(c)
    sliding = formulas.sliding_layers(c)
    rows = [
        ("N", c.n_decoder_layers, "layers of the one stack (no encoder, no cross-attention)"),
        ("d_model", c.d_model, "width of every token vector between the sub-layers"),
        ("h", c.n_heads, "query heads per attention sub-layer"),
        ("h_kv", c.kv_heads, "key/value heads: " + ("one per query head (the paper)" if c.kv_heads == c.n_heads else
                                                    f"each shared by {c.n_heads // c.kv_heads} query heads "
                                                    + ("(multi-query attention)" if c.kv_heads == 1 else
                                                       "(grouped-query attention)"))),
        ("d_k = d_v", c.d_k, "width of one head's queries, keys and values "
         + ("(d_model / h)" if c.d_head is None else f"(its own setting; h * d_k = {c.d_inner})")),
        ("d_ff", c.d_ff, "inner width of the feed-forward network" + (" (two of them, gated)" if c.gated_ff else "")),
        ("vocabulary", c.tgt_vocab_size, "token ids: the prompt's and the continuation's are one vocabulary"),
        ("positions", POSITION_NAMES[c.positional], "how the model knows the order of its tokens"),
    ]
    if c.positional == "rotary":
        local = c.rope_local_theta
        rows.append(("rope_theta", formulas.number(c.rope_theta) + (
            f" (window layers: {formulas.number(local)})" if local is not None else ""),
                     "the base of the rotation wavelengths: dimension pair i turns by theta^(-2i/d_k) per position"))
        if c.rope_scaling != "default":
            rows.append(("rope scaling", f"{c.rope_scaling} x{c.rope_factor:g}",
                         "the frequencies slowed for a longer context than the one first trained"
                         + (f" ({c.rope_original_max_len} positions)" if c.rope_scaling == "llama3" else "")))
    rows += [
        ("max_len", c.max_len, "longest sequence the model's positions cover"),
        ("sliding window", c.sliding_window if c.sliding_window is not None else "none",
         f"a query sees only its last {c.sliding_window} keys on layers {formulas.layer_ranges(sliding)}"
         + ("; every earlier key on the others" if len(sliding) < c.n_decoder_layers else "")
         if sliding else "every layer sees every earlier token"),
        (norm, "sandwich (before and after)" if c.sandwich_norm else "pre-norm" if c.norm_first else "post-norm",
         f"where each sub-layer's {norm} sits" + ("; each head's queries and keys get one too (q/k norm)"
                                                   if c.qk_norm else "")),
        ("activation", c.activation + (" (gated)" if c.gated_ff else ""), "non-linearity of the feed-forward network"),
        ("scores", formulas.config_score(c).replace(")RoPE", ") RoPE"),  # a space: the column may wrap there
         "attention scores before the mask and softmax"),
        ("biases", "yes" if c.bias else "on q, k, v only" if c.qkv_bias else "none",
         "biases in the attention and feed-forward linears"),
        ("embedding scale", f"sqrt({c.d_model})" if c.scale_embedding else "none",
         "what the token embeddings are multiplied by"),
        ("output", "the embedding matrix (tied)" if c.generator_tied else "its own matrix",
         "the weight that turns the last norm's output into scores over the vocabulary"
         + (f", soft-capped at {c.logit_softcap:g}" if c.logit_softcap else "")),
    ]
    return rows


def architecture_table(config: TransformerConfig) -> pd.DataFrame:
    """The model's sizes and switches under the paper's names, with what each one means."""
    c = config
    if c.decoder_only:
        return pd.DataFrame(decoder_only_rows(c), columns=["name", "value", "meaning"]).astype({"value": str})
    norm = norm_name(c)
    rows = [
        ("N (encoder)", c.n_encoder_layers, "encoder layers"),
        ("N (decoder)", c.n_decoder_layers, "decoder layers"),
        ("d_model", c.d_model, "width of every token vector between the sub-layers"),
        ("h", c.n_heads, "attention heads per attention sub-layer"),
        ("d_k = d_v", c.d_k, "width of one head's queries, keys and values "
         + ("(d_model / h)" if c.d_head is None else "(its own setting, d_kv; h * d_k = "
            f"{c.d_inner})")),
        ("d_ff", c.d_ff, "inner width of the feed-forward network" + (" (two of them, gated)" if c.gated_ff
                                                                        else "")),
        ("P_drop", c.dropout, "dropout rate while training (off when the app runs the model)"),
        ("source vocabulary", c.src_vocab_size, "token ids of the source side"),
        ("target vocabulary", c.tgt_vocab_size, "token ids of the target side"),
        ("positions", POSITION_NAMES[c.positional], "how the model knows the order of its tokens"
         + (f" (position p at row p + {c.position_offset})" if c.positional == "learned" and c.position_offset
            else "")),
        ("max_len", c.max_len, "longest sequence the model's positions cover"),
        (norm, "pre-norm" if c.norm_first else "post-norm (paper)", f"where each sub-layer's {norm} sits"),
        ("activation", c.activation + (" (gated)" if c.gated_ff else ""),
         "non-linearity of the feed-forward network"),
        ("scores", formulas.config_score(c), "attention scores before the mask and softmax"
         + ("; bias: each head's relative position bias, in self-attention" if c.positional == "relative"
            else "")),
        ("biases", "yes" if c.bias else "none", "biases in the attention and feed-forward linears"),
        ("embedding norm", "yes" if c.embedding_norm else "no", f"a {norm} right after embedding + position"),
        ("shared embeddings", "yes" if c.shared_embeddings else "no", "the source and target embeddings are one "
         "matrix"),
        ("generator", "the target embedding" if c.generator_tied else "its own matrix",
         "the weight that turns the decoder's output into scores over the target vocabulary"),
    ]
    return pd.DataFrame(rows, columns=["name", "value", "meaning"]).astype({"value": str})


def sublayer_latex(config: TransformerConfig) -> str:
    """This model's residual sub-layer and feed-forward in LaTeX: post-norm (the paper) or pre-norm, LayerNorm or
    RMSNorm (T5: Zhang & Sennrich 2019), the plain or gated (Shazeer 2020) feed-forward, with or without biases."""
    c = config
    norm = LATEX_NORMS[c.norm]
    wrap = (rf"x + \mathrm{{Sublayer}}({norm}(x))" if c.norm_first else rf"{norm}(x + \mathrm{{Sublayer}}(x))")
    if c.sandwich_norm:  # Gemma-2, -3: the sub-layer's output normed too, before the residual sum
        wrap = rf"x + {norm}(\mathrm{{Sublayer}}({norm}(x)))"
    act = {"relu": r"\max(0,\, {})", "gelu": r"\mathrm{{GELU}}({})", "gelu_new": r"\mathrm{{GELU}}_{{\tanh}}({})",
           "gelu_tanh": r"\mathrm{{GELU}}_{{\tanh}}({})", "silu": r"\mathrm{{SiLU}}({})"}[c.activation]
    b1, b2 = (" + b_1", " + b_2") if c.bias else ("", "")
    inner = act.format("xW_1" + b1)
    ffn = (rf"\left({inner} \odot xW_3\right) W_2{b2}" if c.gated_ff else rf"{inner}\,W_2{b2}")
    return rf"{wrap}, \qquad \mathrm{{FFN}}(x) = {ffn}"


def _sizes(config: TransformerConfig) -> dict[str, int]:
    """The parameters of one attention, feed-forward and norm, and the per-stack extras, from the config."""
    c = config
    d, f, inner = c.d_model, c.d_ff, c.d_inner
    return {
        "attention": 4 * d * inner + ((3 * inner + d) if c.bias else 0),
        "feed_forward": (3 if c.gated_ff else 2) * d * f + (((2 if c.gated_ff else 1) * f + d) if c.bias else 0),
        "norm": 2 * d if c.norm == "layer" else d,
        "relative": c.relative_buckets * c.n_heads if c.positional == "relative" else 0,
        "positions": (c.max_len + c.position_offset) * d if c.positional == "learned" else 0,
    }


def _decoder_only_layer(config: TransformerConfig) -> int:
    """One layer of a decoder-only model: attention with h_kv key/value heads, its biases and q/k norms, the
    feed-forward, two norms (four with sandwich norms)."""
    c = config
    d, f, dk, h, kv = c.d_model, c.d_ff, c.d_k, c.n_heads, c.kv_heads
    attention = d * (h + 2 * kv) * dk + h * dk * d
    if c.bias or c.qkv_bias:
        attention += (h + 2 * kv) * dk + (d if c.bias else 0)
    attention += 2 * (2 * dk if c.norm == "layer" else dk) if c.qk_norm else 0
    feed_forward = (3 if c.gated_ff else 2) * d * f + (((2 if c.gated_ff else 1) * f + d) if c.bias else 0)
    norm = 2 * d if c.norm == "layer" else d
    return attention + feed_forward + (4 if c.sandwich_norm else 2) * norm


def _decoder_only_parts(config: TransformerConfig) -> dict[str, int]:
    """``expected_parameters`` of a decoder-only model: the embedding, GPT-2's position table, the stack (with its
    final norm) and the output matrix (with the bias every generator has)."""
    c = config
    parts = {"tgt_embed": c.tgt_vocab_size * c.d_model}
    if c.positional == "learned":
        parts["positional"] = (c.max_len + c.position_offset) * c.d_model
    norm = 2 * c.d_model if c.norm == "layer" else c.d_model
    parts["decoder"] = c.n_decoder_layers * _decoder_only_layer(c) + (norm if c.final_norm else 0)
    parts["generator"] = c.tgt_vocab_size + (0 if c.generator_tied else c.tgt_vocab_size * c.d_model)
    return parts


def expected_parameters(config: TransformerConfig) -> dict[str, int]:
    """Parameters per part from the formulas above (tied weights counted once, in src_embed), with the keys of
    ``count_parameters``: a ``positional`` part only where the positions are learned."""
    c = config
    if c.decoder_only:
        return _decoder_only_parts(c)
    s = _sizes(c)
    extras = s["norm"] * (int(c.final_norm) + int(c.embedding_norm)) + s["relative"]  # per stack
    parts = {
        "src_embed": c.src_vocab_size * c.d_model,
        "tgt_embed": 0 if c.shared_embeddings else c.tgt_vocab_size * c.d_model,
        "positional": 2 * s["positions"],
        "encoder": c.n_encoder_layers * (s["attention"] + s["feed_forward"] + 2 * s["norm"]) + extras,
        "decoder": c.n_decoder_layers * (2 * s["attention"] + s["feed_forward"] + 3 * s["norm"]) + extras,
        "generator": c.tgt_vocab_size + (0 if c.generator_tied else c.tgt_vocab_size * c.d_model),
    }
    if not parts["positional"]:
        del parts["positional"]
    return parts


def parameter_formulas(config: TransformerConfig) -> dict[str, str]:
    """The formula of each part, written for this config (the terms it does not have left out)."""
    c = config
    d_i = "d^2" if c.d_inner == c.d_model else "d d_i"  # d_i = h d_k, T5's heads of their own width
    attention = f"4{d_i}" + ((" + 3d + d" if c.d_inner == c.d_model else " + 3d_i + d") if c.bias else "")
    ffn = ("3 d d_ff" if c.gated_ff else "2 d d_ff") + ((" + 2d_ff + d" if c.gated_ff else " + d_ff + d")
                                                        if c.bias else "")
    norm = "2d" if c.norm == "layer" else "d"
    name = norm_name(c)
    extras = []
    if c.final_norm:
        extras.append(f"{norm} (final {name})")
    if c.embedding_norm:
        extras.append(f"{norm} (embedding {name})")
    if c.positional == "relative":
        extras.append("buckets * h (relative bias table)")
    tail = "".join(f" + {e}" for e in extras)
    if c.decoder_only:
        kv = "(h + 2 h_kv) d_k d + h d_k d" + (" + biases" if c.bias or c.qkv_bias else "") + (
            " + 2 d_k (q/k norms)" if c.qk_norm else "")
        return {"tgt_embed": "V * d_model", "positional": f"(max_len + {c.position_offset}) * d_model (learned)",
                "decoder": f"N * ({kv} + {ffn} + {4 if c.sandwich_norm else 2}*{norm}){tail}",
                "generator": "d_model * V + V (d_model * V counted in the embedding when tied)"}
    return {
        "src_embed": "V_src * d_model",
        "tgt_embed": "V_tgt * d_model (0 when tied)",
        "positional": f"2 * (max_len + {c.position_offset}) * d_model (a learned table per stack)",
        "encoder": f"N * ({attention} + {ffn} + 2*{norm}){tail}",
        "decoder": f"N * (2({attention}) + {ffn} + 3*{norm}){tail}",
        "generator": "d_model * V_tgt + V_tgt (bias only when tied to an embedding)",
    }


def parameter_table(config: TransformerConfig, counts: Mapping[str, int]) -> pd.DataFrame:
    """Parameters per part as counted in the model (``count_parameters``) next to the formula."""
    expected = expected_parameters(config)
    formulas = parameter_formulas(config)
    total = sum(counts.values()) or 1
    frame = pd.DataFrame({
        "part": list(counts),
        "parameters": [int(v) for v in counts.values()],
        "share": [v / total for v in counts.values()],
        "formula": [formulas.get(k, "") for k in counts],
        "formula gives": [expected.get(k) for k in counts],
    })
    totals = pd.DataFrame({"part": ["total"], "parameters": [sum(counts.values())], "share": [1.0],
                           "formula": [""], "formula gives": [sum(expected.get(k, 0) for k in counts)]})
    return pd.concat([frame, totals], ignore_index=True)


def parameter_chart(counts: Mapping[str, int]) -> go.Figure:
    """Bars of the parameters per part."""
    fig = go.Figure(go.Bar(x=list(counts), y=list(counts.values()), text=[f"{v:,}" for v in counts.values()],
                           hovertemplate="%{x}: %{y:,} parameters<extra></extra>"))
    fig.update_layout(title="Parameters per part", yaxis_title="parameters", margin=MARGIN, height=320)
    return fig


def parity_summary(ours: Any, theirs: Any) -> dict[str, Any]:
    """How far two logit tensors of the same input are apart, and whether they predict the same tokens."""
    a, b = to_numpy(ours), to_numpy(theirs)
    if a.shape != b.shape:
        raise ValueError(f"logits of different shapes: {a.shape} vs {b.shape}")
    return {
        "max |difference|": float(np.abs(a - b).max()) if a.size else 0.0,
        "max |logit|": float(np.abs(a).max()) if a.size else 0.0,
        "same predicted tokens": bool((a.argmax(-1) == b.argmax(-1)).all()) if a.size else True,
    }
