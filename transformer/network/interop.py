"""Copy weights between our Transformer and one built only from PyTorch's own modules.

``to_torch(model)`` returns a ``TorchReference``: ``src_embed`` / ``tgt_embed``
(nn.Embedding), ``transformer`` (nn.Transformer, batch_first=True) and ``generator``
(nn.Linear), with identical weights and the same embedding scale, positional table and
masks. Running both on one input is how the tests (and the app's model page) show the
from-scratch model computes exactly what PyTorch computes.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn

from .config import TransformerConfig
from .model import Transformer


class TorchReference(nn.Module):
    """The same architecture, assembled from nn.Embedding, nn.Transformer and nn.Linear."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        c = config
        self.config = config
        self.src_embed = nn.Embedding(c.src_vocab_size, c.d_model)
        self.tgt_embed = nn.Embedding(c.tgt_vocab_size, c.d_model)
        self.transformer = nn.Transformer(
            d_model=c.d_model,
            nhead=c.n_heads,
            num_encoder_layers=c.n_encoder_layers,
            num_decoder_layers=c.n_decoder_layers,
            dim_feedforward=c.d_ff,
            dropout=c.dropout,
            activation=c.activation,
            layer_norm_eps=c.layer_norm_eps,
            batch_first=True,
            norm_first=c.norm_first,
        )
        # The nested-tensor fast path zeroes padded rows, and the fused encoder-layer kernel treats them
        # differently too; keep every row computed as ours is. Both are switched off for this instance
        # only: nested tensors by the encoder's flags, the fused layer by a (no-op) forward pre-hook on each
        # encoder layer, which torch checks before taking it. Never torch.backends.mha.set_fastpath_enabled:
        # that flag is process-wide, and the app's sessions run in threads of one process.
        self.transformer.encoder.enable_nested_tensor = False
        self.transformer.encoder.use_nested_tensor = False
        for layer in self.transformer.encoder.layers:
            layer.register_forward_pre_hook(_keep_slow_path)
        self.generator = nn.Linear(c.d_model, c.tgt_vocab_size)
        if c.tying == "all":
            self.tgt_embed.weight = self.src_embed.weight
            self.generator.weight = self.src_embed.weight
        self.dropout = nn.Dropout(c.dropout)

    def embed(self, embedding: nn.Embedding, ids: Tensor) -> Tensor:
        x = embedding(ids) * math.sqrt(self.config.d_model)
        return self.dropout(x + _reference_table(ids.size(1), self.config.d_model).to(x.device, x.dtype))

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        """src: (B, S), tgt: (B, T) int64 -> logits (B, T, V), like ``Transformer.forward``."""
        pad = self.config.pad_id
        t = tgt.size(1)
        # Additive float masks (0 = attend, -inf = blocked), as nn.Transformer accepts: with them torch's fused
        # multi-head-attention kernel is not used, so every row is computed as ours is, on this instance only.
        blocked = torch.triu(torch.ones(t, t, dtype=torch.bool, device=tgt.device), diagonal=1)
        x_src, x_tgt = self.embed(self.src_embed, src), self.embed(self.tgt_embed, tgt)
        causal = _additive(blocked, x_tgt.dtype)  # (T, T)
        src_pad, tgt_pad = _additive(src == pad, x_src.dtype), _additive(tgt == pad, x_tgt.dtype)  # (B, S), (B, T)
        no_mask = torch.zeros(src.size(1), src.size(1), dtype=x_src.dtype, device=src.device)
        hidden = self.transformer(
            x_src, x_tgt, src_mask=no_mask, tgt_mask=causal, src_key_padding_mask=src_pad,
            tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad,
        )
        return self.generator(hidden)


def parameter_pairs(
    model: Transformer, ref: TorchReference, get: Callable[[Tensor], Tensor] = lambda p: p
) -> list[tuple[Tensor, Tensor]]:
    """Every (ours, theirs) pair of corresponding tensors, as views into the parameters.

    ``get`` picks what to pair: the parameters themselves, or e.g. ``lambda p: p.grad``.
    """

    def _linear_pairs(ours: nn.Module, theirs: nn.Module):
        return [(get(ours.weight), get(theirs.weight)), (get(ours.bias), get(theirs.bias))]

    def _attention_pairs(ours, theirs: nn.MultiheadAttention):
        # both keep [W^Q; W^K; W^V] stacked in one (3D, D) matrix
        return [
            (get(ours.in_proj.weight), get(theirs.in_proj_weight)),
            (get(ours.in_proj.bias), get(theirs.in_proj_bias)),
            *_linear_pairs(ours.w_o, theirs.out_proj),
        ]

    pairs = [
        (get(model.src_embed.weight), get(ref.src_embed.weight)),
        (get(model.tgt_embed.weight), get(ref.tgt_embed.weight)),
        *_linear_pairs(model.generator, ref.generator),
        *_linear_pairs(model.encoder.norm, ref.transformer.encoder.norm),
        *_linear_pairs(model.decoder.norm, ref.transformer.decoder.norm),
    ]
    for ours, theirs in zip(model.encoder.layers, ref.transformer.encoder.layers, strict=True):
        pairs += _attention_pairs(ours.self_attn, theirs.self_attn)
        pairs += _linear_pairs(ours.feed_forward.w_1, theirs.linear1)
        pairs += _linear_pairs(ours.feed_forward.w_2, theirs.linear2)
        pairs += _linear_pairs(ours.self_attn_residual.norm, theirs.norm1)
        pairs += _linear_pairs(ours.feed_forward_residual.norm, theirs.norm2)
    for ours, theirs in zip(model.decoder.layers, ref.transformer.decoder.layers, strict=True):
        pairs += _attention_pairs(ours.self_attn, theirs.self_attn)
        pairs += _attention_pairs(ours.cross_attn, theirs.multihead_attn)
        pairs += _linear_pairs(ours.feed_forward.w_1, theirs.linear1)
        pairs += _linear_pairs(ours.feed_forward.w_2, theirs.linear2)
        pairs += _linear_pairs(ours.self_attn_residual.norm, theirs.norm1)
        pairs += _linear_pairs(ours.cross_attn_residual.norm, theirs.norm2)
        pairs += _linear_pairs(ours.feed_forward_residual.norm, theirs.norm3)
    return pairs


