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
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .sites import edited, site
from .trace import Trace


def attention_scores(q: Tensor, k: Tensor, mask: Tensor | None = None, *, scale: bool = True,
                     bias: Tensor | None = None) -> Tensor:
    """Q K^T / sqrt(d_k) of equation (1), for one or many heads at once: q (..., T_q, d_k), k (..., T_k, d_k),
    mask broadcastable to (..., T_q, T_k) with True = may attend -> (..., T_q, T_k), masked cells -inf (so
    their softmax weights are exactly 0). ``scale=False``: Q K^T alone (T5); ``bias`` (broadcastable to the
    scores): added before the mask (T5's relative position bias)."""
    scores = q @ k.transpose(-2, -1)  # (..., T_q, T_k)
    if scale:
        scores = scores / math.sqrt(q.size(-1))
    if bias is not None:
        scores = scores + bias
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

    Self-attention appends each new step's keys/values; cross-attention keys/values
    depend only on the encoder output, so they are computed once and reused.
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
    """h parallel attention heads over d_k = d_model / h dimensions each, then W^O.

    ``name`` is the stable dotted name under which a trace records this sub-layer.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float, name: str, *, d_k: int | None = None,
                 bias: bool = True, scale: bool = True) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.d_k = d_k if d_k is not None else d_model // n_heads
        self.name = name
        self.d_model = d_model
        self.d_inner = n_heads * self.d_k  # d_model, unless a head has its own width (T5's d_kv)
        self.scale = scale  # divide the scores by sqrt(d_k) (False: T5)
        # W^Q, W^K and W^V of all heads in one (3 * d_inner, d_model) matrix: rows 0:d are W^Q,
        # d:2d are W^K, 2d:3d are W^V (d = d_inner), and within each block head i owns rows i*d_k:(i+1)*d_k.
        # One matrix lets self-attention project Q, K and V in a single matmul.
        self.in_proj = nn.Linear(d_model, 3 * self.d_inner, bias=bias)
        self.w_o = nn.Linear(self.d_inner, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)  # on the attention weights, as torch.nn.MultiheadAttention does

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
    ) -> Tensor:
        """query: (B, T_q, D), key_value: (B, T_k, D), mask: broadcastable to (B, H, T_q, T_k); position_bias,
        (1|B, H, T_q, T_k), is added to the scores (T5's relative positions, the site ``{stack}.position_bias``).

        With a ``cache``, self-attention (``static_kv=False``) appends this call's keys
        and values to the cached ones; cross-attention (``static_kv=True``) computes them
        on the first call only. Returns (B, T_q, D). Its sites: ``{name}.values``, ``.scores``, ``.weights``
        and ``.heads`` (sites.py).
        """
        n = self.name
        q, k, v = self._project(query, key_value, cache, static_kv)  # each (B, H, T, d_k)
        v = site(f"{n}.values", v, trace)
        if self._fused(trace):
            p = self.dropout.p if self.training else 0.0
            if position_bias is not None:  # an additive mask: the bias, -inf where the mask forbids
                mask = position_bias if mask is None else torch.where(mask, position_bias, float("-inf"))
            heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p,
                                                   scale=None if self.scale else 1.0)
        else:
            scores = site(f"{n}.scores", attention_scores(q, k, mask, scale=self.scale, bias=position_bias),
                          trace)  # (B, H, T_q, T_k)
            weights = site(f"{n}.weights", torch.softmax(scores, dim=-1), trace)
            heads = self.dropout(weights) @ v
        heads = site(f"{n}.heads", heads, trace)  # (B, H, T_q, d_k): where ablation silences a head
        batch, _, t_q, _ = heads.shape
        concat = heads.transpose(1, 2).reshape(batch, t_q, self.d_inner)  # (B, T_q, H * d_k): Concat(heads)
        return self.w_o(concat)

    def value_weights(self) -> tuple[Tensor, Tensor]:
        """W^V (h * d_k, d_model) and b^V (h * d_k,), rows 2d:3d of ``in_proj`` (b^V zeros where the layer has no
        biases, T5): for methods that follow the value path themselves (explain/alti.py, attention_maps.py)."""
        d = self.d_inner
        weight = self.in_proj.weight[2 * d:]
        bias = self.in_proj.bias
        return weight, bias[2 * d:] if bias is not None else weight.new_zeros(d)

    def output_bias(self) -> Tensor:
        """b^O (d_model,), zeros where the layer has no biases (T5)."""
        bias = self.w_o.bias
        return bias if bias is not None else self.w_o.weight.new_zeros(self.d_model)

    def _fused(self, trace: Trace | None) -> bool:
        """Whether the fused kernel may run: nobody reads or edits the weights, and its own dropout is the
        module's (module docstring)."""
        if trace is not None or edited(f"{self.name}.scores", f"{self.name}.weights"):
            return False
        return not self.training or self.dropout.p == 0 or type(self.dropout) is nn.Dropout

    def _project(
        self, query: Tensor, key_value: Tensor, cache: KVCache | None, static_kv: bool
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Q = query W^Q, K = key_value W^K, V = key_value W^V, split into heads (B, H, T, d_k)."""
        d, w, b = self.d_inner, self.in_proj.weight, self.in_proj.bias
        b_q, b_kv = (None, None) if b is None else (b[:d], b[d:])
        if cache is not None and static_kv and self.name in cache.keys_values:
            k, v = cache.keys_values[self.name]  # cross-attention keys/values of an earlier step
            return self._split(F.linear(query, w[:d], b_q)), k, v

        if query is key_value:  # self-attention: one matmul for Q, K and V together
            q, k, v = F.linear(query, w, b).chunk(3, dim=-1)
        else:  # cross-attention: queries from the decoder, keys and values from the memory
            q = F.linear(query, w[:d], b_q)
            k, v = F.linear(key_value, w[d:], b_kv).chunk(2, dim=-1)
        q, k, v = self._split(q), self._split(k), self._split(v)

        if cache is not None:
            if not static_kv and self.name in cache.keys_values:
                past_k, past_v = cache.keys_values[self.name]
                k, v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
            cache.keys_values[self.name] = (k, v)
        return q, k, v

    def _split(self, x: Tensor) -> Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.n_heads, self.d_k).transpose(1, 2)  # (B, H, T, d_k)
