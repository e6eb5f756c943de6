"""What a short training run reaches (prints figures; never a test).

    python bench/bench_training.py                       # both parts, the full budgets
    python bench/bench_training.py --cli-seconds 30 --page-seconds 10 --tasks reverse
    python bench/bench_training.py --skip-cli            # only the Training page's defaults

1. The README's CLI run, exactly ``python -m transformer.train --task numbers --src-lang en
   --tgt-lang de --max-seconds 120`` (``--cli-seconds`` shortens it) into a temporary folder;
   the checkpoint is then reloaded and greedy-decodes 1,000 numbers whose digit count 1-6 is
   equally likely (their own seed, independent of the training draw) and every number 0-100,
   listing the wrong ones.
2. The Training page's default run per built-in task: the page's own code path
   (``ui.models.training_defaults.page_choices`` -> ``ui.models.training.make_config`` ->
   ``transformer.train.train``) at 1 torch thread as in the app, for ``--page-seconds``
   (default: the page's own default duration); prints the test split's exact match, BLEU, chrF.

Runs are bounded by seconds, so a busy machine lowers the figures: the load average is printed.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from anywhere without installing

EVAL_SEED = 20261122  # the 1,000 numbers to measure: not the training seed


def numbers_figures(folder: Path, max_number: int = 999_999) -> None:
    """Exact match on 1,000 numbers as users type them (up to ``max_number``) and on every number 0-100."""
    from num2words import num2words

    from transformer.pipeline import load_pretrained
    from transformer.text.tasks import draw_number

    pipe = load_pretrained(folder)
    rng = random.Random(EVAL_SEED)
    values = [draw_number(rng, max_number) for _ in range(1000)]
    digits = len(str(max_number))
    cases = ((f"1,000 numbers, 1-{digits} digits equally likely", values), ("every number 0-100", range(101)))
    for label, vals in cases:
        vals = list(vals)
        outputs = pipe.translate([num2words(v, lang="en") for v in vals])
        wrong = [(num2words(v, lang="en"), out) for v, out in zip(vals, outputs, strict=True)
                 if out != num2words(v, lang="de")]
        print(f"  {label}: {1 - len(wrong) / len(vals):.1%} exact ({len(wrong)} wrong)")
        if label.startswith("every") and wrong:
            print("    wrong:", ", ".join(f"{src!r}->{out!r}" for src, out in wrong))


def cli_run(seconds: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "transformer.train", "--task", "numbers", "--src-lang", "en",
               "--tgt-lang", "de", "--max-seconds", str(seconds), "--out", str(Path(tmp) / "run")]
        print("$", " ".join(cmd[1:]), f"(load average before: {os.getloadavg()[0]:.1f})")
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
        if done.returncode:
            print(done.stderr[-2000:])
            return
        print("  " + "\n  ".join(done.stdout.strip().splitlines()[-3:]))
        numbers_figures(Path(tmp) / "run")


def page_run(task: str, seconds: float | None) -> None:
    import torch

    from transformer.train import train
    from ui.models.training import make_config
    from ui.models.training_defaults import page_choices

    torch.set_num_threads(1)  # as the app (ui/models/menu.py TRANSFORMER_APP_THREADS)
    with tempfile.TemporaryDirectory() as tmp:
        choices = page_choices(task)
        if seconds is not None:
            choices["max_seconds"] = seconds
        config = make_config(**choices, device="cpu", out=str(Path(tmp) / task), snapshots=False)
        load = os.getloadavg()[0]
        result = train(config)
        test = result.metrics.get("test", {})
        print(f"  {task:10s} {config.max_seconds:.0f} s, {result.step} steps: exact match "
              f"{test.get('exact_match', 0):.1%}, BLEU {test.get('bleu', 0):.1f}, chrF {test.get('chrf', 0):.1f}"
              f"  (load average before: {load:.1f})")
        if task == "numbers":
            numbers_figures(Path(tmp) / task, config.task_options.get("max_number", 999_999))


def main() -> None:
    from transformer.text.tasks import TASKS

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cli-seconds", type=float, default=120.0)
    parser.add_argument("--page-seconds", type=float, default=None, help="default: the page's own")
    parser.add_argument("--tasks", nargs="*", default=list(TASKS), choices=TASKS)
    parser.add_argument("--skip-cli", action="store_true")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores")
    if not args.skip_cli:
        print("1. The CLI's default run, numbers en->de")
        cli_run(args.cli_seconds)
    if args.tasks:
        print("2. The Training page's default run per task (1 torch thread)")
        for task in args.tasks:
            page_run(task, args.page_seconds)


if __name__ == "__main__":
    main()
