"""The generator at opus-mt size: nn.Linear's x W^T against decoding.fast.few_rows_linear's W x^T (prints figures).

    python bench/bench_generator.py [--vocab 58101] [--d-model 512] [--repeats 20] [--threads 2]

Rows are what one decoding step projects: the batch, or the beams. Both are timed side by side in one run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from transformer.decoding.fast import few_rows_linear  # noqa: E402


def median_ms(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=58_101)
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    generator = torch.nn.Linear(args.d_model, args.vocab).eval()
    print(f"vocabulary {args.vocab}, d_model {args.d_model}, {args.threads} threads, median of {args.repeats}")
    print(f"{'rows':>6}{'nn.Linear ms':>14}{'W x^T ms':>14}{'ratio':>8}")
    with torch.inference_mode():
        for rows in (1, 2, 3, 4, 8, 16, 32, 64):
            x = torch.randn(rows, 1, args.d_model)
            linear = median_ms(lambda: F.linear(x, generator.weight, generator.bias), args.repeats)  # noqa: B023
            ours = median_ms(lambda: few_rows_linear(generator, x), args.repeats)  # noqa: B023
            print(f"{rows:>6}{linear:>14.1f}{ours:>14.1f}{ours / linear:>8.2f}")


if __name__ == "__main__":
    main()
