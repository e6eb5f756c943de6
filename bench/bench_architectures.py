"""The encoder-decoder against a decoder-only model of the same size on one task (prints figures; never a test).

    python bench/bench_architectures.py --task reverse --max-seconds 300 --eval-every-steps 100 --threads 1 \
        --out /tmp/architectures

Takes every flag of ``python -m transformer.train`` (``--architecture`` is ignored: both are trained) and
``--target`` (exact match on the validation pairs, default 0.97) and ``--decoder-layers`` (default twice
``--n-layers``: as many layers as the encoder-decoder's two stacks). ``--eval-every-steps`` is needed: the steps
to the target are counted at evaluations. Prints, per architecture, the steps and the training seconds (the
evaluations' own time left out; the wall time with them in brackets) to the target, and the parameters
(``transformer.train.compare``). Runs are bounded by seconds and timed, so a busy machine lowers the figures:
the load average is printed.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from anywhere without installing

from transformer.train.cli import build_parser, config_from_args  # noqa: E402
from transformer.train.compare import compare_architectures  # noqa: E402


def main() -> None:
    own = argparse.ArgumentParser(add_help=False)
    own.add_argument("--target", type=float, default=0.97)
    own.add_argument("--decoder-layers", type=int)
    known, rest = own.parse_known_args()
    parser = build_parser()
    parser.prog = "python bench/bench_architectures.py"
    parser.epilog = ("and --target X (exact match on the validation pairs, default 0.97), --decoder-layers N (the "
                     "decoder-only model's layers, default 2 x --n-layers)")
    cfg, _ = config_from_args(parser, rest)
    if not cfg.eval_every_steps:
        parser.error("--eval-every-steps is needed: the steps to the target are counted at evaluations")
    print(f"task {cfg.task}, seed {cfg.seed}, d_model {cfg.d_model}, {cfg.n_heads} heads, d_ff {cfg.d_ff}, "
          f"{cfg.tokenizer} vocabulary, target exact match {known.target:.0%} on {cfg.eval_sentences} validation "
          f"pairs, load average {os.getloadavg()[0]:.1f}")
    for run in compare_architectures(cfg, known.target, decoder_layers=known.decoder_layers):
        stacks = f"{run.n_layers} + {run.n_layers}" if run.architecture == "encoder-decoder" else f"{run.n_layers}"
        if run.reached:
            reached = f"{run.steps} steps, {run.seconds:.1f} s ({run.wall_seconds:.1f} s with evaluations)"
        else:
            reached = f"not reached (last exact match {run.exact_match})"
        print(f"{run.architecture:>15} ({stacks} layers, {run.parameters:,} parameters): {reached}; {run.out}")
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
