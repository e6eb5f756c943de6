"""Comparing attribution methods with each other and with a known alignment.

- ``agreement``: Spearman's rank correlation between every pair of methods' (T-1, S)
  matrices for one input, over the real cells (as in DeYoung et al. 2020, ERASER, and
  Atanasova et al. 2020, "A Diagnostic Study of Explainability Techniques for Text
  Classification", which rank-correlate explanations).
- ``alignment_accuracy``: the share of output tokens whose top source token is a true one
  (the alignment-error view of attention of Jain & Wallace 2019 and Ferrando & Costa-jussà
  2021), counted over the rows that have a true source token.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from torch import Tensor


def agreement(attributions: dict[str, Tensor], mask: Tensor | None = None) -> pd.DataFrame:
    """{method: (T-1, S)} -> a methods × methods DataFrame of Spearman's ρ (1 on the diagonal).

    ``mask`` (T-1, S) bool selects the real cells; by default the rows and columns where any
    method is non-zero (``attribute`` writes 0 at padding). A constant method gives NaN. A method's
    undefined cells (NaN: ALTI+, value zeroing) leave its pairs, each pair ranked over the cells both define.
    """
    names = list(attributions)
    matrices = [torch.as_tensor(attributions[n]).detach().double().cpu() for n in names]
    shapes = {tuple(m.shape) for m in matrices}
    if len(shapes) != 1 or len(next(iter(shapes))) != 2:
        raise ValueError(f"every attribution must be one (T-1, S) matrix of the same shape, got {shapes}")
    if mask is None:
        nonzero = torch.stack(matrices).ne(0).any(dim=0)  # (T-1, S)
        mask = nonzero.any(dim=1)[:, None] & nonzero.any(dim=0)[None, :]
    cells = pd.DataFrame({n: m[mask].numpy() for n, m in zip(names, matrices, strict=True)})
    # pandas ranks each pair over the cells both define (pairwise complete: NaN shifts no rank), ties averaged, and
    # takes Pearson's r of the ranks = Spearman's ρ; in one compiled pass over every pair. A loop of rank() and
    # corr() per pair took 94 ms for 13 methods, and on the load test a quarter of the server's GIL time.
    rho = cells.corr(method="spearman").to_numpy(copy=True)  # (methods, methods)
    np.fill_diagonal(rho, 1.0)  # a constant method is NaN against the others, itself included: 1 by definition
    return pd.DataFrame(rho, index=names, columns=names)


def alignment_accuracy(source_attr: Tensor, alignment: Tensor) -> float:
    """source_attr (T-1, S), alignment (T-1, S) bool -> share of aligned rows whose argmax is a true token.

    Undefined rows (NaN anywhere in the row) are left out. Returns NaN when no defined row has a true source token.
    """
    attr, truth = torch.as_tensor(source_attr), torch.as_tensor(alignment, dtype=torch.bool)
    if attr.shape != truth.shape or attr.dim() != 2:
        raise ValueError(f"source_attr {tuple(attr.shape)} and alignment {tuple(truth.shape)} must be the same "
                         f"(T-1, S) shape")
    rows = truth.any(dim=1) & ~attr.isnan().any(dim=1)
    if not rows.any():
        return float("nan")
    top = attr[rows].argmax(dim=1)  # (rows,)
    return float(truth[rows].gather(1, top[:, None]).float().mean())
