"""Integrated gradients' baseline on every family: the default is one at which the model is smooth (decided by the
model's structure, ``TransformerConfig.singular_at_zero_embeddings``), completeness holds from it, and a baseline
on a singularity is refused."""

from __future__ import annotations

import pytest
import torch
from family_models import NAMES, build_pair

from transformer.explain import attribute
from transformer.explain.gradients import (
    BASELINES,
    DELTA_FLOOR,
    DELTA_TOLERANCE,
    STEP_LADDER,
    baseline_note,
    default_baseline,
    within_tolerance,
)


def pair_ids(config) -> tuple[torch.Tensor, torch.Tensor]:  # noqa: ANN001
    """The issue's pair: eight ordinary pieces and ``</s>``; the decoder's start, six pieces and ``</s>``."""
    src = torch.tensor([[17, 27, 4, 36, 11, 5, 15, 9, config.eos_id]])
    tgt = torch.tensor([[config.bos_id, 21, 26, 18, 24, 19, 19, config.eos_id]])
    return src, tgt


@pytest.mark.parametrize("name", NAMES)
def test_integrated_gradients_is_complete_from_every_familys_default_baseline(name: str):
    """Completeness, Σ_j attribution = f(e) - f(e') up to delta, row by row, with the default baseline and the
    default adaptive rule. The tolerance is the rule's own (``within_tolerance``: 5% of the row's gap + 0.001): it
    refines each row's trapezoid rule over 8, 16, ... 1024 intervals until its |delta| is within that, and on a path
    where the model is smooth the trapezoid rule's error falls as h² = 1/n², so 1024 intervals leave a margin of
    about 1/1024² times the integrand's curvature. float64 models: rounding (~1e-16 relative, 1e-7 in T5's
    float32 norm statistic) is far below the floor. T5's old default (zero) left 0 of 7 rows within it, each
    summing to 10³-10⁵ nats: the path ran through the first norm's singular point."""
    model = build_pair(name).ours
    src, tgt = pair_ids(model.config)
    result = attribute(model, src, tgt, "integrated_gradients")
    gap = result.source.sum(-1) - result.delta  # (1, T-1): f(e) - f(e'), by the definition of delta
    off = ~within_tolerance(result.delta, gap)
    assert not off.any(), (f"{name}, baseline {default_baseline(model.config)!r}: rows {off.nonzero()[:, 1].tolist()} "
                           f"miss their gap by more than {DELTA_TOLERANCE:.0%} + {DELTA_FLOOR} at "
                           f"{STEP_LADDER[-1]} intervals: delta {result.delta.tolist()}, gap {gap.tolist()}")


@pytest.mark.parametrize("name", NAMES)
def test_the_default_baseline_follows_the_models_structure(name: str):
    """T5 (v1.0, v1.1) adds no positions to its embeddings and RMS-normalises them first: singular at zero, so its
    default is <pad>, and the zero baseline is refused, naming the ones that are smooth. The other families add
    positions, so zero stays their default. The page's sentence names the baseline and why."""
    model = build_pair(name).ours
    config = model.config
    src, tgt = pair_ids(config)
    singular = name.startswith("t5")
    assert config.singular_at_zero_embeddings is singular
    assert default_baseline(config) == ("pad" if singular else "zero")
    note = baseline_note(config)
    assert ("<pad> embedding" if singular else "zero embedding") in note and "default" in note
    assert ("singular" in note) is singular
    assert "as chosen" in baseline_note(config, "unk")
    if singular:
        with pytest.raises(ValueError, match="'zero' baseline sits on this model's singularity.*choose 'pad' or 'unk'"):
            attribute(model, src, tgt, "integrated_gradients", baseline="zero")
    else:
        for baseline in BASELINES:
            assert torch.isfinite(attribute(model, src, tgt, "integrated_gradients", baseline=baseline,
                                            n_steps=9).source).all()


def test_a_pad_baseline_with_a_zero_embedding_is_refused_on_t5():
    """The check reads the embeddings, not the name: a T5 whose <pad> row is zero (as BART's padding row is
    initialised) puts the <pad> baseline on the same singular point as zero, so it is refused too and <unk> is
    named; the model itself is not changed by the refusal."""
    model = build_pair("t5").ours
    with torch.no_grad():
        model.src_embed.weight[model.config.pad_id] = 0.0
    src, tgt = pair_ids(model.config)
    with pytest.raises(ValueError, match="'pad' baseline sits on this model's singularity.*choose 'unk'"):
        attribute(model, src, tgt, "integrated_gradients")
    result = attribute(model, src, tgt, "integrated_gradients", baseline="unk")
    assert within_tolerance(result.delta, result.source.sum(-1) - result.delta).all()
