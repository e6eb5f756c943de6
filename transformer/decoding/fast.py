"""The speed of a decoding step, kept out of the network: the generator computed as W x^T for a few rows.

A decoding step projects a handful of rows (the batch, or the beams) onto the whole vocabulary. For so few
rows against a tall weight (58,101 x 512 at opus-mt size) the BLAS took a path for x (N, d) @ W^T that was
2-4x slower than W (V, d) @ x^T (d, N) for 2 to 8 rows on the 2-core CPU (measured: docs/benchmarks.md,
"the generator at opus-mt size"): the same sums in another order. More rows (an uncached step over a
long prefix) keep ``nn.Linear``'s path. The network's own ``decode`` stays ``nn.Linear`` as the paper reads;
``decode_step`` is ``Transformer.decode`` with this layout, the same sites recorded and edited.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..network.attention import KVCache
from ..network.model import Ablation, Transformer
from ..network.sites import site
from ..network.trace import Trace

FEW_ROWS = 64  # up to this many rows (a decoding step of beams or of a small batch), W x^T


def few_rows_linear(linear: nn.Linear, x: Tensor) -> Tensor:
    """``linear(x)``, (..., in) -> (..., out), computed as W x^T when x holds at most ``FEW_ROWS`` rows."""
    rows = x.numel() // linear.in_features
    if rows > FEW_ROWS or rows == 0:
        return F.linear(x, linear.weight, linear.bias)
    flat = x.reshape(rows, linear.in_features)  # (N, d)
    if linear.bias is None:
        scores = linear.weight @ flat.T  # (V, N)
    else:
        scores = torch.addmm(linear.bias[:, None], linear.weight, flat.T)  # (V, N): b + W x^T
    return scores.T.contiguous().reshape(*x.shape[:-1], linear.out_features)  # (..., V)


def decode_step(model: Transformer, tgt_ids: Tensor, memory: Tensor, memory_mask: Tensor | None, *,
                cache: KVCache | None, trace: Trace | None, ablate: Ablation | None) -> Tensor:
    """``model.decode(...)``: logits (B, T, V), the generator applied by ``few_rows_linear``."""
    hidden = model.decode_states(tgt_ids, memory, memory_mask, cache=cache, trace=trace, ablate=ablate)
    return site("logits", few_rows_linear(model.generator, hidden), trace)
