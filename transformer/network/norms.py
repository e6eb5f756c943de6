"""The normalisation around each sub-layer: LayerNorm (the paper) or RMSNorm (T5, Llama, Gemma), one field picks.

    LayerNorm(x) = (x - mean(x)) / sqrt(var(x) + eps) * gamma + beta        (Ba, Kiros & Hinton 2016)
    RMSNorm(x)   = x / sqrt(mean(x^2) + eps) * gamma                          (Zhang & Sennrich 2019)

RMSNorm has no mean subtracted and no bias. The families compute it in three ways, and the network computes
each literally (``norm``), since the weights were trained with it and ``transformers`` gives a float64 model
these float32 steps:

- ``"rms"`` (``T5LayerNorm``): the mean of squares in float32, the rest in the model's dtype;
- ``"rms_float32"`` (``LlamaRMSNorm``: Llama, Mistral, Qwen): x cast to float32, normalised there, cast back
  to the model's dtype, then times gamma;
- ``"rms_unit_offset"`` (``Gemma2RMSNorm``, ``Gemma3RMSNorm``): normalised and multiplied by (1 + gamma) in
  float32, then cast back; gamma starts at 0.

``output_scale`` multiplies the output: T5 v1.0 scales the decoder's output by d_model^-0.5 before its tied
generator, and putting that factor on the decoder's final norm keeps ``model.decoder.norm`` followed by
``model.generator`` the whole way from a layer's output to the logits (the logit lens, the gradient methods)
without a step they could miss.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .config import TransformerConfig


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight over the last dimension, in one of the ways of the module docstring
    (``kind``: "rms", "rms_float32" or "rms_unit_offset"), times ``output_scale``."""

    def __init__(self, d_model: int, eps: float, output_scale: float = 1.0, kind: str = "rms") -> None:
        super().__init__()
        self.kind = kind
        self.weight = nn.Parameter(torch.zeros(d_model) if kind == "rms_unit_offset" else torch.ones(d_model))
        self.eps = eps
        self.output_scale = output_scale

    def forward(self, x: Tensor) -> Tensor:
        if self.kind == "rms_float32":  # LlamaRMSNorm
            h = x.to(torch.float32)
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
            x = self.weight * h.to(x.dtype)
        elif self.kind == "rms_unit_offset":  # Gemma: (1 + w), all in float32
            h = x.float()
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
            x = (h * (1.0 + self.weight.float())).type_as(x)
        else:  # T5LayerNorm
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


def make_norm(config: TransformerConfig, output_scale: float = 1.0, width: int | None = None) -> nn.Module:
    """The config's norm (``norm``: "layer" or an RMSNorm, eps ``layer_norm_eps``) over d_model, or over ``width``
    (the per-head q/k norms, over d_k)."""
    width = config.d_model if width is None else width
    if config.norm != "layer":
        return RMSNorm(width, config.layer_norm_eps, output_scale, config.norm)
    if output_scale != 1.0:
        return ScaledLayerNorm(width, config.layer_norm_eps, output_scale)
    return nn.LayerNorm(width, eps=config.layer_norm_eps)


def is_norm(module: nn.Module) -> bool:
    """Whether ``module`` is one of the norms above (its weight starts at 1, or 0 for (1 + w), its bias at 0)."""
    return isinstance(module, (nn.LayerNorm, RMSNorm))


def initial_weight(module: nn.Module) -> float:
    """What a norm's weight starts at: 0 where it is applied as (1 + w) (Gemma), else 1."""
    return 0.0 if getattr(module, "kind", "") == "rms_unit_offset" else 1.0
