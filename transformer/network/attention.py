"""Scaled dot-product attention and multi-head attention (section 3.2 of the paper).

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V
    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,  head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

Two paths give the same result:
- the fused path calls ``F.scaled_dot_product_attention`` and never materialises the attention matrix;
- the explicit path computes the scores and weights as the equation reads, so a trace can record them and
  ``intervene`` can edit them (sites ``{name}.scores`` and ``{name}.weights``). It runs when a trace or an
  edit asks for them, and for a dropout module that is not ``nn.Dropout`` itself (train/dropout.py draws
  its masks from a run's own generator; the fused kernel would draw them from torch's global one).

Switches of other families (network/config.py): T5 divides by nothing (``scale_attention=False``), has no
biases in its projections (``bias=False``), may give a head other than d_model / h dimensions (``d_head``),
and adds a position bias per head to the scores of self-attention (relative_position.py):

    scores = Q K^T (/ sqrt(d_k)) + bias,   masked cells -inf

The decoder-only families add: rotary positions, Q and K turned by their position before the product (rotary.py);
fewer key/value heads than query heads (grouped-query attention: Ainslie et al. 2023, "GQA"; one key/value head,
multi-query attention: Shazeer 2019), query head h reading key/value head h // (H / H_kv) (the site
``{name}.kv_heads``); a norm of each head's queries and keys (``qk_norm``: Qwen3, Gemma-3); biases on W^Q, W^K,
W^V only (``qkv_bias``: Qwen2); the scale query_pre_attn_scalar^-0.5 (Gemma); soft-capped scores,
cap * tanh(scores / cap) (Gemma-2); and the softmax in float32 whatever the dtype (``softmax_float32``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .config import TransformerConfig
from .norms import make_norm
from .rotary import rotate
from .sites import edited, site
from .trace import Trace

Rotation = tuple[Tensor, Tensor]  # cos and sin of the positions, each (B|1, L, d_k) (rotary.py)


def attention_scores(q: Tensor, k: Tensor, mask: Tensor | None = None, *, scale: bool | float = True,
                     bias: Tensor | None = None, softcap: float | None = None) -> Tensor:
    """Q K^T / sqrt(d_k) of equation (1), for one or many heads at once: q (..., T_q, d_k), k (..., T_k, d_k),
    mask broadcastable to (..., T_q, T_k) with True = may attend -> (..., T_q, T_k), masked cells -inf (so
    their softmax weights are exactly 0). ``scale=False``: Q K^T alone (T5); a number: Q K^T times it (Gemma's
    query_pre_attn_scalar^-0.5); ``bias`` (broadcastable to the scores): added before the mask (T5's relative
    position bias); ``softcap``: scores -> softcap * tanh(scores / softcap) before the mask (Gemma-2)."""
    scores = q @ k.transpose(-2, -1)  # (..., T_q, T_k)
    if scale is True:
        scores = scores / math.sqrt(q.size(-1))
    elif scale is not False:
        scores = scores * scale
    if bias is not None:
        scores = scores + bias
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    return scores if mask is None else scores.masked_fill(~mask, float("-inf"))


def scaled_dot_product_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """The explicit form of equation (1): v (..., T_k, d_v) besides q, k and mask as ``attention_scores``.
    Returns (output (..., T_q, d_v), scores (..., T_q, T_k), weights (..., T_q, T_k))."""
    scores = attention_scores(q, k, mask)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, scores, weights


class KVCache:
    """Keys and values from earlier decoding steps; belongs to one generation call.

    Self-attention appends each new step's keys/values (only the key/value heads: with grouped-query attention
    fewer than the query heads; a sliding-window layer keeps only the last window - 1, all a later query sees);
    cross-attention keys/values depend only on the encoder output, so they are computed once and reused.
    ``offset`` counts the target positions already decoded (for positional encoding).
    """

    def __init__(self) -> None:
        self.keys_values: dict[str, tuple[Tensor, Tensor]] = {}
        self.offset = 0

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` (in that order): how beam search follows parents."""
        self.keys_values = {
            name: (k.index_select(0, index), v.index_select(0, index)) for name, (k, v) in self.keys_values.items()
        }


