"""Training-step speed of our Transformer against the torch.nn.Transformer reference.

Same config (d_model 128, 4 heads, 3+3 layers, d_ff 512), identical batches (64 sentences,
padded to different lengths), 2 threads; one step = forward, label-smoothed loss, backward,
Adam step. Runs of the two models alternate in one process so that machine noise hits both
alike. Also prints the cost of recording a Trace on an eval forward.

    python bench/bench_model.py [--steps 20] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere without installing

from transformer import Trace, Transformer, TransformerConfig  # noqa: E402, Transformer, TransformerConfig
from transformer.network.interop import to_torch  # noqa: E402

PAD = 0


def make_batches(n: int, batch: int, vocab: int, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(n):
        src_len = torch.randint(10, 25, (batch,), generator=g)
        tgt_len = torch.randint(10, 25, (batch,), generator=g)
        src = torch.randint(4, vocab, (batch, int(src_len.max())), generator=g)
        tgt = torch.randint(4, vocab, (batch, int(tgt_len.max()) + 1), generator=g)
        src[torch.arange(src.size(1)) >= src_len[:, None]] = PAD
        tgt[torch.arange(tgt.size(1)) >= tgt_len[:, None] + 1] = PAD
        batches.append((src, tgt))
    return batches


def time_steps(module, optimizer, batches) -> tuple[float, int]:
    """Seconds for one training step per batch, and the target tokens processed."""
    tokens = 0
    start = time.perf_counter()
    for src, tgt in batches:
        tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
        logits = module(src, tgt_in)
        loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD, label_smoothing=0.1)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        tokens += int((tgt_out != PAD).sum())
    return time.perf_counter() - start, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="training steps per timed run")
    parser.add_argument("--rounds", type=int, default=5, help="alternating runs of each model")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    config = TransformerConfig(src_vocab_size=1000, tgt_vocab_size=1000, d_model=128, n_heads=4, n_layers=3,
                               d_ff=512, dropout=0.1, max_len=64)
    ours = Transformer(config).train()
    ref = to_torch(ours).train()
    adam = dict(lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    modules = {"ours": ours, "torch": ref}
    optimizers = {name: torch.optim.Adam(m.parameters(), **adam) for name, m in modules.items()}
    batches = make_batches(args.steps, 64, config.src_vocab_size)

    for name in modules:  # warm-up: allocator, kernels, optimizer state
        time_steps(modules[name], optimizers[name], batches[:3])
    rates: dict[str, list[float]] = {"ours": [], "torch": []}
    for _ in range(args.rounds):
        for name in ("ours", "torch"):
            seconds, tokens = time_steps(modules[name], optimizers[name], batches)
            rates[name].append(tokens / seconds)
    ours_rate, torch_rate = statistics.median(rates["ours"]), statistics.median(rates["torch"])
    params = ours.num_parameters()
    print(f"training step, d_model 128, 4 heads, 3+3 layers, d_ff 512, batch 64, {args.threads} threads, "
          f"{params / 1e6:.2f}M parameters")
    for label, name in (("ours          ", "ours"), ("nn.Transformer", "torch")):
        runs = ", ".join(f"{r:.0f}" for r in rates[name])
        print(f"  {label} {statistics.median(rates[name]):8.0f} target tokens/s  (runs: {runs})")
    print(f"  ratio ours / torch = {ours_rate / torch_rate:.2f}")

    # The cost of a trace: eval forward with and without recording, alternating.
    ours.eval()
    src, tgt = batches[0]
    plain, traced = [], []
    with torch.no_grad():
        for _ in range(args.rounds * 4):
            start = time.perf_counter()
            ours(src, tgt)
            plain.append(time.perf_counter() - start)
            start = time.perf_counter()
            ours(src, tgt, trace=Trace())
            traced.append(time.perf_counter() - start)
    p, t = statistics.median(plain), statistics.median(traced)
    print(f"eval forward of one batch: fast path {p * 1e3:.1f} ms, traced {t * 1e3:.1f} ms "
          f"(tracing costs x{t / p:.2f})")


if __name__ == "__main__":
    main()
