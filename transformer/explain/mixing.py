"""What ALTI+ (alti.py) and value zeroing (value_zeroing.py) share: rows of a mixing matrix scaled to sum to 1,
rows where that is undefined (NaN), their composition through the layers, and the choice of one decoder layer.

Both methods measure, per layer, how much each input token feeds each output token (C_l, rows summing to 1), and
compose the layers by rollout (Abnar & Zuidema 2020): R <- C_l R. A row whose scores are all 0 (or, for ALTI+,
too small to be told from the token-less bias: see alti.py) has no shares to give: it becomes NaN, never a row of
zeros, which would read as "no token fed this one" or, in ALTI+'s source share, as "the model ignored the
source". The composition keeps that honest: a composed row is NaN where it takes a positive weight from an
undefined row, and stays a number where it takes none (0 · NaN would be NaN in a plain matrix product, so a
masked or future position would spoil every row).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..network.model import Transformer


def normalised(scores: Tensor, floor: Tensor | float = 0.0) -> Tensor:
    """Rows of non-negative ``scores`` (..., n) scaled to sum to 1; a row whose sum is <= ``floor`` (a number or a
    tensor of shape (..., 1), e.g. relative to the row's output) is undefined: NaN."""
    total = scores.sum(dim=-1, keepdim=True)
    defined = total > floor
    shares = scores / total.clamp(min=torch.finfo(scores.dtype).tiny)
    return torch.where(defined, shares, torch.full_like(shares, float("nan")))


def compose(mixing: Tensor, rolled: Tensor) -> Tensor:
    """mixing (B, Tq, Tk) @ rolled (B, Tk, n), rows NaN-aware: row i is NaN where mixing row i is NaN or puts a
    positive weight on a NaN row of ``rolled``; a weight of 0 on a NaN row adds nothing."""
    undefined_in = rolled.isnan().any(dim=-1)  # (B, Tk)
    weights = mixing.nan_to_num(0.0)
    product = weights @ rolled.nan_to_num(0.0)  # (B, Tq, n)
    reaches = ((weights > 0) & undefined_in[:, None, :]).any(dim=-1) | mixing.isnan().any(dim=-1)  # (B, Tq)
    return product.masked_fill(reaches[..., None], float("nan"))


def whole_rows(source: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    """source (B, T, S), target (B, T, T): a row undefined in either part is NaN in both (it is one row of
    [source | target], summing to 1 or undefined)."""
    undefined = (source.isnan().any(dim=-1) | target.isnan().any(dim=-1))[..., None]  # (B, T, 1)
    return source.masked_fill(undefined, float("nan")), target.masked_fill(undefined, float("nan"))


def decoder_layer(model: Transformer, layer: int | None) -> int | None:
    """``layer`` checked against the model's decoder layers: None (every layer, rolled out) or an int in
    [-L, L) (negative counts from the last, as Python indexes), returned as 0 .. L-1. ValueError otherwise."""
    if layer is None:
        return None
    n = model.config.n_decoder_layers
    if isinstance(layer, bool) or not isinstance(layer, int):
        raise ValueError(f"layer must be None (every layer, rolled out) or a decoder layer's index, got {layer!r}")
    if not -n <= layer < n:
        raise ValueError(f"layer {layer} is out of range: this model has {n} decoder layers (0 .. {n - 1}, or "
                         f"-{n} .. -1 from the last)")
    return layer % n
