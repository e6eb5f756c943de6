"""The layers of the two stacks (section 3.1 and 3.3 of the paper).

Every sub-layer sits in a residual connection followed by layer normalisation:

    post-LN (paper):  LayerNorm(x + Dropout(Sublayer(x)))
    pre-LN (option):  x + Dropout(Sublayer(LayerNorm(x)))
"""

from __future__ import annotations

from collections.abc import Callable

import torch.nn.functional as F
from torch import Tensor, nn

from .attention import KVCache, MultiHeadAttention
from .config import TransformerConfig
from .sites import site
from .trace import Trace

_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu}


def dropout(p: float) -> nn.Module:
    """Dropout with drop probability p (section 5.4 of the paper); a model built with p = 0 has none at all."""
    return nn.Dropout(p) if p > 0 else nn.Identity()


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, applied to each position separately (eq. 2).

    The non-linearity is the paper's ReLU by default; GELU, or SiLU (x * sigmoid(x), Marian's "swish"), by config.
    """

    def __init__(self, d_model: int, d_ff: int, p_drop: float, activation: str) -> None:
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = dropout(p_drop)
        self.activation = _ACTIVATIONS[activation]

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(self.dropout(self.activation(self.w_1(x))))


class SublayerConnection(nn.Module):
    """The residual connection and LayerNorm around one sub-layer, post-LN or pre-LN."""

    def __init__(self, d_model: int, p_drop: float, norm_first: bool, eps: float) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.dropout = dropout(p_drop)
        self.norm_first = norm_first

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor], trace: Trace | None = None,
                name: str = "") -> Tensor:
        """x + Sublayer(LN(x)) (pre-LN) or LN(x + Sublayer(x)) (post-LN). Sites ``{name}.stream`` (x, what the
        sub-layer reads and is added to) and ``{name}.update`` (its output)."""
        x = site(f"{name}.stream", x, trace)
        update = site(f"{name}.update", sublayer(self.norm(x) if self.norm_first else x), trace)
        if self.norm_first:
            return x + self.dropout(update)
        return self.norm(x + self.dropout(update))


class EncoderLayer(nn.Module):
    """Multi-head self-attention, then the feed-forward network."""

    def __init__(self, config: TransformerConfig, index: int) -> None:
        super().__init__()
        c = config
        self.name = f"encoder.{index}"
        self.self_attn = MultiHeadAttention(c.d_model, c.n_heads, c.dropout, f"{self.name}.self_attn")
        self.feed_forward = FeedForward(c.d_model, c.d_ff, c.dropout, c.activation)
        self.sublayer1 = SublayerConnection(c.d_model, c.dropout, c.norm_first, c.layer_norm_eps)
        self.sublayer2 = SublayerConnection(c.d_model, c.dropout, c.norm_first, c.layer_norm_eps)

    def forward(self, x: Tensor, mask: Tensor | None, trace: Trace | None = None) -> Tensor:
        """x: (B, S, D), mask: (B, 1, 1, S) -> (B, S, D)."""
        x = self.sublayer1(x, lambda h: self.self_attn(h, h, mask, trace=trace), trace, f"{self.name}.self_attn")
        x = self.sublayer2(x, self.feed_forward, trace, f"{self.name}.feed_forward")
        return site(f"{self.name}.output", x, trace)


class DecoderLayer(nn.Module):
    """Masked self-attention, then attention over the encoder output, then feed-forward."""

    def __init__(self, config: TransformerConfig, index: int) -> None:
        super().__init__()
        c = config
        self.name = f"decoder.{index}"
        self.self_attn = MultiHeadAttention(c.d_model, c.n_heads, c.dropout, f"{self.name}.self_attn")
        self.cross_attn = MultiHeadAttention(c.d_model, c.n_heads, c.dropout, f"{self.name}.cross_attn")
        self.feed_forward = FeedForward(c.d_model, c.d_ff, c.dropout, c.activation)
        self.sublayer1 = SublayerConnection(c.d_model, c.dropout, c.norm_first, c.layer_norm_eps)
        self.sublayer2 = SublayerConnection(c.d_model, c.dropout, c.norm_first, c.layer_norm_eps)
        self.sublayer3 = SublayerConnection(c.d_model, c.dropout, c.norm_first, c.layer_norm_eps)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        self_mask: Tensor | None,
        memory_mask: Tensor | None,
        trace: Trace | None = None,
        cache: KVCache | None = None,
    ) -> Tensor:
        """x: (B, T, D), memory: (B, S, D), self_mask: (B|1, 1, T, T_k), memory_mask: (B, 1, 1, S)."""
        x = self.sublayer1(x, lambda h: self.self_attn(h, h, self_mask, trace=trace, cache=cache), trace,
                           f"{self.name}.self_attn")
        x = self.sublayer2(
            x, lambda h: self.cross_attn(h, memory, memory_mask, trace=trace, cache=cache, static_kv=True), trace,
            f"{self.name}.cross_attn")
        x = self.sublayer3(x, self.feed_forward, trace, f"{self.name}.feed_forward")
        return site(f"{self.name}.output", x, trace)


def _final_norm(config: TransformerConfig) -> nn.Module:
    """The LayerNorm after a stack (torch.nn.Transformer has one; post-LN Marian has none: then the identity)."""
    return nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.final_norm else nn.Identity()


class Encoder(nn.Module):
    """N encoder layers and a final LayerNorm (as torch.nn.Transformer has; ``final_norm=False``: none)."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(config, i) for i in range(config.n_encoder_layers))
        self.norm = _final_norm(config)

    def forward(self, x: Tensor, mask: Tensor | None, trace: Trace | None = None) -> Tensor:
        for layer in self.layers:
            x = layer(x, mask, trace)
        return self.norm(x)


class Decoder(nn.Module):
    """N decoder layers and a final LayerNorm (as torch.nn.Transformer has; ``final_norm=False``: none)."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(config, i) for i in range(config.n_decoder_layers))
        self.norm = _final_norm(config)

    def forward(self, x: Tensor, memory: Tensor, self_mask: Tensor | None, memory_mask: Tensor | None,
                trace: Trace | None = None, cache: KVCache | None = None) -> Tensor:
        for layer in self.layers:
            x = layer(x, memory, self_mask, memory_mask, trace, cache)
        return self.norm(x)
