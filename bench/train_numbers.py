"""Benchmark: train numbers en->de for two minutes on the CPU and report exact match on the test split.

    python bench/train_numbers.py                 # the README's command, then an independent re-check
    python bench/train_numbers.py --seconds 60 -- --batch-tokens 2000   # other budget, extra trainer flags

It runs exactly ``python -m transformer.train --task numbers --src-lang en --tgt-lang de
--max-seconds 120 --out runs/numbers-en-de`` in a subprocess, then reloads the checkpoint and
greedy-decodes the whole test split itself, so the figure does not rest on the trainer's own
bookkeeping. Timings depend on how busy the machine is: the load average is printed with them.
Prints figures only; never part of the test pass/fail.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def recheck(out: Path) -> tuple[float, int]:
    """Exact match of greedy outputs on the run's test split, recomputed from the saved checkpoint."""
    import torch

    from transformer.checkpoints.checkpoint import load_checkpoint
    from transformer.decoding import greedy_decode
    from transformer.text.ids import pad, source_ids
    from transformer.text.tasks import make_task
    from transformer.train import TrainConfig, make_splits

    checkpoint = load_checkpoint(out)
    args = checkpoint.meta["train_args"]
    cfg = TrainConfig.from_saved(args)
    splits = make_splits(cfg) if cfg.data else make_task(
        cfg.task, n_train=cfg.n_train, n_valid=cfg.n_valid, n_test=cfg.n_test, seed=cfg.seed,
        src_lang=cfg.src_lang, tgt_lang=cfg.tgt_lang, **cfg.task_options)
    max_len = checkpoint.meta["max_output_len"]
    correct = 0
    with torch.inference_mode():
        for start in range(0, len(splits.test), 250):
            pairs = splits.test[start : start + 250]
            src = pad([source_ids(checkpoint.src_tokenizer, s) for s, _ in pairs])
            decoded = greedy_decode(checkpoint.model, src, max_len=max_len)
            for tokens, (_, reference) in zip(decoded.tokens, pairs, strict=True):
                correct += checkpoint.tgt_tokenizer.decode(tokens).strip() == reference.strip()
    return correct / len(splits.test), len(splits.test)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=120.0, help="the training budget (--max-seconds)")
    parser.add_argument("--out", default="runs/numbers-en-de")
    parser.add_argument("extra", nargs="*", help="more flags for transformer.train, after --")
    args = parser.parse_args()

    command = [sys.executable, "-m", "transformer.train", "--task", "numbers", "--src-lang", "en",
               "--tgt-lang", "de", "--max-seconds", f"{args.seconds:g}", "--out", args.out, *args.extra]
    print("$", " ".join(command[1:]).replace(sys.executable, "python"), flush=True)
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        print(f"training failed with exit code {done.returncode}")
        return done.returncode

    from transformer.checkpoints.checkpoint import load_checkpoint

    out = REPO / args.out
    meta = load_checkpoint(out).meta
    test = meta["metrics"].get("test", {})
    exact, n = recheck(out)
    print(f"load average before/after: {load_before:.2f} / {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"parameters: {meta['parameters']:,}  steps: {meta['step']}  training: {meta['elapsed_seconds']:.1f} s  "
          f"command wall time (data, tokenizer, training, evaluation): {wall:.1f} s")
    print("trainer's test metrics: " + ", ".join(f"{k} {v:.4g}" for k, v in test.items()))
    print(f"exact match on the test split (greedy, re-checked from the checkpoint, {n} sentences): {exact:.2%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
