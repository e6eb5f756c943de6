"""The pre-softmax linear transformation (section 3.4): logits = x W^T + b, one row of W per target token."""

from __future__ import annotations

import torch
from torch import Tensor, nn


class Generator(nn.Linear):
    """``nn.Linear(d_model, vocab)`` with the same parameters, names and numbers, computed as W x^T for a few rows.

    A decoding step projects a handful of rows (the batch, or the beams) onto the whole vocabulary. For so few
    rows against a tall weight (58,101 x 512 at opus-mt size) the BLAS took a path for x (N, d) @ W^T that was
    2-4x slower than W (V, d) @ x^T (d, N) for 2 to 8 rows on the 2-core CPU (3 rows: 43-70 -> 13-18 ms,
    ``python bench/bench_generator.py``): the same sums in another order. More rows (training, a traced
    forward of a long batch) keep ``nn.Linear``'s path.
    """

    FEW_ROWS = 64  # up to this many rows (a decoding step of beams or of a small batch), W x^T

    def forward(self, x: Tensor) -> Tensor:  # (..., d_model) -> (..., vocab)
        rows = x.numel() // self.in_features
        if rows > self.FEW_ROWS or rows == 0:
            return super().forward(x)
        flat = x.reshape(rows, self.in_features)  # (N, d)
        if self.bias is None:
            scores = self.weight @ flat.T  # (V, N)
        else:
            scores = torch.addmm(self.bias[:, None], self.weight, flat.T)  # (V, N): b + W x^T
        return scores.T.contiguous().reshape(*x.shape[:-1], self.out_features)
