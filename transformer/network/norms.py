"""The normalisation around each sub-layer: LayerNorm (the paper) or RMSNorm (T5), one config field picks.

    LayerNorm(x) = (x - mean(x)) / sqrt(var(x) + eps) * gamma + beta        (Ba, Kiros & Hinton 2016)
    RMSNorm(x)   = x / sqrt(mean(x^2) + eps) * gamma                          (Zhang & Sennrich 2019)

RMSNorm is computed as ``transformers``' ``T5LayerNorm`` does: the mean of squares in float32 whatever the
model's dtype (so a float64 model gets T5's float32 statistic, as ``transformers`` gives it), no mean
subtracted, no bias. ``output_scale`` multiplies the output: T5 v1.0 scales the decoder's output by
d_model^-0.5 before its tied generator, and putting that factor on the decoder's final norm keeps
``model.decoder.norm`` followed by ``model.generator`` the whole way from a layer's output to the logits (the
logit lens, the gradient methods) without a step they could miss.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .config import TransformerConfig


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight, the statistic in float32 (``T5LayerNorm``), times ``output_scale``."""

    def __init__(self, d_model: int, eps: float, output_scale: float = 1.0) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.eps = eps
        self.output_scale = output_scale

    def forward(self, x: Tensor) -> Tensor:
        variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)  # (..., 1), float32 as T5LayerNorm
        x = x * torch.rsqrt(variance + self.eps)
        if self.weight.dtype in (torch.float16, torch.bfloat16):
            x = x.to(self.weight.dtype)
        x = self.weight * x
        return x * self.output_scale if self.output_scale != 1.0 else x


class ScaledLayerNorm(nn.LayerNorm):
    """``nn.LayerNorm`` whose output is multiplied by ``output_scale`` (a LayerNorm model with ``rescale_output``)."""

    def __init__(self, d_model: int, eps: float, output_scale: float) -> None:
        super().__init__(d_model, eps=eps)
        self.output_scale = output_scale

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(x) * self.output_scale


def make_norm(config: TransformerConfig, output_scale: float = 1.0) -> nn.Module:
    """The config's norm over d_model (``norm``: "layer" or "rms", eps ``layer_norm_eps``)."""
    if config.norm == "rms":
        return RMSNorm(config.d_model, config.layer_norm_eps, output_scale)
    if output_scale != 1.0:
        return ScaledLayerNorm(config.d_model, config.layer_norm_eps, output_scale)
    return nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)


def is_norm(module: nn.Module) -> bool:
    """Whether ``module`` is one of the norms above (its weight starts at 1, its bias at 0)."""
    return isinstance(module, (nn.LayerNorm, RMSNorm))
