"""What position alone achieves, and how sure a score is: the two numbers that stand beside every head score.

A head that scores 0.62 on alignment says little if attending to the same index already scores 0.59.
Clark, Khandelwal, Levy & Manning 2019 ("What Does BERT Look At?", section 4.2) report every head beside
the best fixed-offset baseline for this reason; so does this package:

- alignment (cross-attention): the better of "same index" (output row t -> source position min(t, S-1))
  and "proportional" (row t -> round(t (S-1) / (N-1))), with S the sentence's real source tokens and N its real
  output rows (T - 1: the target's tokens and ``</s>``); scored exactly as a head is (the share of the rows with
  a true source whose chosen source is true);
- each dependency relation (encoder self-attention): the best fixed offset k in -5..5 (dependent i -> i+k),
  scored as a head is (the share of the relation's dependents whose chosen token is their head word).

Every score is a ratio of counts summed over sentences; ``bootstrap_interval`` resamples the sentences
(Efron & Tibshirani 1993, the percentile interval) to give a 95% interval, drawn from a private generator
with a fixed seed so the same batch gives the same interval.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

N_BOOTSTRAP = 1000
OFFSETS = range(-5, 6)


def bootstrap_interval(hits: Tensor, counts: Tensor, *, level: float = 0.95, n: int = N_BOOTSTRAP,
                       seed: int = 0) -> tuple[Tensor, Tensor]:
    """Per-sentence hits (B, H) and counts (B,) (or (B, H)) of a ratio score -> its percentile interval
    (low (H,), high (H,)) over ``n`` resamplings of the sentences. NaN where a resample counts nothing."""
    batch, device = hits.size(0), hits.device
    generator = torch.Generator().manual_seed(seed)  # on the CPU: the same draws whatever the device
    picks = torch.randint(batch, (n, batch), generator=generator).to(device)  # (n, B): drawn with replacement
    times = torch.zeros(n, batch, dtype=torch.float64, device=device).scatter_add_(
        1, picks, torch.ones(n, batch, dtype=torch.float64, device=device))  # (n, B): how often each is drawn
    counts = counts.double() if counts.dim() == 2 else counts.double()[:, None].expand_as(hits)
    ratio = (times @ hits.double()) / (times @ counts)  # (n, H): NaN where a resample counts 0
    tail = (1 - level) / 2
    quantiles = torch.tensor([tail, 1 - tail], dtype=torch.float64, device=device)
    low, high = torch.nanquantile(ratio, quantiles, dim=0)
    return low, high


def alignment_baseline(alignment: Tensor, src_real: Tensor, out_rows: Tensor) -> tuple[float, Tensor, Tensor]:
    """alignment (B, T', S) bool, src_real (B, S) bool, out_rows (B,) the sentence's real output rows (those that
    predict a real target token, ``</s>`` included: its target length T - 1) -> (the better baseline's score, its
    per-sentence hits (B,), the rows counted per sentence (B,)).

    The proportional diagonal runs over the output's real rows, from row 0 to the source's first token to the last
    row (the one that predicts ``</s>``) to the source's ``</s>``. Only rows with a true source are scored, as a
    head's are; they are not the rows the diagonal spans (the ``</s>`` row has none, nor may an inserted word), and
    a diagonal over them alone runs too steep."""
    rows = alignment.any(-1)  # (B, T'): rows with a true source
    s = src_real.sum(-1)  # (B,)
    r = rows.sum(-1)  # (B,)
    t = torch.arange(alignment.size(1), device=alignment.device)[None, :].expand(alignment.size(0), -1)  # (B, T')
    same = torch.minimum(t, (s - 1)[:, None])
    span = (out_rows.to(alignment.device) - 1).clamp(min=1)[:, None]  # (B, 1)
    proportional = torch.round(t * (s - 1)[:, None] / span).long().clamp(max=(s - 1)[:, None])  # (B, T')
    best = None
    for position in (same, proportional):
        hit = alignment.gather(-1, position[..., None])[..., 0] & rows  # (B, T')
        per_sentence = hit.sum(-1).double()
        score = float(per_sentence.sum() / r.sum()) if r.sum() > 0 else float("nan")
        if best is None or score > best[0]:
            best = (score, per_sentence)
    return best[0], best[1], r.double()


def arc_baseline(arcs: Sequence[Sequence[tuple[int, int, str]]], relation: str) -> tuple[float, int, Tensor, Tensor]:
    """The best fixed offset for ``relation``'s arcs -> (its score, the offset, per-sentence hits (B,),
    per-sentence counts (B,))."""
    counts = torch.tensor([sum(rel == relation for _, _, rel in s) for s in arcs], dtype=torch.float64)
    best = None
    for k in OFFSETS:
        hits = torch.tensor([sum(rel == relation and dep + k == head for dep, head, rel in s) for s in arcs],
                            dtype=torch.float64)
        score = float(hits.sum() / counts.sum()) if counts.sum() > 0 else float("nan")
        if best is None or score > best[0]:
            best = (score, k, hits)
    return best[0], best[1], best[2], counts
