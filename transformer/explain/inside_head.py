"""Inside one attention head, for one query token: every step of equation (1) of the paper, as numbers.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

For the query at position i of one head: its query vector q_i = x_i W_i^Q, every key vector
k_j = m_j W_i^K and value vector v_j = m_j W_i^V, the dot products q_i . k_j, their division by
sqrt(d_k), the mask (-inf where the query may not look), the softmax, and the weighted sum of the
value vectors, which is this head's output before W^O mixes the heads. Transformer Explainer
(Cho et al. 2024) shows the computation the same way.

Families whose attention is another equation (network/attention.py's switches) are computed as the model computes
them: T5 (Raffel et al. 2020) divides by nothing (``scale`` 1 where the module's ``scale`` is off) and adds a
relative position bias per head to the self-attention scores (``bias``: the row of ``{stack}.position_bias`` the
query reads; None in cross-attention and where positions are absolute):

    score_j = q_i . k_j * scale + bias_ij,   scale = 1/sqrt(d_k) (or 1, T5)

A decoder-only model's self-attention (network/attention.py) is computed as it computes it too: with rotary
positions q_i and k_j are turned by their positions before the product (Su et al. 2021, RoPE: ``q`` and ``k`` are
the turned vectors, read from the trace's ``.queries`` and ``.keys``, ``q_unrotated`` and ``k_unrotated`` the
projections before the turn, q/k-normed where the model norms them); with grouped-query attention the head reads
key/value head ``kv_head`` (h // (H / H_kv), the trace's ``.kv_heads``); Gemma scales by
query_pre_attn_scalar^-0.5 and Gemma-2 soft-caps the scores, cap * tanh(score / cap) (``softcap``); a sliding
layer's mask is the trace's ``decoder.sliding_mask``:

    score_j = cap * tanh((R_i q_i) . (R_j k_j) * scale / cap)

The sub-layer's inputs are rebuilt from a ``Trace`` of the forward pass (each layer's input is the
previous layer's recorded output), and the projections are the attention module's own
(``MultiHeadAttention._project``), so the numbers are the model's: the weights equal the trace's
weights. Nothing is hooked or changed (the model may be shared by every session of a server).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..network.model import Transformer
from ..network.trace import ATTENTION_KINDS, Trace


@dataclass(frozen=True)
class HeadSteps:
    """The computation of one head for one query (batch item 0); tensors are float64 on the CPU."""

    kind: str
    layer: int
    head: int
    query: int  # the query's position
    d_k: int
    q: Tensor  # (d_k,) the query vector
    k: Tensor  # (T_k, d_k) every key vector
    v: Tensor  # (T_k, d_k) every value vector
    dots: Tensor  # (T_k,) q . k_j
    scaled: Tensor  # (T_k,) q . k_j * scale (/ sqrt(d_k), or as they are in T5)
    allowed: Tensor  # (T_k,) bool: True where the mask lets the query look
    masked: Tensor  # (T_k,) the scores (scaled + bias) with -inf where not allowed
    weights: Tensor  # (T_k,) softmax of the masked scores
    weighted_values: Tensor  # (T_k, d_k) weights_j * v_j
    output: Tensor  # (d_k,) sum of the weighted values: the head's output at this query
    scale: float  # what the dot products are multiplied by: 1/sqrt(d_k), or 1 (T5)
    bias: Tensor | None  # (T_k,) the position bias added to the scores (T5's self-attention), else None
    kv_head: int | None = None  # the key/value head whose k and v the head reads (grouped-query attention), else None
    q_unrotated: Tensor | None = None  # (d_k,) the query before its rotary turn (rotary positions only)
    k_unrotated: Tensor | None = None  # (T_k, d_k) the keys before theirs
    softcap: float | None = None  # the scores' soft cap (Gemma-2): masked = cap * tanh((scaled + bias) / cap)


def attention_inputs(model: Transformer, trace: Trace, kind: str, layer: int) -> tuple[Tensor, Tensor, Tensor | None]:
    """What the attention sub-layer of (kind, layer) received: (query input (B, T_q, D),
    key/value input (B, T_k, D), mask broadcastable to (B, 1, T_q, T_k) or None)."""
    if kind not in ATTENTION_KINDS:
        raise ValueError(f"attention kind must be one of {sorted(ATTENTION_KINDS)}, got {kind!r}")
    stack = ATTENTION_KINDS[kind][0]
    layers = model.encoder.layers if stack == "encoder" else model.decoder.layers
    if not 0 <= layer < len(layers):
        raise ValueError(f"layer {layer} does not exist: the {stack} has {len(layers)} layers")
    module = layers[layer]
    first = "src.input" if stack == "encoder" else "tgt.input"
    x = trace[first] if layer == 0 else trace[f"{stack}.{layer - 1}.output"]  # (B, T, D): the layer's input
    if kind == "encoder":
        return _normed(module.self_attn_residual, x), _normed(module.self_attn_residual, x), trace["encoder.mask"]
    self_mask = trace["decoder.mask"] if "decoder.mask" in trace else None
    if getattr(module, "layer_type", "full") == "sliding" and "decoder.sliding_mask" in trace:
        self_mask = trace["decoder.sliding_mask"]  # this layer's queries see only their last window keys
    if kind == "decoder":
        return _normed(module.self_attn_residual, x), _normed(module.self_attn_residual, x), self_mask
    bias = trace["decoder.position_bias"] if "decoder.position_bias" in trace else None  # T5: (1, H, T, T)
    with torch.no_grad():  # cross-attention reads the stream after the self-attention sub-layer
        after_self = module.self_attn_residual(x, lambda h: module.self_attn(h, h, self_mask, position_bias=bias))
    memory_mask = trace["cross.mask"] if "cross.mask" in trace else None
    return _normed(module.cross_attn_residual, after_self), trace["encoder.output"], memory_mask


def inside_head(model: Transformer, trace: Trace, kind: str, layer: int, head: int, query: int) -> HeadSteps:
    """Every step of one head's attention for query position ``query`` (see the module docstring)."""
    n_heads = model.config.n_heads
    if not 0 <= head < n_heads:
        raise ValueError(f"head {head} does not exist: the model has {n_heads} heads")
    query_in, key_value, mask = attention_inputs(model, trace, kind, layer)
    if not 0 <= query < query_in.size(1):
        raise ValueError(f"query {query} does not exist: there are {query_in.size(1)} query positions")
    stack, sublayer = ATTENTION_KINDS[kind]
    layers = model.encoder.layers if stack == "encoder" else model.decoder.layers
    attention = getattr(layers[layer], sublayer)
    with torch.no_grad():  # unturned: (B, H, T, d_k) queries, (B, H_kv, T, d_k) keys and values
        q_all, k_all, v_all = attention._project(query_in, key_value, None, kind == "cross")
    kv = int(attention.kv_heads()[head])  # the head itself unless key/value heads are shared (GQA)
    q = q_all[0, head, query].double().cpu()
    k, v = k_all[0, kv].double().cpu(), v_all[0, kv].double().cpu()
    q_unrotated = k_unrotated = None
    if f"{attention.name}.queries" in trace:  # rotary: the product reads the turned vectors the trace holds
        q_unrotated, k_unrotated = q, k
        q = trace[f"{attention.name}.queries"][0, head, query].double().cpu()
        k = trace[f"{attention.name}.keys"][0, kv].double().cpu()
    d_k = q.numel()
    dots = k @ q  # (T_k,)
    scale = attention.scaling  # 1/sqrt(d_k), 1 (T5) or query_pre_attn_scalar^-0.5 (Gemma)
    scaled = dots * scale
    bias = None
    site = f"{stack}.position_bias"
    if kind != "cross" and site in trace:  # T5: one table per stack, added in every layer's self-attention
        bias = trace[site][0, head, query].double().cpu()  # (T_k,) of (1, H, T_q, T_k)
    allowed = torch.ones_like(scaled, dtype=torch.bool)
    if mask is not None:
        row = mask.expand(-1, -1, query_in.size(1), -1)[0, 0, query].cpu()  # (T_k,)
        allowed = row if row.dtype == torch.bool else torch.isfinite(row) & (row == 0)
    score = scaled if bias is None else scaled + bias
    if attention.softcap is not None:  # Gemma-2: cap * tanh(score / cap), as attention_scores does
        score = torch.tanh(score / attention.softcap) * attention.softcap
    masked = score.masked_fill(~allowed, float("-inf"))
    # the softmax in float32 where the model takes it so (softmax_float32: the decoder-only families, as transformers)
    weights = torch.softmax(masked, dim=-1, dtype=torch.float32 if attention.softmax_float32 else None).double()
    weighted = weights[:, None] * v  # (T_k, d_k)
    return HeadSteps(kind, layer, head, query, d_k, q, k, v, dots, scaled, allowed, masked, weights, weighted,
                     weighted.sum(dim=0), scale, bias, kv if attention.n_kv_heads != attention.n_heads else None,
                     q_unrotated, k_unrotated, attention.softcap)


def _normed(sublayer: torch.nn.Module, x: Tensor) -> Tensor:
    """The input a sub-layer hands to its function: LayerNorm(x) under pre-LN, x itself under post-LN."""
    if not sublayer.norm_first:
        return x
    with torch.no_grad():
        return sublayer.norm(x)
