"""How far integrated gradients' adaptive rule refines each row on the shipped models (issue 35).

The default (``n_steps=None``, transformer/explain/gradients.py) integrates every row by the trapezoid rule over
8 intervals and refines a row to 16, 32, ... 1024 until its own |delta| is within 5% of its own |f(x) - f(x')|
(plus ``DELTA_FLOOR``). Per model, on ``--inputs`` sources drawn from its task (seed 1, greedy translations), this
prints the cumulative share of rows within tolerance at each level, the rows still off at 1024, the worst row's
|delta| / |gap|, and the share of rows within 5% at 128 intervals (where the old sentence-level rule stopped at the
latest) next to the sentence-level figure; and the seconds per sentence. Prints figures, never pass/fail.

    python bench/bench_ig_rows.py [--inputs 5] [--threads 2] [--models reverse dates-de ...]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from transformer.explain import attribute  # noqa: E402
from transformer.explain.gradients import (  # noqa: E402
    DELTA_FLOOR,
    STEP_LADDER,
    _adaptive_integrated_gradients,
    within_tolerance,
)
from transformer.explain.inputs import real_rows  # noqa: E402
from transformer.pipeline import load_pretrained  # noqa: E402
from transformer.text.ids import target_ids  # noqa: E402
from transformer.text.tasks import make_task  # noqa: E402

MODELS = ("reverse", "dates-de", "numbers-en-de", "sentences-en-de")
LARGE_GAP = 0.1  # nats: the worst row is reported over rows whose gap is at least this (the floor is 1% of it)


def sources(pipe, count: int) -> list[str]:
    """``count`` sources of the model's own task (seed 1: a draw of its own, not the training run's)."""
    meta = pipe.meta
    pairs = make_task(meta["task"], n_train=count, n_valid=0, n_test=0, seed=1, src_lang=meta["src_lang"],
                      tgt_lang=meta["tgt_lang"], **meta.get("task_options", {}))
    return [src for src, _ in pairs.train[:count]]  # dates and numbers add their building blocks after the draw


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.inputs} inputs per model")
    for name in args.models:
        pipe = load_pretrained(name)
        stops: Counter[int] = Counter()
        off = rows = 0
        worst, tiny, seconds, at_128, sentence_128 = 0.0, 0, 0.0, 0, []
        for text in sources(pipe, args.inputs):
            src = torch.tensor([pipe.source_ids(text)[1]])
            tgt = torch.tensor([target_ids(pipe.tgt_tokenizer, pipe.translate(text))])
            real = real_rows(tgt, None, pipe.config.pad_id)
            start = time.perf_counter()
            attr, delta, points = _adaptive_integrated_gradients(pipe.model, src, tgt, real, None, None,
                                                                 "riemann_trapezoid", "zero")
            seconds += time.perf_counter() - start
            gap = attr.sum(-1) - delta  # (R,): f(x) - f(x') per row
            converged = within_tolerance(delta, gap)
            stops.update((points[converged] - 1).tolist())
            off += int((~converged).sum())
            rows += delta.numel()
            large = gap.abs() >= LARGE_GAP
            tiny += int((~large).sum())
            worst = max([worst, *(delta.abs() / gap.abs())[large].tolist()])
            fixed = attribute(pipe.model, src, tgt, "integrated_gradients", n_steps=128 + 1)
            fixed_delta = fixed.delta[0, real.row]
            at_128 += int(within_tolerance(fixed_delta, gap).sum())
            sentence_128.append(float(fixed_delta.abs().sum() / gap.abs().sum()))
        reached, shares = 0, []
        for level in STEP_LADDER:
            reached += stops[level]
            shares.append(f"{level}: {reached / rows:.0%}")
        print(f"\n{name}: {rows} rows, {seconds / args.inputs:.2f} s per sentence (adaptive)")
        print(f"  rows within tolerance by level (cumulative): {', '.join(shares)}; still off at "
              f"{STEP_LADDER[-1]}: {off}")
        print(f"  worst row |delta| / |gap| after refining: {worst:.3f} (rows with |gap| >= {LARGE_GAP:g}; {tiny} "
              f"rows below, where the floor {DELTA_FLOOR:g} weighs more)")
        print(f"  at 128 intervals for every row: {at_128 / rows:.0%} of rows within tolerance, sentence-level "
              f"|delta| / |gap| at most {max(sentence_128):.3f}")


if __name__ == "__main__":
    main()
