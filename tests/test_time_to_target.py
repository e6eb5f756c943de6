"""Steps and seconds to a target exact match: read off a run's training log (``compare.time_in_log``, what the
Training page shows for any run) they are what ``compare.time_to_exact_match`` reported while it trained."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from transformer.checkpoints.checkpoint import read_log
from transformer.train import TrainConfig, train
from transformer.train.compare import TargetWatch, time_in_log, time_to_exact_match


def tiny_config(out: Path, **changes) -> TrainConfig:
    """A copy task of a few dozen steps on one core (a decoder-only model learns it in 120 steps)."""
    base = TrainConfig(task="copy", task_options={"min_len": 2, "max_len": 5}, n_train=400, n_valid=20, n_test=10,
                       tokenizer="char", d_model=32, n_heads=2, n_layers=1, d_ff=64, warmup=30, lr=5e-3,
                       batch_tokens=256, max_steps=40, max_seconds=None, eval_every_steps=10, eval_sentences=20,
                       threads=1, snapshots=False, save_optimizer=False, out=str(out))
    return dataclasses.replace(base, **changes)


def test_the_watch_leaves_each_evaluations_own_time_out() -> None:
    log = [{"phase": "train", "step": 10, "elapsed": 1.0}, {"phase": "eval", "step": 10, "elapsed": 1.5,
                                                            "exact_match": 0.5},
           {"phase": "train", "step": 20, "elapsed": 2.5}, {"phase": "eval", "step": 20, "elapsed": 3.25,
                                                            "exact_match": 0.98},
           {"phase": "eval", "step": 20, "elapsed": 4.0, "exact_match": 0.2}]  # after the target: not read
    watch = time_in_log(log, 0.97)
    assert watch.reached and watch.steps == 20 and watch.wall_seconds == 3.25
    assert watch.seconds == 3.25 - (0.5 + 0.75)  # binary fractions: exact in float64
    assert watch.exact_match == 0.98
    missed = time_in_log(log[:2], 0.97)
    assert not missed.reached and missed.steps is None and missed.seconds is None and missed.exact_match == 0.5
    assert TargetWatch(0.5).see({"phase": "eval", "step": 3, "elapsed": 1.0, "metrics": {"exact_match": 0.5}})
    with pytest.raises(ValueError, match="target"):
        time_in_log(log, 0.0)


@pytest.mark.parametrize(("architecture", "target"), [("encoder-decoder", 1.0), ("decoder", 0.05)])
def test_the_figures_read_off_the_log_are_those_time_to_exact_match_reported(tmp_path: Path, architecture: str,
                                                                             target: float) -> None:
    """Whichever evaluation reaches the target (or none: 1.0 in 40 steps), the log gives the same numbers: JSON
    writes a float's shortest repr, which reads back to the same float, and both add the same terms in order."""
    reported = time_to_exact_match(tiny_config(tmp_path / "run", architecture=architecture), target)
    read = time_in_log(read_log(reported.out), target)
    assert (read.reached, read.steps, read.seconds, read.wall_seconds, read.exact_match) == (
        reported.reached, reported.steps, reported.seconds, reported.wall_seconds, reported.exact_match)
    assert reported.exact_match is not None  # it evaluated at least once


def test_an_evaluation_on_the_clock_has_a_training_report_right_before_it(tmp_path: Path) -> None:
    """Evaluations every so many seconds fall between two reports of ``log_every``: the loop reports right before
    each one, so the log times it (without, its time ran from the last report, some training steps included)."""
    train(tiny_config(tmp_path / "run", max_steps=6, eval_every_steps=None, eval_every=1e-9, log_every=5,
                      eval_sentences=2))
    log = read_log(tmp_path / "run")
    evals = [i for i, r in enumerate(log) if r["phase"] == "eval"]
    assert len(evals) >= 5  # one after every step (1e-9 s), the last one's at the end
    for i in evals:
        assert log[i - 1]["phase"] == "train" and log[i - 1]["step"] == log[i]["step"], log[i - 1: i + 1]
