"""What each token sends through an attention block, as ALTI+ (alti.py) and the value-weighted norm
(attention_maps.py) read it: the per-head value vectors, and a norm as the linear map it is for one row.

Head h of a block moves α^h_ij (v_j W^V_{g(h)} + b^V_{g(h)}) W^O_h from token j to token i. With grouped-query
attention (Ainslie et al. 2023) query head h reads key/value head g(h) = h // (H / H_kv) (``kv_heads``): the value
vector is the group's, the weight α^h and the slice W^O_h of the output matrix are the head's own. Rotary positions
turn the queries and keys only, so they live in α and nowhere else; so do q/k norms, soft-capped scores and
sliding windows.

A norm is not linear, but at a fixed row it is a linear map once its statistic is taken as the row's own (ALTI's
reading of post-LN, Ferrando et al. 2022, section 3): LayerNorm L_i(v) = γ ⊙ (v − mean(v)) / σ_i, RMSNorm
N_i(v) = g ⊙ v / rms_i, with σ_i, rms_i those of the vector z_i the norm actually reads (g the weight, or 1 + w in
Gemma's form; times the norm's output scale). Summed over the contributors j, the images add up to the norm's output
(less the bias β, which belongs to no token). The network computes some RMSNorms in float32 (norms.py); this map
is the same function in the model's dtype, so the two agree to float32 rounding there.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from ..network.attention import MultiHeadAttention
from ..network.norms import RMSNorm


def head_values(attention: MultiHeadAttention, x: Tensor) -> Tensor:
    """Each query head's value vectors v_j W^V_{g(h)} + b^V_{g(h)}: x (B, T, D), as the block reads its values, ->
    (B, T, H, d_k) (a key/value head repeated for each query head of its group)."""
    w_v, b_v = attention.value_weights()  # (H_kv * d_k, D), (H_kv * d_k,)
    values = (x @ w_v.T + b_v).view(*x.shape[:2], attention.n_kv_heads, attention.d_k)  # (B, T, H_kv, d_k)
    return values.index_select(2, attention.kv_heads(x.device))  # (B, T, H, d_k)


def moved_vectors(attention: MultiHeadAttention, x_kv: Tensor, weights: Tensor) -> Tensor:
    """Σ_h α^h_ij (v_j W^V_{g(h)} + b^V) W^O_h: weights (B, H, Tq, Tk), x_kv (B, Tk, D) -> (B, Tq, Tk, D)."""
    values = head_values(attention, x_kv)  # (B, Tk, H, d_k)
    w_o = attention.w_o.weight.view(attention.d_model, attention.n_heads, attention.d_k)  # (D, H, d_k)
    return torch.einsum("bhqk,bkhe,dhe->bqkd", weights, values, w_o)


def frozen_norm(norm: nn.Module, z: Tensor) -> Callable[[Tensor], Tensor]:
    """``norm`` as the linear map it is at each row's own statistic (module docstring): z (B, Tq, D), what the norm
    reads, -> a map of contributor vectors (B, Tq, n, D) -> (B, Tq, n, D). ValueError for another module."""
    scale = getattr(norm, "output_scale", 1.0)
    if isinstance(norm, nn.LayerNorm):
        sigma = torch.sqrt(z.var(dim=-1, unbiased=False, keepdim=True) + norm.eps)[:, :, None]  # (B, Tq, 1, 1)
        return lambda v: norm.weight * (v - v.mean(dim=-1, keepdim=True)) / sigma * scale
    if isinstance(norm, RMSNorm):
        rms = torch.sqrt(z.pow(2).mean(dim=-1, keepdim=True) + norm.eps)[:, :, None]  # (B, Tq, 1, 1)
        gain = 1 + norm.weight if norm.kind == "rms_unit_offset" else norm.weight
        return lambda v: gain * v / rms * scale
    raise ValueError(f"no linear reading of a {type(norm).__name__} is written")
