"""Time every attribution method on the shipped models, and report IG's convergence delta.

Prints figures, never pass/fail. Targets from the issue: all methods together <= 2 s warm,
integrated gradients alone <= 1 s per sentence. Per model, one ~20-token input (the dates
model reads ISO dates of 11 tokens: its input is as long as its task allows); each method is
run once to warm up, then timed ``--repeats`` times (median). Also prints, for integrated
gradients, |delta| relative to |f(x) - f(baseline)| (summed over the sentence's rows, and
the worst row), and on ``reverse`` each method's alignment accuracy against the true
(anti-diagonal) alignment.

    python bench/bench_explain.py [--repeats 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from transformer.explain import METHODS, alignment_accuracy, attribute, true_alignment  # noqa: E402
from transformer.pipeline import load_pretrained  # noqa: E402
from transformer.text.ids import target_ids  # noqa: E402

INPUTS = {
    "reverse": "abc123xyz0987qwerty1",
    "dates-de": "2026-11-21",
    "numbers-en-de": "three hundred and forty-seven thousand two hundred and twelve",
}


def timed(call, repeats: int) -> float:
    call()  # warm
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, median of {args.repeats} warm runs")
    for name, text in INPUTS.items():
        pipe = load_pretrained(name)
        output = pipe.translate(text)
        src = torch.tensor([pipe.source_ids(text)[1]])
        tgt = torch.tensor([target_ids(pipe.tgt_tokenizer, output)])
        print(f"\n{name}: {text!r} -> {output!r}  (S = {src.size(1)}, T-1 = {tgt.size(1) - 1})")
        total = 0.0
        for method in METHODS:
            seconds = timed(lambda m=method: attribute(pipe.model, src, tgt, m), args.repeats)
            total += seconds
            print(f"  {method:22s} {seconds * 1000:8.1f} ms")
        together = timed(lambda: [attribute(pipe.model, src, tgt, m) for m in METHODS], 1)
        print(f"  {'all methods together':22s} {together * 1000:8.1f} ms (sum of medians {total * 1000:.1f} ms)")
        ig = attribute(pipe.model, src, tgt, "integrated_gradients")
        delta = ig.delta[0].abs()
        difference = (ig.source.sum(-1) - ig.delta)[0].abs()  # |f(x) - f(baseline)| by completeness
        print(f"  IG |delta| / |f(x) - f(baseline)|: summed over rows {float(delta.sum() / difference.sum()):.3f}, "
              f"worst row {float((delta / difference).max()):.3f}")
        if name == "reverse":
            truth = true_alignment("reverse", text, output, [*text, "</s>"], [*output, "</s>"])
            accuracies = {m: alignment_accuracy(attribute(pipe.model, src, tgt, m).source[0], truth) for m in METHODS}
            print("  alignment accuracy (top source token on the anti-diagonal): "
                  + ", ".join(f"{m} {a:.2f}" for m, a in accuracies.items()))


if __name__ == "__main__":
    main()
