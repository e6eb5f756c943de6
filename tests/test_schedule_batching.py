"""The time-bounded cooldown of the learning rate and the cap on examples per batch."""

from __future__ import annotations

import dataclasses
import random

import pytest

from transformer.train import TrainConfig
from transformer.train.batching import token_batches
from transformer.train.config import check_config
from transformer.train.schedule import in_time_cooldown, learning_rate


def test_a_time_bounded_run_cools_down_linearly_over_its_last_share() -> None:
    cfg = TrainConfig(d_model=128, warmup=100, lr=2e-3, max_seconds=100.0, cooldown_share=0.2)
    plain = dataclasses.replace(cfg, cooldown_share=0.0)
    # before 80 s, or without the step where the cooldown began: the plain schedule
    assert learning_rate(cfg, 300, 79.9, None) == learning_rate(plain, 300)
    assert not in_time_cooldown(cfg, 79.9) and in_time_cooldown(cfg, 80.0)
    start = learning_rate(plain, 250)  # the step at which the cooldown began sets its starting rate
    assert learning_rate(cfg, 251, 80.0, 250) == pytest.approx(start)
    assert learning_rate(cfg, 300, 90.0, 250) == pytest.approx(start / 2)
    assert learning_rate(cfg, 340, 99.0, 250) == pytest.approx(start * 0.05)
    assert learning_rate(cfg, 350, 120.0, 250) == pytest.approx(start * 0.01)  # past the end: a floor, not 0
    assert not in_time_cooldown(plain, 99.0)
    # a step cooldown takes precedence; a run without max_seconds has none
    steps = dataclasses.replace(cfg, max_steps=1000, cooldown=100)
    assert not in_time_cooldown(steps, 99.0)
    assert not in_time_cooldown(dataclasses.replace(cfg, max_seconds=None), 1e6)
    with pytest.raises(ValueError, match="cooldown_share"):
        check_config(dataclasses.replace(cfg, cooldown_share=1.0))


def test_max_sentences_caps_every_batch_and_keeps_each_example_once() -> None:
    rng = random.Random(2)
    sizes = [rng.choice([2, 3, 20, 30]) for _ in range(2000)]
    uncapped = token_batches(sizes, 3000, seed=1)
    capped = token_batches(sizes, 3000, seed=1, max_sentences=64)
    assert max(map(len, uncapped)) > 64
    assert max(map(len, capped)) <= 64
    assert sorted(i for b in capped for i in b) == list(range(2000))
    for batch in capped:
        assert len(batch) * max(sizes[i] for i in batch) <= 3000
    # the short examples get many more steps of their own: the point of the cap
    short = lambda batches: sum(any(sizes[i] <= 3 for i in b) for b in batches)  # noqa: E731
    assert short(capped) >= 4 * short(uncapped)
    with pytest.raises(ValueError):
        token_batches(sizes, 3000, max_sentences=0)
    with pytest.raises(ValueError, match="batch_sentences"):
        check_config(TrainConfig(batch_sentences=0))
