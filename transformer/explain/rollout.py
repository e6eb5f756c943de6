"""Attention rollout: Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers".

Each layer's attention, averaged over heads, is mixed half and half with the identity
for the residual connection and renormalised per row; the layers are then multiplied:

    Â_l = rownorm(0.5 · mean_h A_l + 0.5 · I)          R = Â_{L-1} ⋯ Â_1 Â_0

R[i, j] is how much of input position j reaches position i after the last layer.

Through an encoder-decoder (``encoder_decoder_rollout``), every decoder sub-layer takes part, each
mixed half and half with its residual as above, the rules Chefer et al. 2021 ("Generic
Attention-model Explainability for Interpreting Bi-Modal and Encoder-Decoder Transformers", eqs.
6-11) give for propagating relevance through self- and cross-attention. A decoder state is a mix of
target inputs (R^tt, T x T) and source inputs (R^ts, T x S), starting from R^tt = I, R^ts = 0; for
each decoder layer l:

    self-attention:   R^tt <- Â_l R^tt,               R^ts <- Â_l R^ts          (Â_l = rownorm(0.5 mean_h A_l + 0.5 I))
    cross-attention:  R^tt <- 0.5 R^tt,               R^ts <- 0.5 R^ts + 0.5 · mean_h C_l · R_enc

where C_l (T x S) is layer l's cross-attention and R_enc the encoder's rollout (memory position k
carries source token j with weight R_enc[k, j]). Every row of [R^ts | R^tt] sums to 1: the source
part of a row is how much of that prediction rollout assigns to the source at all.
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


def encoder_decoder_rollout(trace: Trace) -> tuple[Tensor, Tensor]:
    """Rollout through the encoder, then every decoder self-attention and cross-attention layer of a trace
    (module docstring) -> source R^ts (B, T, S) and target R^tt (B, T, T); each row of the two sums to 1."""
    r_enc = attention_rollout(trace, "encoder")  # (B, S, S)
    n_layers = trace.n_layers("decoder")
    if n_layers == 0:
        raise ValueError("the trace holds no decoder layers: pass trace=Trace() to the model's forward first")
    first = trace.attention("decoder", 0)  # (B, H, T, T)
    batch, _, length, _ = first.shape
    target = torch.eye(length, dtype=first.dtype, device=first.device).expand(batch, -1, -1)  # (B, T, T)
    source = first.new_zeros(batch, length, r_enc.size(-1))  # (B, T, S)
    for layer in range(n_layers):
        mixed = rollout_step(trace.attention("decoder", layer))  # (B, T, T)
        target, source = mixed @ target, mixed @ source
        cross = trace.attention("cross", layer).mean(dim=1)  # (B, T, S)
        target, source = 0.5 * target, 0.5 * source + 0.5 * cross @ r_enc
    return source, target
