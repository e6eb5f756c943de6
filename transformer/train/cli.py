"""The command line of training: flags for a TrainConfig, a progress bar, and a one-line summary.

    python -m transformer.train --task numbers --src-lang en --tgt-lang de --max-seconds 120 --out runs/numbers-en-de
    python -m transformer.train --architecture decoder --task reverse --out runs/reverse-decoder   # decoder-only

Under ``torchrun`` every process runs this; only rank 0 shows progress and prints the summary.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence

from ..checkpoints import checkpoint as ckpt
from ..text import tasks as data_module
from .config import (
    AMP_MODES,
    ARCHITECTURES,
    POSITIONS,
    SCHEDULES,
    TOKENIZER_KINDS,
    Progress,
    TrainConfig,
    TrainingDiverged,
    check_config,
)
from .loop import train

DESCRIPTION = "Training with the paper's recipe (section 5), every part switchable, and its command line."


def build_parser() -> argparse.ArgumentParser:
    d = TrainConfig()
    p = argparse.ArgumentParser(prog="python -m transformer.train", description=DESCRIPTION,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    g = p.add_argument_group("data")
    g.add_argument("--task", default=d.task, choices=data_module.TASKS)
    g.add_argument("--src-lang", default=d.src_lang)
    g.add_argument("--tgt-lang", default=d.tgt_lang)
    g.add_argument("--data", help="a TSV/CSV file of source/target pairs (instead of --task)")
    g.add_argument("--task-option", action="append", default=[], metavar="KEY=VALUE",
                   help="a text.tasks.make_task option, e.g. max_number=9999 (repeatable)")
    g.add_argument("--n-train", type=int, default=d.n_train)
    g = p.add_argument_group("tokenizer")
    g.add_argument("--tokenizer", default=d.tokenizer, choices=TOKENIZER_KINDS)
    g.add_argument("--vocab-size", type=int, default=d.vocab_size)
    g.add_argument("--separate-vocab", action="store_true", help="one vocabulary per side")
    g = p.add_argument_group("model")
    g.add_argument("--architecture", default=d.architecture, choices=ARCHITECTURES,
                   help="decoder: one stack reading source + <s> + target + </s> in one joint vocabulary, the loss on "
                        "the target only")
    g.add_argument("--positional", default=d.positional, choices=POSITIONS,
                   help="the paper's sinusoid, or a learned position table")
    for name in ("d_model", "n_heads", "n_layers", "d_ff", "max_len"):
        g.add_argument("--" + name.replace("_", "-"), type=int, default=getattr(d, name))
    g.add_argument("--dropout", type=float, default=d.dropout)
    g.add_argument("--no-tie", dest="tie_embeddings", action="store_false", help="separate embedding matrices")
    g.add_argument("--pre-ln", dest="norm_first", action="store_true", help="LayerNorm before each sub-layer")
    g = p.add_argument_group("optimisation")
    g.add_argument("--schedule", default=d.schedule, choices=SCHEDULES)
    g.add_argument("--warmup", type=int, default=d.warmup)
    g.add_argument("--lr-factor", type=float, default=d.lr_factor)
    g.add_argument("--lr", type=float, help="peak learning rate (overrides --lr-factor)")
    g.add_argument("--label-smoothing", type=float, default=d.label_smoothing)
    g.add_argument("--clip-norm", type=float, default=d.clip_norm, help="0 switches clipping off")
    g.add_argument("--batch-tokens", type=int, default=d.batch_tokens)
    g.add_argument("--batch-sentences", type=int, default=d.batch_sentences,
                   help="at most this many examples per batch (0: no cap)")
    g.add_argument("--max-steps", type=int)
    g.add_argument("--cooldown", type=int, default=d.cooldown, metavar="N",
                   help="the last N of --max-steps: the learning rate falls linearly towards 0")
    g.add_argument("--max-seconds", type=float, default=d.max_seconds)
    g.add_argument("--cooldown-share", type=float, default=d.cooldown_share, metavar="S",
                   help="without --cooldown: the last share S of --max-seconds, the rate falls linearly to 0 "
                        "(0 switches it off)")
    g = p.add_argument_group("evaluation and output")
    g.add_argument("--eval-every", type=float, default=d.eval_every, help="seconds between evaluations")
    g.add_argument("--eval-every-steps", type=int)
    g.add_argument("--eval-sentences", type=int, default=d.eval_sentences)
    g.add_argument("--log-every", type=int, default=d.log_every)
    g.add_argument("--no-snapshots", dest="snapshots", action="store_false")
    g.add_argument("--snapshot-dtype", default=d.snapshot_dtype, choices=tuple(ckpt.STORAGE_DTYPES),
                   help="float16 halves each snapshot; loaded back as float32")
    g.add_argument("--max-snapshots", type=int, metavar="N",
                   help="at the end keep N snapshots, spread on a log scale (step 0 and the last kept)")
    g.add_argument("--no-optimizer-state", dest="save_optimizer", action="store_false",
                   help="do not store Adam's moments (smaller folder, cannot be resumed exactly)")
    g.add_argument("--out", help="checkpoint folder (default runs/<task>-<src>-<tgt>)")
    g.add_argument("--resume", metavar="DIR", help="continue training the checkpoint in DIR")
    g.add_argument("--overwrite", action="store_true", help="replace a checkpoint already in --out (refused otherwise)")
    g = p.add_argument_group("machine")
    g.add_argument("--seed", type=int, default=d.seed)
    g.add_argument("--device", default=d.device)
    g.add_argument("--amp", default=d.amp, choices=AMP_MODES)
    g.add_argument("--threads", type=int)
    g.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def config_from_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> tuple[TrainConfig, bool]:
    """Parse and check the command line; any problem ends with a usage message and exit code 2."""
    ns = vars(parser.parse_args(argv))
    quiet = ns.pop("quiet")
    options = {}
    for item in ns.pop("task_option"):
        key, sep, value = item.partition("=")
        if not sep or not key:
            parser.error(f"--task-option expects KEY=VALUE, got {item!r}")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    if ns.get("batch_sentences") == 0:  # 0 on the command line: no cap
        ns["batch_sentences"] = None
    cfg = TrainConfig(**ns, task_options=options)
    try:
        check_config(cfg)
    except ValueError as error:  # includes DataError and CheckpointError
        parser.error(str(error))
    return cfg, quiet


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    cfg, quiet = config_from_args(parser, argv)
    is_main = int(os.environ.get("RANK", "0")) == 0
    bar = None
    if not quiet and is_main:
        from tqdm import tqdm

        total = cfg.max_steps if cfg.max_steps else cfg.max_seconds
        bar = tqdm(total=total, unit="step" if cfg.max_steps else "s", dynamic_ncols=True,
                   bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} {unit} [{elapsed}<{remaining}{postfix}]")

    def show(progress: Progress) -> None:
        if bar is None:
            return
        if progress.phase == "train":
            bar.n = min(progress.step if cfg.max_steps else progress.elapsed, bar.total or math.inf)
            bar.set_postfix(step=progress.step, loss=f"{progress.loss:.3f}", lr=f"{progress.lr:.2e}", refresh=False)
            bar.refresh()
        elif progress.phase in ("eval", "test") and progress.metrics:
            shown = {k: round(v, 3) for k, v in progress.metrics.items()}
            bar.write(f"step {progress.step} {progress.phase}: {shown}")

    try:
        result = train(cfg, callback=show)
    except TrainingDiverged as error:
        if bar is not None:
            bar.close()
        print(f"error: {error}", file=sys.stderr)
        return 1
    if bar is not None:
        bar.close()
    if is_main:
        test = result.metrics.get("test", {})
        summary = ", ".join(f"{k} {v:.4g}" for k, v in test.items())
        print(f"{result.step} steps in {result.elapsed:.1f} s ({result.stop_reason}); "
              f"{result.parameters:,} parameters; test: {summary or 'not evaluated'}; saved to {result.out}")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
    return 0
