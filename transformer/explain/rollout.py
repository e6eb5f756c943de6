"""Attention rollout: Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers".

Each layer's attention, averaged over heads, is mixed half and half with the identity
for the residual connection and renormalised per row; the layers are then multiplied:

    Â_l = rownorm(0.5 · mean_h A_l + 0.5 · I)          R = Â_{L-1} ⋯ Â_1 Â_0

R[i, j] is how much of input position j reaches position i after the last layer.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..network.trace import Trace


def rollout_step(weights: Tensor) -> Tensor:
    """One layer's weights (B, H, T, T) -> Â (B, T, T) = rownorm(0.5 · mean_h A + 0.5 · I)."""
    mixed = 0.5 * weights.mean(dim=1) + 0.5 * torch.eye(weights.size(-1), dtype=weights.dtype, device=weights.device)
    return mixed / mixed.sum(dim=-1, keepdim=True)


def attention_rollout(trace: Trace, kind: str = "encoder") -> Tensor:
    """Rollout of the "encoder" (B, S, S) or "decoder" (B, T, T) self-attention recorded in a trace."""
    if kind not in ("encoder", "decoder"):
        raise ValueError(f"rollout runs through self-attention: kind must be 'encoder' or 'decoder', got {kind!r}")
    n_layers = trace.n_layers(kind)
    if n_layers == 0:
        raise ValueError(f"the trace holds no {kind} layers: pass trace=Trace() to the model's forward first")
    result = rollout_step(trace.attention(kind, 0))
    for layer in range(1, n_layers):
        result = rollout_step(trace.attention(kind, layer)) @ result  # Â_l (Â_{l-1} ⋯ Â_0)
    return result
