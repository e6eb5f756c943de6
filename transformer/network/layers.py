"""The layers of the two stacks (section 3.1 and 3.3 of the paper).

Every sub-layer sits in a residual connection followed by layer normalisation:

    post-LN (paper):  LayerNorm(x + Dropout(Sublayer(x)))
    pre-LN (option):  x + Dropout(Sublayer(LayerNorm(x)))
"""

from __future__ import annotations

import re
from collections.abc import Callable

from torch import Tensor, nn

from .attention import KVCache, MultiHeadAttention
from .config import TransformerConfig
from .feed_forward import FeedForward, dropout
from .norms import make_norm
from .relative_position import RelativePositionBias
from .sites import site
from .trace import Trace

__all__ = ["SUBLAYERS", "Decoder", "DecoderLayer", "Encoder", "EncoderLayer", "FeedForward", "SublayerConnection",
           "dropout", "legacy_name"]

# The sub-layers of each stack's layers, in order; each sits in a residual connection ``{sub-layer}_residual``.
SUBLAYERS = {"encoder": ("self_attn", "feed_forward"), "decoder": ("self_attn", "cross_attn", "feed_forward")}
_LEGACY = re.compile(r"^(encoder|decoder)\.layers\.(\d+)\.sublayer([123])\.")


def legacy_name(name: str) -> str:
    """A parameter name of a checkpoint saved before the residual connections were named for their sub-layer:
    ``decoder.layers.0.sublayer2.norm.weight`` -> ``decoder.layers.0.cross_attn_residual.norm.weight``; any other
    name unchanged."""
    match = _LEGACY.match(name)
    if match is None or int(match.group(3)) > len(SUBLAYERS[match.group(1)]):
        return name
    sublayer = SUBLAYERS[match.group(1)][int(match.group(3)) - 1]
    return f"{match.group(1)}.layers.{match.group(2)}.{sublayer}_residual." + name[match.end():]


def _attention(config: TransformerConfig, name: str) -> MultiHeadAttention:
    """One attention sub-layer with the config's switches (head width, biases, the 1/sqrt(d_k) scale)."""
    c = config
    return MultiHeadAttention(c.d_model, c.n_heads, c.dropout, name, d_k=c.d_k, bias=c.bias, scale=c.scale_attention)


