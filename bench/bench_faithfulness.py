"""Time ``faithfulness`` (explain/eraser.py) for one 20 + 20-token pair and one method on a random-weight model of a
real model's size (prints figures; never a test). The attribution is computed first and not timed: what is timed is
the measure alone (the perturbed copies' forwards, the random baseline included).

    python bench/bench_faithfulness.py [--size opus-mt|nllb-600M] [--threads 2] [--repeats 3] [--method attention]

opus-mt: d_model 512, 6 + 6 layers, 8 heads, d_ff 2048, 58,101 pieces (Helsinki-NLP/opus-mt-en-de's sizes);
nllb-600M: d_model 1024, 12 + 12 layers, 16 heads, d_ff 4096, 256,206 pieces (2.4 GB of float32 weights). Times and
copies depend on the sizes, not the values.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from transformer.explain import attribute, faithfulness  # noqa: E402
from transformer.network.config import TransformerConfig  # noqa: E402
from transformer.network.model import Transformer  # noqa: E402

SIZES = {
    "opus-mt": dict(d_model=512, n_heads=8, n_layers=6, d_ff=2048, vocab=58_101, activation="silu"),
    "nllb-600M": dict(d_model=1024, n_heads=16, n_layers=12, d_ff=4096, vocab=256_206, activation="relu"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=list(SIZES), default="opus-mt")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--method", default="attention")
    parser.add_argument("--tokens", type=int, default=20, help="source tokens and target tokens, each with </s>")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    size = SIZES[args.size]
    config = TransformerConfig(src_vocab_size=size["vocab"], tgt_vocab_size=size["vocab"], d_model=size["d_model"],
                               n_heads=size["n_heads"], n_layers=size["n_layers"], d_ff=size["d_ff"], dropout=0.0,
                               activation=size["activation"], tying="all")
    with torch.device("meta"):
        model = Transformer(config)
    model.to_empty(device="cpu")
    model.tie_weights()
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(0.05 * torch.randn(parameter.shape, generator=generator))
    model.eval()
    n = args.tokens
    src = torch.cat([torch.randint(4, size["vocab"], (1, n - 1), generator=generator), torch.tensor([[3]])], 1)
    tgt = torch.cat([torch.tensor([[2]]), torch.randint(4, size["vocab"], (1, n - 1), generator=generator),
                     torch.tensor([[3]])], 1)
    result = attribute(model, src, tgt, args.method)
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        table = faithfulness(model, src, tgt, result)
        times.append(time.perf_counter() - start)
    rows = int((table.ranking == "method").sum())
    start = time.perf_counter()
    attribute(model, src, tgt, "occlusion")  # docs/benchmarks.md has its quiet figure: how busy the machine is
    occlusion = time.perf_counter() - start
    print(f"{args.size}, {args.method}, {n} + {n} tokens ({rows} rows), {args.threads} threads: faithfulness "
          f"median {statistics.median(times):.2f} s (min {min(times):.2f}, max {max(times):.2f}) over {args.repeats}; "
          f"occlusion on the same pair {occlusion:.2f} s (a yardstick: 0.56 s at opus-mt size on the quiet machine)")


if __name__ == "__main__":
    main()
