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
from dataclasses import dataclass
from pathlib import Path

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


def time_to_exact_match(cfg: TrainConfig, target: float = 0.97) -> TimeToTarget:
    """Train ``cfg`` (which must set ``eval_every_steps``) until an evaluation's exact match on the validation pairs
    reaches ``target``, or its budget ends; the checkpoint is in ``cfg.output_folder()``."""
    if not 0 < target <= 1:
        raise ValueError(f"target must be an exact match in (0, 1], got {target}")
    if not cfg.eval_every_steps:
        raise ValueError("time_to_exact_match needs eval_every_steps: the steps to the target are counted at "
                         "evaluations")
    run_cfg = dataclasses.replace(cfg, log_every=cfg.eval_every_steps)  # a train report right before each eval
    stop = threading.Event()
    state: dict[str, float | int | None] = {"before_eval": 0.0, "eval_seconds": 0.0, "exact_match": None}
    found: dict[str, float | int] = {}

    def watch(progress: Progress) -> None:
        if progress.phase == "train":
            state["before_eval"] = progress.elapsed
        elif progress.phase == "eval" and progress.metrics and not found:
            state["eval_seconds"] += progress.elapsed - state["before_eval"]
            state["exact_match"] = progress.metrics["exact_match"]
            if progress.metrics["exact_match"] >= target:
                found.update(steps=progress.step, wall=progress.elapsed,
                             seconds=progress.elapsed - state["eval_seconds"])
                stop.set()

    result = train(run_cfg, callback=watch, stop_event=stop)
    return TimeToTarget(
        architecture=cfg.architecture, n_layers=cfg.n_layers, parameters=result.parameters, target=target,
        reached=bool(found), steps=found.get("steps"), seconds=found.get("seconds"), wall_seconds=found.get("wall"),
        exact_match=state["exact_match"], out=result.out)


def compare_architectures(cfg: TrainConfig, target: float = 0.97, *,
                          decoder_layers: int | None = None) -> list[TimeToTarget]:
    """The encoder-decoder and the decoder-only model (``decoder_layers`` layers, default ``2 * cfg.n_layers``) on
    the same config, one after the other, into ``<out>/encoder-decoder`` and ``<out>/decoder``."""
    out = cfg.output_folder()
    runs = [dataclasses.replace(cfg, architecture="encoder-decoder", out=str(out / "encoder-decoder")),
            dataclasses.replace(cfg, architecture="decoder", out=str(out / "decoder"),
                                n_layers=decoder_layers or 2 * cfg.n_layers)]
    return [time_to_exact_match(run, target) for run in runs]
