"""The layers of the two stacks (section 3.1 and 3.3 of the paper), and the decoder alone of a decoder-only model.

Every sub-layer sits in a residual connection followed by layer normalisation:

    post-LN (paper):  LayerNorm(x + Dropout(Sublayer(x)))
    pre-LN (option):  x + Dropout(Sublayer(LayerNorm(x)))
    sandwich (Gemma): x + Dropout(Norm'(Sublayer(Norm(x))))     (Ding et al. 2021, "CogView": Sandwich-LN)

A decoder-only model (``decoder_only``: GPT-2, Llama, ...) has the decoder stack alone and its layers no
cross-attention. A decoder layer's self-attention is "full" (every earlier key) or "sliding" (the last
``sliding_window`` keys: Mistral's every layer, Gemma's every other or five of six; ``config.layer_type``),
and with rotary positions a sliding layer may turn its queries and keys by a base of its own (Gemma-3).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from torch import Tensor, nn

from .attention import KVCache, MultiHeadAttention, Rotation
from .config import TransformerConfig
from .feed_forward import FeedForward, dropout
from .norms import make_norm
from .positional import position_scheme
from .relative_position import RelativePositionBias
from .rotary import RotaryEmbedding
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


class SublayerConnection(nn.Module):
    """The residual connection and norm (LayerNorm, or RMSNorm: norms.py) around one sub-layer, post- or pre-LN;
    with ``sandwich_norm`` a second norm of the sub-layer's output (``post_norm``)."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.norm = make_norm(config)
        self.post_norm = make_norm(config) if config.sandwich_norm else None
        self.dropout = dropout(config.dropout)
        self.norm_first = config.norm_first

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor], trace: Trace | None = None,
                name: str = "") -> Tensor:
        """x + Sublayer(LN(x)) (pre-LN) or LN(x + Sublayer(x)) (post-LN). Sites ``{name}.stream`` (x, what the
        sub-layer reads and is added to) and ``{name}.update`` (its output, after the post-norm if any)."""
        x = site(f"{name}.stream", x, trace)
        update = sublayer(self.reads(x))
        if self.post_norm is not None:
            update = self.post_norm(update)
        update = site(f"{name}.update", update, trace)
        if self.norm_first:
            return x + self.dropout(update)
        return self.norm(x + self.dropout(update))

    def reads(self, x: Tensor) -> Tensor:
        """What the sub-layer reads of the stream x: LN(x) pre-LN, x itself post-LN."""
        return self.norm(x) if self.norm_first else x


