"""The learning rate at each step: the paper's warmup-then-decay schedule, a constant rate, a cooldown.

Section 5.3 of the paper: "We varied the learning rate over the course of training, according to

    lrate = d_model^-0.5 * min(step_num^-0.5, step_num * warmup_steps^-1.5)

This corresponds to increasing the learning rate linearly for the first warmup_steps training steps,
and decreasing it thereafter proportionally to the inverse square root of the step number."
"""

from __future__ import annotations

import math

from .config import TrainConfig


def noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """The paper's learning rate at optimisation step ``step`` (1 = the first update).

    ``factor`` scales the whole curve (the paper uses 1; small models like a larger one).
    The peak is at ``step == warmup``: factor * (d_model * warmup)^-0.5.
    """
    if d_model <= 0 or warmup <= 0:
        raise ValueError(f"d_model and warmup must be positive, got {d_model} and {warmup}")
    step = max(step, 1)  # step 0 would divide by zero; the first update is step 1
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def factor_for_peak(peak_lr: float, d_model: int, warmup: int) -> float:
    """The ``factor`` whose schedule peaks at ``peak_lr``: lets a user say "--lr 1e-3" instead."""
    return peak_lr * math.sqrt(d_model * warmup)


def learning_rate(cfg: TrainConfig, step: int, elapsed: float | None = None,
                  cooldown_start: int | None = None) -> float:
    """The rate for optimizer step ``step`` (1-based) under the config's schedule.

    With ``cooldown`` N (and ``max_steps``), the last N steps scale the rate that step
    ``max_steps - N`` had down linearly, to 1/(N+1) of it at the last step.

    A run bounded by time cools down by time instead: with ``cooldown_share`` s, ``max_seconds`` T
    and no step cooldown, once ``elapsed`` (seconds of this run) passes (1 - s) T the rate is the
    one of ``cooldown_start`` (the first step past that point, which the caller remembers)
    scaled by the share of the cooldown time still left, reaching 0 at T. A short run ends at a
    low rate instead of mid-decay, which steadies what it learned (Hägele et al. 2024, "Scaling
    Laws and Compute-Optimal Training Beyond Fixed Training Durations", on linear cooldowns).
    """
    if cfg.cooldown and cfg.max_steps is not None and step > cfg.max_steps - cfg.cooldown:
        start = cfg.max_steps - cfg.cooldown
        return _scheduled_rate(cfg, max(start, 1)) * (cfg.max_steps + 1 - step) / (cfg.cooldown + 1)
    if cooldown_start is not None and elapsed is not None and in_time_cooldown(cfg, elapsed):
        left = max(cfg.max_seconds - elapsed, 0.0) / (cfg.cooldown_share * cfg.max_seconds)
        return _scheduled_rate(cfg, cooldown_start) * max(left, 0.01)
    return _scheduled_rate(cfg, step)


def in_time_cooldown(cfg: TrainConfig, elapsed: float) -> bool:
    """Whether a time-bounded run is in its cooldown (see ``learning_rate``)."""
    return bool(cfg.cooldown_share and cfg.max_seconds and not cfg.cooldown
                and elapsed >= (1 - cfg.cooldown_share) * cfg.max_seconds)


def _scheduled_rate(cfg: TrainConfig, step: int) -> float:
    factor = cfg.lr_factor if cfg.lr is None else factor_for_peak(cfg.lr, cfg.d_model, cfg.warmup)
    if cfg.schedule == "constant":
        return cfg.lr if cfg.lr is not None else noam_lr(cfg.warmup, cfg.d_model, cfg.warmup, factor)
    return noam_lr(step, cfg.d_model, cfg.warmup, factor)

