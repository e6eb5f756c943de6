"""The encoder-decoder against a decoder-only model on one task: each one's steps and seconds to a target exact
match on held-out pairs, and its parameters.

Both runs take the same ``TrainConfig`` (task, seed, data, the one joint tokenizer, d_model, heads, d_ff,
optimisation, budgets) and differ only in ``architecture`` and, for the decoder-only model, its depth: by default
it gets ``2 * n_layers`` layers, as many as the encoder-decoder has in its two stacks (an encoder-decoder of
N + N layers has about the parameters of a decoder-only one of 2N layers plus N cross-attentions; each run's
parameter count is reported). Each run evaluates greedy exact match on the validation pairs (never trained on)
every ``eval_every_steps`` steps and stops at the first evaluation that reaches ``target``. Its seconds are
training seconds: the time of the evaluations themselves is left out (it depends on the evaluation's size, not
on how fast a model learns); the wall time with them is reported too. A run that spends its ``max_steps`` or
``max_seconds`` first is reported as not reaching the target.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import Progress, TrainConfig
from .loop import train


@dataclass(frozen=True)
class TimeToTarget:
    """One run of ``time_to_exact_match``."""

    architecture: str  # "encoder-decoder" or "decoder"
    n_layers: int  # layers per stack
    parameters: int
    target: float  # the exact match asked for, on the validation pairs
    reached: bool
    steps: int | None  # the step of the first evaluation at or above the target (None: not reached)
    seconds: float | None  # training seconds to that step, the evaluations' own time left out
    wall_seconds: float | None  # the same with the evaluations
    exact_match: float | None  # the last evaluation's exact match
    out: Path  # the run's checkpoint folder

    def as_row(self) -> dict[str, object]:
        return {k: str(v) if isinstance(v, Path) else v for k, v in dataclasses.asdict(self).items()}


@dataclass
class TargetWatch:
    """Reads a run's reports in order (``Progress`` as they come, or the lines of its log, which hold the same
    numbers) and finds the first evaluation whose exact match reaches ``target``: its step, its training seconds
    (``elapsed`` less the time spent in evaluations, each timed from the training report right before it) and
    its wall seconds. ``time_to_exact_match`` watches a run with it and ``time_in_log`` reads a log with it, so the
    two give the same figures."""

    target: float
    before_eval: float = 0.0  # ``elapsed`` at the latest training report
    eval_seconds: float = 0.0  # the evaluations' own time so far
    exact_match: float | None = None  # the latest evaluation's (up to the one that reached the target)
    steps: int | None = None
    seconds: float | None = None
    wall_seconds: float | None = None

    @property
    def reached(self) -> bool:
        return self.steps is not None

    def see(self, record: Mapping[str, Any]) -> bool:
        """One report (a log line or ``Progress.as_dict()``, the metrics flat or under "metrics"); True when this
        one is the evaluation that reached the target."""
        phase, elapsed = record.get("phase"), float(record["elapsed"])
        metrics = record.get("metrics") or record
        if phase == "train":
            self.before_eval = elapsed
        elif phase == "eval" and "exact_match" in metrics and not self.reached:
            self.eval_seconds += elapsed - self.before_eval
            self.exact_match = float(metrics["exact_match"])
            if self.exact_match >= self.target:
                self.steps, self.wall_seconds = int(record["step"]), elapsed
                self.seconds = elapsed - self.eval_seconds
                return True
        return False


def _check_target(target: float) -> None:
    if not 0 < target <= 1:
        raise ValueError(f"target must be an exact match in (0, 1], got {target}")


def time_in_log(log: Iterable[Mapping[str, Any]], target: float = 0.97) -> TargetWatch:
    """The steps and seconds to ``target`` read off a run's training log (``checkpoints.read_log``): what
    ``time_to_exact_match`` reports for the run that wrote it, for any run (one that trained past the target, one
    of the app's). A log's evaluations come every ``eval_every`` seconds or ``eval_every_steps`` steps, so the
    step found is the first evaluation's at or above the target, not the first step that got there."""
    _check_target(target)
    watch = TargetWatch(target)
    for record in log:
        if watch.see(record):
            break
    return watch


def time_to_exact_match(cfg: TrainConfig, target: float = 0.97) -> TimeToTarget:
    """Train ``cfg`` (which must set ``eval_every_steps``) until an evaluation's exact match on the validation pairs
    reaches ``target``, or its budget ends; the checkpoint is in ``cfg.output_folder()``."""
    _check_target(target)
    if not cfg.eval_every_steps:
        raise ValueError("time_to_exact_match needs eval_every_steps: the steps to the target are counted at "
                         "evaluations")
    run_cfg = dataclasses.replace(cfg, log_every=cfg.eval_every_steps)  # a train report right before each eval
    stop = threading.Event()
    watch = TargetWatch(target)

    def see(progress: Progress) -> None:
        if watch.see(progress.as_dict()):
            stop.set()

    result = train(run_cfg, callback=see, stop_event=stop)
    return TimeToTarget(
        architecture=cfg.architecture, n_layers=cfg.n_layers, parameters=result.parameters, target=target,
        reached=watch.reached, steps=watch.steps, seconds=watch.seconds, wall_seconds=watch.wall_seconds,
        exact_match=watch.exact_match, out=result.out)


def decoder_twin(cfg: TrainConfig, *, decoder_layers: int | None = None) -> TrainConfig:
    """The decoder-only twin of an encoder-decoder recipe: the same config with ``architecture="decoder"`` and
    ``decoder_layers`` layers, by default ``2 * cfg.n_layers`` (as many as the encoder-decoder's two stacks), in one
    joint vocabulary (``separate_vocab`` off; a decoder-only model reads source and target as one sequence)."""
    return dataclasses.replace(cfg, architecture="decoder", n_layers=decoder_layers or 2 * cfg.n_layers,
                               separate_vocab=False)


def compare_architectures(cfg: TrainConfig, target: float = 0.97, *,
                          decoder_layers: int | None = None) -> list[TimeToTarget]:
    """The encoder-decoder and its ``decoder_twin`` on the same config, one after the other, into
    ``<out>/encoder-decoder`` and ``<out>/decoder``."""
    out = cfg.output_folder()
    runs = [dataclasses.replace(cfg, architecture="encoder-decoder", out=str(out / "encoder-decoder")),
            dataclasses.replace(decoder_twin(cfg, decoder_layers=decoder_layers), out=str(out / "decoder"))]
    return [time_to_exact_match(run, target) for run in runs]
