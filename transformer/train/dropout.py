"""Dropout that draws its masks from a training run's own random generator.

Dropout (Srivastava et al. 2014, "Dropout: A Simple Way to Prevent Neural Networks from
Overfitting"; section 5.4 of "Attention Is All You Need" applies it after every sub-layer, to the sums
of the embeddings and positions, and, as torch.nn.MultiheadAttention does, to the attention weights).
Inverted dropout: each element is kept with probability 1 - p and scaled by 1 / (1 - p), so
evaluation needs no rescaling.

PyTorch's ``F.dropout`` takes no generator: it draws from the process-wide one, which every other
session of the app's server also draws from. A training run that owns a ``torch.Generator`` puts
``GeneratorDropout`` modules in place of its model's ``nn.Dropout`` ones (``use_dropout_generator``), and
its dropout masks depend on its seed alone. The network itself holds plain ``nn.Dropout``; its attention
computes the weights explicitly for a dropout module of another kind (network/attention.py), since the
fused kernel draws its own masks.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def dropout(x: Tensor, p: float, generator: torch.Generator | None = None) -> Tensor:
    """Inverted dropout of ``x`` with drop probability ``p`` (always on: the caller checks training)."""
    if p <= 0:
        return x
    if generator is None:
        return F.dropout(x, p, training=True)
    keep = torch.empty_like(x).bernoulli_(1.0 - p, generator=generator)  # 1 with probability 1 - p
    return x * keep / (1.0 - p)


class GeneratorDropout(nn.Dropout):
    """``nn.Dropout`` whose masks come from ``generator`` (None: torch's global one, as ``nn.Dropout``)."""

    def __init__(self, p: float, generator: torch.Generator | None = None) -> None:
        super().__init__(p)
        self.generator = generator

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0:
            return x
        return dropout(x, self.p, self.generator)


def use_dropout_generator(model: nn.Module, generator: torch.Generator | None) -> None:
    """Draw every dropout mask of ``model`` (sub-layers, embeddings, attention weights) from ``generator``:
    each dropout module becomes a ``GeneratorDropout`` with the same p. None: plain ``nn.Dropout`` again.
    Dropout holds no parameters, so the state dict is the same."""
    dropouts = [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
                if isinstance(child, nn.Dropout)]
    for parent, name, child in dropouts:
        replacement = GeneratorDropout(child.p, generator) if generator is not None else nn.Dropout(child.p)
        setattr(parent, name, replacement.train(child.training))
