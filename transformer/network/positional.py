"""Sinusoidal positional encoding (section 3.5 of the paper).

    PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
    PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))

Each pair of dimensions is a sine/cosine of one wavelength; the wavelengths form a
geometric progression from 2*pi to 10000*2*pi, so PE(pos + k) is a linear
function of PE(pos) for any fixed offset k.

Marian (the opus-mt models, as ``transformers`` builds them) uses the same frequencies in another
layout: the sines in the first half of the dimensions, the cosines in the second half,

    PE(pos, i) = sin(pos / 10000^(2i / d_model)),  PE(pos, d_model/2 + i) = cos(pos / 10000^(2i / d_model)),

computed in float64 and rounded to float32 even for a float64 model: those are the values the
weights were trained with, so ``layout="marian"`` builds them the same way.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor, nn

from .layers import dropout
from .sites import site
from .trace import Trace


def sinusoidal_table(max_len: int, d_model: int, dtype: torch.dtype = torch.float32,
                     layout: str = "interleaved") -> Tensor:
    """The (max_len, d_model) table of positional encodings.

    ``layout="interleaved"`` (the paper): sin on even, cos on odd dimensions, exact in ``dtype``;
    ``"marian"``: sines then cosines, rounded to float32 as ``transformers`` does (see the module docstring).
    """
    if layout == "marian":
        return _marian_table(max_len, d_model).to(dtype)
    position = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(d_model/2),)
    angle = position / torch.pow(10000.0, two_i / d_model)  # (max_len, ceil(d_model/2))
    table = torch.zeros(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return table.to(dtype)


def _marian_table(max_len: int, d_model: int) -> Tensor:
    """Marian's table, computed with the very operations of ``transformers``' ``MarianSinusoidalPositionalEmbedding``
    (numpy float64, then ``torch.FloatTensor``), so that it holds the same float32 values bit for bit."""
    j = np.arange(d_model)
    angle = np.arange(max_len)[:, None] / np.power(10000, 2 * (j // 2) / d_model)[None, :]  # (max_len, d_model)
    half = (d_model + 1) // 2
    table = torch.empty(max_len, d_model, dtype=torch.float32)
    table[:, :half] = torch.FloatTensor(np.sin(angle[:, 0::2]))
    table[:, half:] = torch.FloatTensor(np.cos(angle[:, 1::2]))
    return table


class PositionalEncoding(nn.Module):
    """Adds PE to the scaled token embeddings, then applies dropout to the sum."""

    def __init__(self, d_model: int, max_len: int, p_drop: float, layout: str = "interleaved") -> None:
        super().__init__()
        self.dropout = dropout(p_drop)
        self.layout = layout
        # Not a parameter and not saved: the table is a pure function of its sizes.
        self.register_buffer("pe", sinusoidal_table(max_len, d_model, torch.get_default_dtype(), layout),
                             persistent=False)

    def _apply(self, fn, recurse: bool = True):  # noqa: ANN001, ANN202  (nn.Module's own signature)
        """``.to(dtype)``, ``.double()``, ``.half()`` cast buffers; rebuild the table in the new dtype from
        float64 instead, so a float64 model gets the exact table rather than a float32 one cast up
        (4e-8 off in the logits)."""
        super()._apply(fn, recurse)
        self.pe = sinusoidal_table(self.pe.size(0), self.pe.size(1), self.pe.dtype, self.layout).to(self.pe.device)
        return self

    def table(self, length: int, offset: int = 0) -> Tensor:
        """Encodings of positions offset..offset+length-1: (length, d_model)."""
        max_len = self.pe.size(0)
        if offset + length > max_len:
            raise ValueError(
                f"sequence of {offset + length} positions is longer than the model's max_len ({max_len})"
            )
        return self.pe[offset : offset + length]

    def forward(self, x: Tensor, offset: int = 0, *, trace: Trace | None = None, side: str = "src") -> Tensor:
        """x: (B, T, d_model) -> dropout(x + PE), PE of shape (T, d_model); sites ``{side}.pos`` and ``.input``."""
        pe = site(f"{side}.pos", self.table(x.size(1), offset).to(x.dtype), trace)
        return site(f"{side}.input", self.dropout(x + pe), trace)


def scale_embedding(x: Tensor, d_model: int, scale: bool = True) -> Tensor:
    """Section 3.4: "we multiply those weights by sqrt(d_model)" (``scale=False``: as they are, as some
    Marian models are configured)."""
    return x * math.sqrt(d_model) if scale else x
