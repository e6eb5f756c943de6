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

Other families (``TransformerConfig.positional``):

- ``"fairseq"`` (M2M100, NLLB: ``M2M100SinusoidalPositionalEmbedding``, tensor2tensor's form): sines then
  cosines with frequencies 10000^(-i / (d_model/2 - 1)), computed in float32; positions start after the pad
  id (the first token is at pad_id + 1) and the pad id's row is zero. ``transformers`` gives a padding token
  the pad id's zero row, where this gives it the next position: the two differ only at padding, which no
  real position reads (it is a masked key).
- ``"learned"`` (BART, mBART, GPT-2): a trained table per stack, position p at row p + ``position_offset``
  (BART: 2, GPT-2: 0).
- ``"relative"`` (T5): nothing is added to the embeddings (the table is zeros); each head adds a bias to its
  scores instead (relative_position.py).
- ``"rotary"`` (Llama, Mistral, Qwen, Gemma): nothing is added either; each head's queries and keys are turned
  by their position (rotary.py).

``position_scheme`` is the one place a layout is told what it does; the modules ask it.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor, nn

from .config import TransformerConfig
from .sites import site
from .trace import Trace


def position_scheme(config: TransformerConfig) -> str:
    """What the config's positional layout does (module docstring): "added", a table added to the embeddings
    (``PositionalEncoding``); "bias", T5's bias on each head's scores (``layers``: ``RelativePositionBias``); or
    "rotary", queries and keys turned (``layers``: ``RotaryEmbedding``)."""
    return {"relative": "bias", "rotary": "rotary"}.get(config.positional, "added")


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


def fairseq_table(n_rows: int, d_model: int, pad_id: int) -> Tensor:
    """M2M100's (n_rows, d_model) float32 table with the very operations of
    ``M2M100SinusoidalPositionalEmbedding.get_embedding``: row p is position p - pad_id - 1, the pad row zero."""
    half = d_model // 2
    step = math.log(10000) / (half - 1)
    frequencies = torch.exp(torch.arange(half, dtype=torch.int64).float() * -step)  # (half,)
    angle = torch.arange(n_rows, dtype=torch.int64).float().unsqueeze(1) * frequencies.unsqueeze(0)  # (n_rows, half)
    table = torch.cat([torch.sin(angle), torch.cos(angle)], dim=1).view(n_rows, -1)  # (n_rows, 2 * half)
    if d_model % 2 == 1:
        table = torch.cat([table, torch.zeros(n_rows, 1)], dim=1)
    table[pad_id, :] = 0
    return table


class PositionalEncoding(nn.Module):
    """Adds the positions to the scaled token embeddings (one of the layouts of the module docstring); the stack
    then applies its embedding norm (BART, mBART) and dropout."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        c = config
        self.layout = c.positional
        self.added = position_scheme(c) == "added"  # else nothing is added: the table is zeros
        self.d_model = c.d_model
        self.max_len = c.max_len
        self.first_row = c.pad_id + 1 if c.positional == "fairseq" else c.position_offset  # the row of position 0
        if c.positional == "learned":  # one trained table per stack (BART's embed_positions, GPT-2's wpe)
            if not c.decoder_only:
                self.src = nn.Embedding(c.max_len + c.position_offset, c.d_model)
            self.tgt = nn.Embedding(c.max_len + c.position_offset, c.d_model)
        elif self.added:
            # Not a parameter and not saved: the table is a pure function of its sizes.
            self.register_buffer("pe", self._build(torch.get_default_dtype()), persistent=False)

    def _build(self, dtype: torch.dtype) -> Tensor:
        if self.layout == "fairseq":
            return fairseq_table(self.first_row + self.max_len, self.d_model, self.first_row - 1).to(dtype)
        return sinusoidal_table(self.max_len, self.d_model, dtype, self.layout)

    def _apply(self, fn, recurse: bool = True):  # noqa: ANN001, ANN202  (nn.Module's own signature)
        """``.to(dtype)``, ``.double()``, ``.half()`` cast buffers; rebuild the table in the new dtype from
        float64 instead, so a float64 model gets the exact table rather than a float32 one cast up
        (4e-8 off in the logits); Marian's and fairseq's tables are float32 values, as trained."""
        super()._apply(fn, recurse)
        if getattr(self, "pe", None) is not None:
            self.pe = self._build(self.pe.dtype).to(self.pe.device)
        return self

    def table(self, length: int, offset: int = 0, side: str = "src") -> Tensor:
        """Encodings of positions offset..offset+length-1: (length, d_model) (zeros for relative positions)."""
        if offset + length > self.max_len:
            raise ValueError(
                f"sequence of {offset + length} positions is longer than the model's max_len ({self.max_len})"
            )
        start = self.first_row + offset
        if not self.added:
            return torch.zeros(length, self.d_model)
        if self.layout == "learned":
            return getattr(self, side).weight[start : start + length]
        return self.pe[start : start + length]

    def forward(self, x: Tensor, offset: int = 0, *, trace: Trace | None = None, side: str = "src",
                positions: Tensor | None = None) -> Tensor:
        """x: (B, T, d_model) -> x + PE, PE of shape (T, d_model) (positions offset..offset+T-1); the site
        ``{side}.pos``. ``positions`` (B, T) int64: each row's own (a left-padded batch of a decoder-only model,
        its first token at position 0), PE then (B, T, d_model)."""
        if positions is None or not self.added:
            pe = self.table(x.size(1), offset, side)
        else:
            if int(positions.max()) >= self.max_len:
                raise ValueError(f"position {int(positions.max())} is beyond the model's max_len ({self.max_len})")
            rows = positions + self.first_row
            pe = getattr(self, side)(rows) if self.layout == "learned" else self.pe[rows]  # (B, T, d_model)
        return x + site(f"{side}.pos", pe.to(x), trace)


def scale_embedding(x: Tensor, d_model: int, scale: bool = True, rounded: bool = False) -> Tensor:
    """Section 3.4: "we multiply those weights by sqrt(d_model)" (``scale=False``: as they are, as some
    Marian models are configured; ``rounded``: sqrt(d_model) first rounded to x's dtype, as Gemma does)."""
    if not scale:
        return x
    return x * torch.tensor(d_model**0.5, dtype=x.dtype, device=x.device) if rounded else x * math.sqrt(d_model)
