"""Value zeroing: Mohebbi, Zuidema, Chrupała & Alishahi 2023, "Quantifying Context Mixing in Transformers".

How much does token j's representation feed token i's in layer l? Zero j's value vectors in every head of
the layer's attention (v_j = 0, so no head can move anything from j), run the layer again on its original
input, and measure how far i's output moved:

    C_l[i, j] = 1 - cos(x̃_i^{¬j}, x̃_i)        (x̃: the layer's output; ¬j: with v_j zeroed)

Each row is then normalised to sum to 1, and the layers are composed by rollout without an added
identity (the residual is already inside the measured output): R = C_{L-1} ⋯ C_0, as the paper's code does.

For an encoder-decoder every kind of attention is zeroed (this package's extension of the paper, which
studied encoders): the encoder's self-attention gives R_enc (S x S); in decoder layer l, zeroing target
position j's values in the self-attention gives C^tt_l (T x T) and zeroing memory position k's values in
the cross-attention gives C^ts_l (T x S), normalised together, row by row, over [C^tt_l | C^ts_l]. A decoder
state is a mix of target inputs R^tt and source inputs R^ts, from R^tt = I, R^ts = 0:

    R^tt <- C^tt_l R^tt,        R^ts <- C^tt_l R^ts + C^ts_l R_enc

so every row of [R^ts | R^tt] sums to 1, like the encoder-decoder rollout (rollout.py). The zeroing is an
edit of the network's ``.values`` sites (network.interventions); each layer runs once with a copy of its
input per zeroed token, all copies in one batch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..network.interventions import intervene
from ..network.model import Transformer
from ..network.trace import Trace
from .attention_maps import traced


def value_zeroing(model: Transformer, src_ids: Tensor, tgt_ids: Tensor) -> tuple[Tensor, Tensor]:
    """-> source R^ts (B, T-1, S) and target R^tt (B, T-1, T-1) of the decoder input ``tgt_ids[:, :-1]``."""
    trace = traced(model, src_ids, tgt_ids)
    with torch.no_grad():
        r_enc = None
        for layer in range(model.config.n_encoder_layers):
            mixing = _normalised(encoder_layer_mixing(model, trace, layer))  # (B, S, S)
            r_enc = mixing if r_enc is None else mixing @ r_enc
        target = source = None
        for layer in range(model.config.n_decoder_layers):
            self_part, cross_part = decoder_layer_mixing(model, trace, layer)  # (B, T, T), (B, T, S)
            both = _normalised(torch.cat([self_part, cross_part], dim=-1))
            self_part, cross_part = both[..., :self_part.size(-1)], both[..., self_part.size(-1):]
            if target is None:
                target, source = self_part, cross_part @ r_enc
            else:
                target, source = self_part @ target, self_part @ source + cross_part @ r_enc
    return source, target


def encoder_layer_mixing(model: Transformer, trace: Trace, layer: int) -> Tensor:
    """C_l[i, j] of encoder layer ``layer`` before normalisation: (B, S, S)."""
    x = trace["src.input"] if layer == 0 else trace[f"encoder.{layer - 1}.output"]  # (B, S, D)
    mask = trace["encoder.mask"]  # (B, 1, 1, S)
    n = x.size(1)
    with intervene({f"encoder.{layer}.self_attn.values": _zeroing_one_per_copy(n)}):
        moved = model.encoder.layers[layer](_copies(x, n), _copies(mask, n))  # (B*S, S, D): copy j zeroes j
    return _distance(moved, trace[f"encoder.{layer}.output"], n)


def decoder_layer_mixing(model: Transformer, trace: Trace, layer: int) -> tuple[Tensor, Tensor]:
    """C^tt_l (B, T, T) and C^ts_l (B, T, S) of decoder layer ``layer`` before normalisation."""
    x = trace["tgt.input"] if layer == 0 else trace[f"decoder.{layer - 1}.output"]  # (B, T, D)
    memory, self_mask, memory_mask = trace["encoder.output"], trace["decoder.mask"], trace["cross.mask"]
    original = trace[f"decoder.{layer}.output"]
    parts = []
    for sublayer, n in (("self_attn", x.size(1)), ("cross_attn", memory.size(1))):
        with intervene({f"decoder.{layer}.{sublayer}.values": _zeroing_one_per_copy(n)}):
            moved = model.decoder.layers[layer](_copies(x, n), _copies(memory, n), _copies(self_mask, n),
                                                _copies(memory_mask, n))  # (B*n, T, D)
        parts.append(_distance(moved, original, n))
    return parts[0], parts[1]


def _copies(x: Tensor, n: int) -> Tensor:
    """n copies of each sentence, next to each other: (B, ...) -> (B*n, ...)."""
    return x.repeat_interleave(n, dim=0)


def _zeroing_one_per_copy(n: int):  # noqa: ANN202  (an edit)
    """An edit of a ``.values`` site (B*n, H, n, d_k): copy j of each sentence has position j's values zeroed."""

    def edit(values: Tensor) -> Tensor:
        keep = torch.ones(n, n, dtype=values.dtype, device=values.device)
        keep.fill_diagonal_(0.0)  # (copy j, position k): 0 where k == j
        keep = keep.repeat(values.size(0) // n, 1)  # (B*n, n)
        return values * keep[:, None, :, None]

    return edit


def _distance(moved: Tensor, original: Tensor, n: int) -> Tensor:
    """1 - cos between each copy's outputs and the original's: moved (B*n, T, D), original (B, T, D) -> (B, T, n),
    column j from the copy that zeroed j."""
    batch, length, _ = original.shape
    moved = moved.view(batch, n, length, -1)  # (B, n copies, T, D)
    cosine = F.cosine_similarity(moved, original[:, None], dim=-1)  # (B, n, T)
    return (1.0 - cosine).clamp(min=0.0).transpose(1, 2)  # (B, T, n)


def _normalised(scores: Tensor) -> Tensor:
    """Rows scaled to sum to 1 (a row of zeros stays zero)."""
    total = scores.sum(dim=-1, keepdim=True)
    return torch.where(total > 0, scores / total.clamp(min=torch.finfo(scores.dtype).tiny), scores)