def _additive(blocked: Tensor, dtype: torch.dtype) -> Tensor:
    """A boolean mask (True = blocked, nn.Transformer's convention) as an additive float mask."""
    return torch.zeros(blocked.shape, dtype=dtype, device=blocked.device).masked_fill(blocked, float("-inf"))


def _keep_slow_path(module: nn.Module, args: tuple) -> None:
    """A forward pre-hook that changes nothing: its presence keeps torch off the fused encoder-layer kernel."""
    return None


def _reference_table(length: int, d_model: int) -> Tensor:
    """The sinusoidal table written independently of ``positional.sinusoidal_table`` (the Annotated
    Transformer's form, 1 / 10000^(2i/d) as exp(-2i ln(10000) / d)), in float64 and cast per call."""
    position = torch.arange(length, dtype=torch.float64).unsqueeze(1)  # (T, 1)
    inverse_wavelength = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    table = torch.empty(length, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * inverse_wavelength)
    table[:, 1::2] = torch.cos(position * inverse_wavelength)[:, : d_model // 2]
    return table


def torch_reference_gap(config: TransformerConfig) -> str | None:
    """Why ``nn.Transformer`` cannot reproduce a model of this config (None when it can): it knows only
    the paper's choices (ReLU/GELU, interleaved sinusoids, scaled embeddings, a final LayerNorm, one
    ``tying``, "none" or "all"); the switches of Marian, BART, mBART, M2M100 and T5 are checked against ``transformers``
    instead (tests/test_families_network.py)."""
    gaps = [why for off, why in (
        (config.decoder_only, "a decoder-only model (it has no encoder)"),
        (config.activation not in ("relu", "gelu"), f"the {config.activation} activation"),
        (config.positional != "interleaved", f"the {config.positional} positional layout"),
        (not config.scale_embedding, "unscaled embeddings"),
        (not config.final_norm, "stacks without a final LayerNorm"),
        (config.tying == "generator", "a generator tied to the target embedding only"),
        (config.tying == "embeddings", "shared embeddings with a generator of its own"),
        (config.norm != "layer", f"the {config.norm} norm"),
        (config.embedding_norm, "a norm after the embeddings"),
        (config.gated_ff, "a gated feed-forward network"),
        (not config.scale_attention, "attention scores without 1/sqrt(d_k)"),
        (not config.bias, "attention and feed-forward without biases"),
        (config.d_inner != config.d_model, f"heads of {config.d_k} dimensions ({config.n_heads} x {config.d_k} != "
                                           f"d_model {config.d_model})"),
        (config.rescale_output, "a decoder output rescaled by d_model^-0.5"),
    ) if off]
    return "torch.nn.Transformer cannot express " + ", ".join(gaps) if gaps else None


def to_torch(model: Transformer) -> TorchReference:
    """A TorchReference with a copy of ``model``'s weights (same dtype, device and train/eval mode).

    ValueError for a config ``nn.Transformer`` cannot express (``torch_reference_gap``)."""
    gap = torch_reference_gap(model.config)
    if gap:
        raise ValueError(gap)
    weight = model.src_embed.weight
    ref = TorchReference(model.config).to(device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        for ours, theirs in parameter_pairs(model, ref):
            theirs.copy_(ours)
    return ref.train(model.training)


def from_torch(ref: TorchReference, config: TransformerConfig | None = None) -> Transformer:
    """The inverse of ``to_torch``: our Transformer with a copy of the reference's weights."""
    config = config or ref.config
    weight = ref.src_embed.weight
    model = Transformer(config).to(device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        for ours, theirs in parameter_pairs(model, ref):
            if ours.shape != theirs.shape:
                raise ValueError(f"shape mismatch: ours {tuple(ours.shape)} vs reference {tuple(theirs.shape)}")
            ours.copy_(theirs)
    return model.train(ref.training)
