"""The position-wise feed-forward network (section 3.3 of the paper), plain or gated.

    FFN(x)       = act(x W_1 + b_1) W_2 + b_2                  (eq. 2; act = ReLU in the paper)
    gated FFN(x) = (act(x W_1) * (x W_3)) W_2                   (Shazeer 2020, "GLU Variants Improve
                                                                  Transformer"; T5 v1.1 and Flan-T5; SwiGLU
                                                                  with silu: Llama, Mistral, Qwen; GeGLU with
                                                                  gelu_tanh: Gemma)

In ``transformers``' T5 the gated form's W_1 is ``wi_0``, W_3 ``wi_1`` and W_2 ``wo``; the names here follow
LLaMA's (w1 activated, w3 linear, w2 out). The activations are ``transformers``' own formulas: ``gelu`` the
exact erf GELU, ``gelu_new`` its tanh approximation written as ``NewGELUActivation`` writes it (so the float
operations, and the results, are the same), ``silu`` x * sigmoid(x) (Marian's "swish").
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .config import TransformerConfig


def gelu_new(x: Tensor) -> Tensor:
    """GELU's tanh approximation (Hendrycks & Gimpel 2016), term by term as ``NewGELUActivation``."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def gelu_tanh(x: Tensor) -> Tensor:
    """GELU's tanh approximation as torch computes it (``transformers``' ``gelu_pytorch_tanh``: Gemma's GeGLU)."""
    return F.gelu(x, approximate="tanh")


ACTIVATION_FUNCTIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": F.relu, "gelu": F.gelu, "gelu_new": gelu_new, "gelu_tanh": gelu_tanh, "silu": F.silu}


def dropout(p: float) -> nn.Module:
    """Dropout with drop probability p (section 5.4 of the paper); a model built with p = 0 has none at all."""
    return nn.Dropout(p) if p > 0 else nn.Identity()


class FeedForward(nn.Module):
    """FFN(x) = act(x W_1 + b_1) W_2 + b_2, applied to each position separately (eq. 2); with ``gated_ff`` the
    activated branch is multiplied by a linear one, x W_3, before W_2 (module docstring)."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        c = config
        self.w_1 = nn.Linear(c.d_model, c.d_ff, bias=c.bias)
        self.w_3 = nn.Linear(c.d_model, c.d_ff, bias=c.bias) if c.gated_ff else None
        self.w_2 = nn.Linear(c.d_ff, c.d_model, bias=c.bias)
        self.dropout = dropout(c.dropout)
        self.activation = ACTIVATION_FUNCTIONS[c.activation]

    def forward(self, x: Tensor) -> Tensor:
        hidden = self.activation(self.w_1(x))  # (..., d_ff)
        if self.w_3 is not None:
            hidden = hidden * self.w_3(x)
        return self.w_2(self.dropout(hidden))