class MultiHeadAttention(nn.Module):
    """h parallel attention heads over d_k = d_model / h dimensions each, then W^O; H_kv <= h key/value heads.

    ``name`` is the stable dotted name under which a trace records this sub-layer.
    """

    def __init__(self, config: TransformerConfig, name: str, window: int | None = None) -> None:
        super().__init__()
        c = config
        self.window = window  # a sliding layer's: its cache keeps only the keys a later query can still see
        self.n_heads, self.n_kv_heads, self.d_k = c.n_heads, c.kv_heads, c.d_k
        self.name = name
        self.d_model = c.d_model
        self.d_inner = c.n_heads * c.d_k  # d_model, unless a head has its own width (T5's d_kv)
        self.d_kv = c.kv_heads * c.d_k  # the keys' (and values') width: d_inner, unless grouped (GQA)
        # divide the scores by sqrt(d_k) (True), by nothing (False: T5), or multiply by a number (Gemma)
        self.scale: bool | float = (c.query_pre_attn_scalar**-0.5 if c.query_pre_attn_scalar is not None
                                    else True) if c.scale_attention else False
        self.softcap = c.attn_softcap
        self.softmax_float32 = c.softmax_float32
        # W^Q, W^K and W^V of all heads in one (d_inner + 2 * d_kv, d_model) matrix: rows 0:d are W^Q,
        # then d_kv rows of W^K and d_kv of W^V (d = d_inner), and within each block head i owns rows
        # i*d_k:(i+1)*d_k. One matrix lets self-attention project Q, K and V in a single matmul.
        self.in_proj = nn.Linear(c.d_model, self.d_inner + 2 * self.d_kv, bias=c.bias or c.qkv_bias)
        self.w_o = nn.Linear(self.d_inner, c.d_model, bias=c.bias)
        self.q_norm = make_norm(c, width=c.d_k) if c.qk_norm else None  # per head, over d_k (Qwen3, Gemma-3)
        self.k_norm = make_norm(c, width=c.d_k) if c.qk_norm else None
        self.dropout = nn.Dropout(c.dropout)  # on the attention weights, as torch.nn.MultiheadAttention does

    @property
    def scaling(self) -> float:
        """The factor of Q K^T: 1/sqrt(d_k) (paper), 1 (T5) or query_pre_attn_scalar^-0.5 (Gemma)."""
        return 1 / math.sqrt(self.d_k) if self.scale is True else 1.0 if self.scale is False else self.scale

    def kv_heads(self, device: torch.device | None = None) -> Tensor:
        """Which key/value head each query head reads: (H,) int64, h // (H / H_kv) (GQA; arange(H) without)."""
        return torch.arange(self.n_heads, device=device) // (self.n_heads // self.n_kv_heads)

    def forward(
        self,
        query: Tensor,
        key_value: Tensor,
        mask: Tensor | None = None,
        *,
        trace: Trace | None = None,
        cache: KVCache | None = None,
        static_kv: bool = False,
        position_bias: Tensor | None = None,
        rotary: Rotation | None = None,
    ) -> Tensor:
        """query: (B, T_q, D), key_value: (B, T_k, D), mask: broadcastable to (B, H, T_q, T_k); position_bias,
        (1|B, H, T_q, T_k), is added to the scores (T5's relative positions, the site ``{stack}.position_bias``);
        ``rotary``: cos and sin of this call's positions, which turn the queries and keys (self-attention only).

        With a ``cache``, self-attention (``static_kv=False``) appends this call's keys
        and values to the cached ones; cross-attention (``static_kv=True``) computes them
        on the first call only. Returns (B, T_q, D). Its sites: ``{name}.values``, ``.scores``, ``.weights``
        and ``.heads``; with rotary positions ``.queries`` and ``.keys`` (turned); with fewer key/value heads
        than query heads ``.kv_heads`` (sites.py).
        """
        q, k, v = self._project(query, key_value, cache, static_kv, rotary, trace)  # (B, H|H_kv, T, d_k)
        if mask is not None and mask.size(-1) > k.size(2):  # a sliding layer's cache dropped keys out of reach
            mask = mask[..., -k.size(2):]
        return self.attend(q, k, v, mask, trace=trace, position_bias=position_bias)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, *, trace: Trace | None = None,
               position_bias: Tensor | None = None) -> Tensor:
        """What ``forward`` does after the projections: q (B, H, T_q, d_k), k and v (B, H_kv, T_k, d_k) as
        ``_project`` gives them -> MultiHead (B, T_q, D), through the sites from ``.values`` on. Value zeroing
        (explain/value_zeroing.py) calls it with the projections of the original run, a few query rows per copy."""
        n = self.name
        v = site(f"{n}.values", v, trace)
        fused = self._fused(trace, q.dtype)
        # GQA: query head h reads key/value head kv_heads[h]; the fused kernel reads the groups itself
        # (``enable_gqa``) unless someone edits them, so that no copy of the keys and values per query head is made
        grouped = self.n_kv_heads != self.n_heads and fused and not edited(f"{n}.kv_heads")
        if self.n_kv_heads != self.n_heads and not grouped:
            group = site(f"{n}.kv_heads", self.kv_heads(q.device), trace)  # (H,)
            k, v = k.index_select(1, group), v.index_select(1, group)  # (B, H, T_k, d_k)
        if fused:
            p = self.dropout.p if self.training else 0.0
            if position_bias is not None:  # an additive mask: the bias, -inf where the mask forbids
                mask = position_bias if mask is None else torch.where(mask, position_bias, float("-inf"))
            heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p, enable_gqa=grouped,
                                                   scale=None if self.scale is True else self.scaling)
        else:
            scores = site(f"{n}.scores", attention_scores(q, k, mask, scale=self.scale, bias=position_bias,
                                                          softcap=self.softcap), trace)  # (B, H, T_q, T_k)
            if self.softmax_float32:
                weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(scores.dtype)
            else:
                weights = torch.softmax(scores, dim=-1)
            weights = site(f"{n}.weights", weights, trace)
            heads = self.dropout(weights) @ v
        heads = site(f"{n}.heads", heads, trace)  # (B, H, T_q, d_k): where ablation silences a head
        batch, _, t_q, _ = heads.shape
        concat = heads.transpose(1, 2).reshape(batch, t_q, self.d_inner)  # (B, T_q, H * d_k): Concat(heads)
        return self.w_o(concat)

    def value_weights(self) -> tuple[Tensor, Tensor]:
        """W^V (H_kv * d_k, d_model) and b^V (H_kv * d_k,), the last rows of ``in_proj`` (b^V zeros where the layer
        has no biases, T5): for methods that follow the value path themselves (explain/alti.py, attention_maps.py)."""
        start = self.d_inner + self.d_kv
        weight = self.in_proj.weight[start:]
        bias = self.in_proj.bias
        return weight, bias[start:] if bias is not None else weight.new_zeros(self.d_kv)

    def output_bias(self) -> Tensor:
        """b^O (d_model,), zeros where the layer has no biases (T5)."""
        bias = self.w_o.bias
        return bias if bias is not None else self.w_o.weight.new_zeros(self.d_model)

    def _fused(self, trace: Trace | None, dtype: torch.dtype) -> bool:
        """Whether the fused kernel may run: nobody reads or edits the weights, its own dropout is the module's,
        and it computes what the explicit path does: no soft-capping, no float32 softmax of float64 scores
        (module docstring)."""
        if trace is not None or edited(f"{self.name}.scores", f"{self.name}.weights"):
            return False
        if self.softcap is not None or (self.softmax_float32 and dtype == torch.float64):
            return False
        return not self.training or self.dropout.p == 0 or type(self.dropout) is nn.Dropout

    def _project(
        self, query: Tensor, key_value: Tensor, cache: KVCache | None, static_kv: bool,
        rotary: Rotation | None = None, trace: Trace | None = None,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Q = query W^Q, K = key_value W^K, V = key_value W^V, split into heads: q (B, H, T, d_k), k and v
        (B, H_kv, T, d_k); each head's q and k normed (``qk_norm``) and turned (``rotary``, sites ``.queries``
        and ``.keys``), the keys and values then appended to the cache."""
        d, w, b = self.d_inner, self.in_proj.weight, self.in_proj.bias
        b_q, b_kv = (None, None) if b is None else (b[:d], b[d:])
        if cache is not None and static_kv and self.name in cache.keys_values:
            k, v = cache.keys_values[self.name]  # cross-attention keys/values of an earlier step
            return self._split(F.linear(query, w[:d], b_q)), k, v

        if query is key_value:  # self-attention: one matmul for Q, K and V together
            q, k, v = F.linear(query, w, b).split((d, self.d_kv, self.d_kv), dim=-1)
        else:  # cross-attention: queries from the decoder, keys and values from the memory
            q = F.linear(query, w[:d], b_q)
            k, v = F.linear(key_value, w[d:], b_kv).chunk(2, dim=-1)
        q, k, v = self._split(q), self._split(k), self._split(v)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if rotary is not None:
            q = site(f"{self.name}.queries", rotate(q, *rotary), trace)
            k = rotate(k, *rotary)

        if cache is not None:
            if not static_kv and self.name in cache.keys_values:
                past_k, past_v = cache.keys_values[self.name]
                k, v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
            keep = 0 if self.window is None else max(k.size(2) - (self.window - 1), 0)
            cache.keys_values[self.name] = (k[:, :, keep:], v[:, :, keep:])  # the last window - 1, or all
        if rotary is not None:
            k = site(f"{self.name}.keys", k, trace)  # every key a query reads: the cached ones too
        return q, k, v

    def _split(self, x: Tensor) -> Tensor:
        batch, length, width = x.shape
        return x.view(batch, length, width // self.d_k, self.d_k).transpose(1, 2)  # (B, H or H_kv, T, d_k)
