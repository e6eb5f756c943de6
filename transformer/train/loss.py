"""The training objective and the scores that evaluation reports.

Section 5.4 of the paper: "During training, we employed label smoothing of value eps_ls = 0.1.
This hurts perplexity, as the model learns to be more unsure, but improves accuracy and BLEU score."

With smoothing eps over a vocabulary of V tokens, the target distribution puts 1 - eps on the
reference token and spreads eps uniformly over all V tokens (torch's convention), so

    loss = (1 - eps) * -log p(reference) + eps * mean_v(-log p(v))

averaged over the target positions that are not padding.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor


def label_smoothed_loss(
    logits: Tensor, target: Tensor, *, pad_id: int, smoothing: float = 0.1, reduction: str = "mean"
) -> Tensor:
    """logits: (..., V), target: (...) int64 -> scalar loss over the non-pad targets.

    ``reduction="mean"`` divides by the number of non-pad targets (as
    ``F.cross_entropy(..., ignore_index=pad_id, label_smoothing=smoothing)`` does);
    ``"sum"`` returns the sum, for callers that normalise by a count of their own
    (data-parallel training divides by the tokens of the whole global batch).
    """
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"label smoothing must be in [0, 1), got {smoothing}")
    log_probs = F.log_softmax(logits.float(), dim=-1)  # (..., V), in float32 even under autocast
    nll = -log_probs.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (...): -log p(reference)
    uniform = -log_probs.mean(dim=-1)  # (...): cross-entropy with the uniform distribution
    per_token = (1.0 - smoothing) * nll + smoothing * uniform
    keep = target != pad_id
    total = per_token.masked_fill(~keep, 0.0).sum()
    if reduction == "sum":
        return total
    if reduction == "mean":
        return total / keep.sum().clamp(min=1)
    raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")


def token_accuracy_counts(logits: Tensor, target: Tensor, *, pad_id: int) -> tuple[int, int]:
    """(correct, total) non-pad positions where the most likely token is the reference."""
    keep = target != pad_id
    correct = (logits.argmax(dim=-1) == target) & keep
    return int(correct.sum()), int(keep.sum())


def exact_match(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Fraction of outputs identical to their reference (after stripping outer spaces)."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    if not references:
        return 0.0
    return sum(h.strip() == r.strip() for h, r in zip(hypotheses, references, strict=True)) / len(references)


def bleu_chrf(hypotheses: Sequence[str], references: Sequence[str]) -> tuple[float, float]:
    """Corpus BLEU and chrF (0-100) from sacrebleu, the standard implementations.

    BLEU needs 2-, 3- and 4-gram matches: when every reference is one word (a German number
    such as "zweiundvierzig") it is 0 whatever the outputs, and chrF (character n-grams) is
    the informative score.
    """
    import sacrebleu  # imported here: only evaluation needs it

    if not references:
        return 0.0, 0.0
    refs = [list(references)]
    return sacrebleu.corpus_bleu(list(hypotheses), refs).score, sacrebleu.corpus_chrf(list(hypotheses), refs).score


def is_finite(value: Tensor | float) -> bool:
    """False for NaN and +-inf: the trainer stops instead of stepping on such a loss."""
    return bool(torch.isfinite(torch.as_tensor(value)).all())