class SublayerConnection(nn.Module):
    """The residual connection and norm (LayerNorm, or RMSNorm: norms.py) around one sub-layer, post- or pre-LN."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.norm = make_norm(config)
        self.dropout = dropout(config.dropout)
        self.norm_first = config.norm_first

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
        self.self_attn = _attention(c, f"{self.name}.self_attn")
        self.feed_forward = FeedForward(c)
        self.self_attn_residual = SublayerConnection(c)
        self.feed_forward_residual = SublayerConnection(c)

    def forward(self, x: Tensor, mask: Tensor | None, trace: Trace | None = None,
                position_bias: Tensor | None = None) -> Tensor:
        """x: (B, S, D), mask: (B, 1, 1, S), position_bias: (1, H, S, S) or None -> (B, S, D)."""
        x = self.self_attn_residual(
            x, lambda h: self.self_attn(h, h, mask, trace=trace, position_bias=position_bias), trace,
            f"{self.name}.self_attn")
        x = self.feed_forward_residual(x, self.feed_forward, trace, f"{self.name}.feed_forward")
        return site(f"{self.name}.output", x, trace)


class DecoderLayer(nn.Module):
    """Masked self-attention, then attention over the encoder output, then feed-forward."""

    def __init__(self, config: TransformerConfig, index: int) -> None:
        super().__init__()
        c = config
        self.name = f"decoder.{index}"
        self.self_attn = _attention(c, f"{self.name}.self_attn")
        self.cross_attn = _attention(c, f"{self.name}.cross_attn")
        self.feed_forward = FeedForward(c)
        self.self_attn_residual = SublayerConnection(c)
        self.cross_attn_residual = SublayerConnection(c)
        self.feed_forward_residual = SublayerConnection(c)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        self_mask: Tensor | None,
        memory_mask: Tensor | None,
        trace: Trace | None = None,
        cache: KVCache | None = None,
        position_bias: Tensor | None = None,
    ) -> Tensor:
        """x: (B, T, D), memory: (B, S, D), self_mask: (B|1, 1, T, T_k), memory_mask: (B, 1, 1, S),
        position_bias: (1, H, T, T_k) or None (self-attention only, as T5)."""
        x = self.self_attn_residual(
            x, lambda h: self.self_attn(h, h, self_mask, trace=trace, cache=cache, position_bias=position_bias),
            trace, f"{self.name}.self_attn")
        x = self.cross_attn_residual(
            x, lambda h: self.cross_attn(h, memory, memory_mask, trace=trace, cache=cache, static_kv=True), trace,
            f"{self.name}.cross_attn")
        x = self.feed_forward_residual(x, self.feed_forward, trace, f"{self.name}.feed_forward")
        return site(f"{self.name}.output", x, trace)


def _final_norm(config: TransformerConfig, output_scale: float = 1.0) -> nn.Module:
    """The norm after a stack (torch.nn.Transformer has one; post-LN Marian and BART have none: the identity)."""
    return make_norm(config, output_scale) if config.final_norm else nn.Identity()


def _embedding_norm(config: TransformerConfig) -> nn.Module | None:
    """The norm right after embeddings + positions (BART, mBART: ``layernorm_embedding``), or None."""
    return make_norm(config) if config.embedding_norm else None


def _relative_bias(config: TransformerConfig, bidirectional: bool) -> RelativePositionBias | None:
    """The stack's relative position bias table (T5), or None for absolute positions."""
    if config.positional != "relative":
        return None
    return RelativePositionBias(config.n_heads, config.relative_buckets, config.relative_max_distance, bidirectional)


class Encoder(nn.Module):
    """N encoder layers and a final norm (as torch.nn.Transformer has; ``final_norm=False``: none); with relative
    positions, the stack's bias table (bidirectional), its bias computed once and added in every layer."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.embed_norm = _embedding_norm(config)
        self.relative_bias = _relative_bias(config, bidirectional=True)
        self.layers = nn.ModuleList(EncoderLayer(config, i) for i in range(config.n_encoder_layers))
        self.norm = _final_norm(config)

    def forward(self, x: Tensor, mask: Tensor | None, trace: Trace | None = None) -> Tensor:
        bias = None
        if self.relative_bias is not None:
            bias = site("encoder.position_bias", self.relative_bias(x.size(1), x.size(1)), trace)  # (1, H, S, S)
        for layer in self.layers:
            x = layer(x, mask, trace, bias)
        return self.norm(x)


class Decoder(nn.Module):
    """N decoder layers and a final norm (as torch.nn.Transformer has; ``final_norm=False``: none; with
    ``rescale_output`` times d_model^-0.5, T5 v1.0); with relative positions, the stack's causal bias table."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.embed_norm = _embedding_norm(config)
        self.relative_bias = _relative_bias(config, bidirectional=False)
        self.layers = nn.ModuleList(DecoderLayer(config, i) for i in range(config.n_decoder_layers))
        self.norm = _final_norm(config, config.d_model**-0.5 if config.rescale_output else 1.0)

    def forward(self, x: Tensor, memory: Tensor, self_mask: Tensor | None, memory_mask: Tensor | None,
                trace: Trace | None = None, cache: KVCache | None = None) -> Tensor:
        bias = None
        if self.relative_bias is not None:  # queries at offset.., keys from 0 (the cached ones first)
            t, offset = x.size(1), cache.offset if cache is not None else 0
            bias = site("decoder.position_bias", self.relative_bias(t, offset + t, offset), trace)  # (1, H, T, T_k)
        for layer in self.layers:
            x = layer(x, memory, self_mask, memory_mask, trace, cache, bias)
        return self.norm(x)
