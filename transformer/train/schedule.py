"""The two schedules of training: the learning rate at each step, and which examples make each batch.

Section 5.3 of the paper: "We varied the learning rate over the course of training, according to

    lrate = d_model^-0.5 * min(step_num^-0.5, step_num * warmup_steps^-1.5)

This corresponds to increasing the learning rate linearly for the first warmup_steps training steps,
and decreasing it thereafter proportionally to the inverse square root of the step number."

Section 5.1: "Sentence pairs were batched together by approximate sequence length. Each training
batch contained a set of sentence pairs containing approximately 25000 source tokens and 25000
target tokens." ``token_batches`` does that with a token budget per batch.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence


def noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """The paper's learning rate at optimisation step ``step`` (1 = the first update).

    ``factor`` scales the whole curve (the paper uses 1; small models like a larger one).
    The peak is at ``step == warmup``: factor * (d_model * warmup)^-0.5.
    """
    if d_model <= 0 or warmup <= 0:
        raise ValueError(f"d_model and warmup must be positive, got {d_model} and {warmup}")
    step = max(step, 1)  # step 0 would divide by zero; the first update is step 1
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def factor_for_peak(peak_lr: float, d_model: int, warmup: int) -> float:
    """The ``factor`` whose schedule peaks at ``peak_lr``: lets a user say "--lr 1e-3" instead."""
    return peak_lr * math.sqrt(d_model * warmup)


def example_size(src_len: int, tgt_len: int) -> int:
    """Padded positions one example claims in a batch: its longer side (encoder or decoder)."""
    return max(src_len, tgt_len)


def token_batches(
    sizes: Sequence[int], max_tokens: int, *, seed: int = 0, epoch: int = 0, shuffle: bool = True
) -> list[list[int]]:
    """Group example indices into batches of similar size under a token budget.

    sizes[i] is example i's length in tokens (see ``example_size``). A batch of n examples
    padded to its longest costs n * max(size) positions, which stays <= ``max_tokens``.
    Examples are sorted by size (ties broken at random) and cut into batches greedily, so
    little padding is wasted; then the batch order is shuffled. The result depends only on
    (sizes, max_tokens, seed, epoch): every epoch gets new batches, and a resumed run can
    rebuild the same ones. Each index appears exactly once. An example longer than the
    whole budget gets a batch of its own (the only batch allowed over budget).
    """
    if max_tokens <= 0:
        raise ValueError(f"max_tokens must be positive, got {max_tokens}")
    rng = random.Random(seed * 1_000_003 + epoch)
    jitter = [rng.random() if shuffle else 0.0 for _ in sizes]
    order = sorted(range(len(sizes)), key=lambda i: (sizes[i], jitter[i]))

    batches: list[list[int]] = []
    batch: list[int] = []
    for i in order:  # ascending size: the newest example is always the batch's longest
        if batch and (len(batch) + 1) * sizes[i] > max_tokens:
            batches.append(batch)
            batch = []
        batch.append(i)
    if batch:
        batches.append(batch)
    if shuffle:
        rng.shuffle(batches)
    return batches
