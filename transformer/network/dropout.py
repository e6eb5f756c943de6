"""Dropout that can draw its masks from a run's own random generator.

Dropout (Srivastava et al. 2014, "Dropout: A Simple Way to Prevent Neural Networks from
Overfitting"; section 5.4 of the paper applies it after every sub-layer, to the sums of the
embeddings and positions, and, as torch.nn.MultiheadAttention does, to the attention weights).
Inverted dropout: each element is kept with probability 1 - p and scaled by 1 / (1 - p), so
evaluation needs no rescaling.

PyTorch's ``F.dropout`` takes no generator: it draws from the process-wide one, which every other
session of the app's server also draws from. A training run that owns a ``torch.Generator`` hands
it to the model (``Transformer.use_dropout_generator``) and its dropout masks depend on its seed
alone. Without a generator these behave exactly like ``nn.Dropout``.
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


class Dropout(nn.Dropout):
    """``nn.Dropout`` whose masks come from ``self.generator`` when one is set."""

    generator: torch.Generator | None = None

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0:
            return x
        return dropout(x, self.p, self.generator)
