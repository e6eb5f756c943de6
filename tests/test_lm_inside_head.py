"""Inside one head of a decoder-only model (transformer/explain/inside_head.py): the step-by-step numbers equal the
model's own traced scores and weights on every family's switches: rotary positions (the turned q and k), grouped
key/value heads, a sliding window (Mistral's on every layer, Gemma-2's on every other), query_pre_attn_scalar and
soft-capped scores (Gemma-2), q/k norms (Qwen3) and GPT-2's learned positions."""

from __future__ import annotations

import pytest
import torch
from decoder_models import build_pair

from transformer import Trace
from transformer.explain.inside_head import inside_head

LENGTH = 12  # longer than the test models' sliding window (5): a sliding layer's mask differs from the causal one


@pytest.fixture(scope="module", params=["gpt2", "mistral", "qwen3", "gemma2"])
def traced(request: pytest.FixtureRequest):
    model = build_pair(request.param).ours
    ids = torch.randint(0, model.config.tgt_vocab_size, (1, LENGTH), generator=torch.Generator().manual_seed(3))
    trace = Trace()
    with torch.no_grad():
        model.lm(ids, trace=trace)
    return model, trace


def test_every_step_equals_the_traced_scores_and_weights(traced) -> None:
    model, trace = traced
    c = model.config
    for layer in range(c.n_decoder_layers):
        weights, scores = trace.attention("decoder", layer)[0], trace.scores("decoder", layer)[0]  # (H, T, T)
        for head in range(c.n_heads):
            for query in (0, LENGTH // 2, LENGTH - 1):
                steps = inside_head(model, trace, "decoder", layer, head, query)
                # float64 model and float64 steps: the same products summed in another order, ~1e-16 relative; but
                # the softmax in float32 where the family takes it so (softmax_float32): scores that differ in their
                # last float64 bits may round to neighbouring float32 weights, one ulp (<= 2^-23 for weights <= 1)
                atol = 2**-23 if c.softmax_float32 else 1e-12
                torch.testing.assert_close(steps.weights, weights[head, query], atol=atol, rtol=0)
                torch.testing.assert_close(steps.masked, scores[head, query], atol=1e-12, rtol=0)
                assert torch.equal(steps.allowed, torch.isfinite(scores[head, query]))


def test_the_new_switches_are_recorded_in_the_steps(traced) -> None:
    model, trace = traced
    c = model.config
    steps = inside_head(model, trace, "decoder", 0, c.n_heads - 1, LENGTH - 1)
    grouped = c.kv_heads != c.n_heads
    assert steps.kv_head == ((c.n_heads - 1) // (c.n_heads // c.kv_heads) if grouped else None)
    rotary = "decoder.0.self_attn.queries" in trace
    assert (steps.q_unrotated is not None) == rotary and (steps.k_unrotated is not None) == rotary
    if rotary:  # the turn keeps each pair's length: |R q| = |q|, to the rounding of cos and sin, which are computed
        # in float32 as transformers does (each off by <= 2^-24 relative; a few such errors add up in the norm)
        torch.testing.assert_close(steps.q.norm(), steps.q_unrotated.norm(), atol=0, rtol=4 * 2**-24)
        assert not torch.allclose(steps.q, steps.q_unrotated)
    assert steps.softcap == c.attn_softcap
    if c.query_pre_attn_scalar is not None:
        assert steps.scale == pytest.approx(c.query_pre_attn_scalar ** -0.5, rel=1e-15)
    if c.sliding_window is not None and c.layer_type(0) == "sliding":  # the last query sees its window only
        assert int(steps.allowed.sum()) == c.sliding_window