class EncoderLayer(nn.Module):
    """Multi-head self-attention, then the feed-forward network."""

    def __init__(self, config: TransformerConfig, index: int) -> None:
        super().__init__()
        c = config
        self.name = f"encoder.{index}"
        self.self_attn = MultiHeadAttention(c, f"{self.name}.self_attn")
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
    """Masked self-attention, then attention over the encoder output (none in a decoder-only model), then
    feed-forward."""

    def __init__(self, config: TransformerConfig, index: int) -> None:
        super().__init__()
        c = config
        self.name = f"decoder.{index}"
        self.layer_type = c.layer_type(index)  # "full" or "sliding": which mask and rotation it takes
        window = c.sliding_window if self.layer_type == "sliding" else None
        self.self_attn = MultiHeadAttention(c, f"{self.name}.self_attn", window)
        self.cross_attn = None if c.decoder_only else MultiHeadAttention(c, f"{self.name}.cross_attn")
        self.feed_forward = FeedForward(c)
        self.self_attn_residual = SublayerConnection(c)
        self.cross_attn_residual = None if c.decoder_only else SublayerConnection(c)
        self.feed_forward_residual = SublayerConnection(c)

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None,
        self_mask: Tensor | None,
        memory_mask: Tensor | None,
        trace: Trace | None = None,
        cache: KVCache | None = None,
        position_bias: Tensor | None = None,
        rotary: Rotation | None = None,
    ) -> Tensor:
        """x: (B, T, D), memory: (B, S, D) (None: decoder-only), self_mask: (B|1, 1, T, T_k), memory_mask:
        (B, 1, 1, S), position_bias: (1, H, T, T_k) or None (self-attention only, as T5), rotary: cos and sin of
        the positions or None."""
        return self.run(x, lambda h: self.self_attn(h, h, self_mask, trace=trace, cache=cache,
                                                    position_bias=position_bias, rotary=rotary),
                        memory, memory_mask, trace, cache)

    def run(self, x: Tensor, self_attention: Callable[[Tensor], Tensor], memory: Tensor | None = None,
            memory_mask: Tensor | None = None, trace: Trace | None = None, cache: KVCache | None = None) -> Tensor:
        """The layer on x (B, T, D) with its self-attention given: ``self_attention`` maps what the sub-layer reads
        (LN(x) pre-LN) to its output (B, T, D). ``forward`` gives the layer's own; value zeroing
        (explain/value_zeroing.py) one mixed from the original run's projections (``self_projections``)."""
        x = self.self_attn_residual(x, self_attention, trace, f"{self.name}.self_attn")
        if self.cross_attn is not None:
            x = self.cross_attn_residual(
                x, lambda h: self.cross_attn(h, memory, memory_mask, trace=trace, cache=cache, static_kv=True),
                trace, f"{self.name}.cross_attn")
        x = self.feed_forward_residual(x, self.feed_forward, trace, f"{self.name}.feed_forward")
        return site(f"{self.name}.output", x, trace)

    def self_projections(self, x: Tensor, rotary: Rotation | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """The self-attention's q (B, H, T, d_k), k and v (B, H_kv, T, d_k) on the layer input x (B, T, D), as
        ``forward`` computes them without a cache (normed, turned): ``self_attn.attend`` takes them."""
        h = self.self_attn_residual.reads(x)
        return self.self_attn._project(h, h, None, False, rotary)


def _final_norm(config: TransformerConfig, output_scale: float = 1.0) -> nn.Module:
    """The norm after a stack (torch.nn.Transformer has one; post-LN Marian and BART have none: the identity)."""
    return make_norm(config, output_scale) if config.final_norm else nn.Identity()


def _embedding_norm(config: TransformerConfig) -> nn.Module | None:
    """The norm right after embeddings + positions (BART, mBART: ``layernorm_embedding``), or None."""
    return make_norm(config) if config.embedding_norm else None


def _relative_bias(config: TransformerConfig, bidirectional: bool) -> RelativePositionBias | None:
    """The stack's relative position bias table (T5), or None for other positions."""
    if position_scheme(config) != "bias":
        return None
    return RelativePositionBias(config.n_heads, config.relative_buckets, config.relative_max_distance, bidirectional)


def _rotary(config: TransformerConfig) -> nn.ModuleDict | None:
    """The stack's rotations per layer type, or None for other positions: "full" by ``rope_theta`` and the
    scaling, "sliding" by ``rope_local_theta`` unscaled where it is set (Gemma-3), else the same."""
    c = config
    if position_scheme(c) != "rotary":
        return None
    rotations = {"full": RotaryEmbedding(c.d_k, c.rope_theta, c.rope_scaling, c.rope_factor, c.rope_low_freq_factor,
                                         c.rope_high_freq_factor, c.rope_original_max_len)}
    if c.rope_local_theta is not None:
        rotations["sliding"] = RotaryEmbedding(c.d_k, c.rope_local_theta)
    return nn.ModuleDict(rotations)


class _Stack(nn.Module):
    """What both stacks do first: the embedding norm (BART, mBART) and dropout on embeddings + positions, the
    first layer's input (site ``{side}.input``)."""

    side = "src"

    def _input(self, x: Tensor, trace: Trace | None) -> Tensor:
        return site(f"{self.side}.input", self.dropout(x if self.embed_norm is None else self.embed_norm(x)), trace)


class Encoder(_Stack):
    """N encoder layers and a final norm (as torch.nn.Transformer has; ``final_norm=False``: none); with relative
    positions, the stack's bias table (bidirectional), its bias computed once and added in every layer."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.embed_norm = _embedding_norm(config)
        self.dropout = dropout(config.dropout)
        self.relative_bias = _relative_bias(config, bidirectional=True)
        self.layers = nn.ModuleList(EncoderLayer(config, i) for i in range(config.n_encoder_layers))
        self.norm = _final_norm(config)

    def forward(self, x: Tensor, mask: Tensor | None, trace: Trace | None = None) -> Tensor:
        """x: embeddings + positions (B, S, D), mask (B, 1, 1, S) -> (B, S, D), before the site ``encoder.output``."""
        x = self._input(x, trace)
        bias = None
        if self.relative_bias is not None:
            bias = site("encoder.position_bias", self.relative_bias(x.size(1), x.size(1)), trace)  # (1, H, S, S)
        for layer in self.layers:
            x = layer(x, mask, trace, bias)
        return self.norm(x)


class Decoder(_Stack):
    """N decoder layers and a final norm (as torch.nn.Transformer has; ``final_norm=False``: none; with
    ``rescale_output`` times d_model^-0.5, T5 v1.0); with relative positions, the stack's causal bias table; with
    rotary positions, its rotations."""

    side = "tgt"

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.embed_norm = _embedding_norm(config)
        self.dropout = dropout(config.dropout)
        self.relative_bias = _relative_bias(config, bidirectional=False)
        self.rotary = _rotary(config)
        self.layers = nn.ModuleList(DecoderLayer(config, i) for i in range(config.n_decoder_layers))
        self.norm = _final_norm(config, config.d_model**-0.5 if config.rescale_output else 1.0)

    def forward(self, x: Tensor, memory: Tensor | None, self_mask: Tensor | Mapping[str, Tensor | None] | None,
                memory_mask: Tensor | None, trace: Trace | None = None, cache: KVCache | None = None,
                positions: Tensor | None = None) -> Tensor:
        """x: embeddings + positions (B, T, D); self_mask: one mask, or one per layer type ("full", "sliding");
        positions (B|1, T) int64 of the rotary positions -> (B, T, D), before the site ``decoder.output``."""
        x = self._input(x, trace)
        masks = self_mask if isinstance(self_mask, Mapping) else {"full": self_mask, "sliding": self_mask}
        bias = None
        if self.relative_bias is not None:  # queries at offset.., keys from 0 (the cached ones first)
            t, offset = x.size(1), cache.offset if cache is not None else 0
            bias = site("decoder.position_bias", self.relative_bias(t, offset + t, offset), trace)  # (1, H, T, T_k)
        rotations: dict[str, Rotation] = {}
        if self.rotary is not None:
            rotations = {kind: rotary(positions, x.dtype) for kind, rotary in self.rotary.items()}
        for layer in self.layers:
            rotation = rotations.get(layer.layer_type, rotations.get("full"))
            x = layer(x, memory, masks[layer.layer_type], memory_mask, trace, cache, bias, rotation)
        return self.norm(x)
