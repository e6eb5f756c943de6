"""Explanations of decoder-only models (GPT-2, Llama, Qwen3, Gemma-2 built from ``transformers``, float64): every
registry method runs with the prompt as the source and the continuation as the target, and each is held against
the model run by hand on the whole sequence (``model.lm``): the gradient methods against autograd and Captum,
occlusion against recomputed log-probabilities, integrated gradients' completeness against f(x) - f(x'), the
logit lens against the model's own log-probabilities, a left-padded row against the row alone."""

from __future__ import annotations

import pytest
import torch
from captum.attr import IntegratedGradients, LayerGradientXActivation
from decoder_models import build_pair
from lm_explain_helpers import NAMES, N, P, inputs, log_probs_by_hand, sequence, tolerance

from transformer.explain import METHODS, attribute, logit_lens
from transformer.explain.gradients import default_baseline, within_tolerance

pytest.importorskip("transformers")


@pytest.fixture(scope="module", params=NAMES)
def model(request):
    return build_pair(request.param).ours


@pytest.mark.parametrize("method", METHODS)
def test_every_method_runs_with_the_prompt_as_source(model, method):
    src, tgt = inputs()
    result = attribute(model, src, tgt, method)
    assert result.source.shape == (2, N, P)
    assert torch.isfinite(result.source).all()
    assert (result.source[1, :, :2] == 0).all() and (result.source[1, -1] == 0).all()  # left padding, a pad row
    assert result.source[0].abs().sum() > 0
    if result.target is not None:
        assert result.target.shape == (2, N, N)
        assert (result.target[..., 0] == 0).all()  # the placeholder is never fed
        assert (result.target[0].triu(1) == 0).all()  # row t reads the continuation up to c_t
        assert result.target[0, 1:, 1:].abs().sum() > 0
    if method in ("rollout", "alti", "value_zeroing"):  # shares of the whole prediction
        total = result.source.sum(-1) + result.target.sum(-1)
        torch.testing.assert_close(total[0], torch.ones(N, dtype=total.dtype), atol=1e-9, rtol=0)


@pytest.mark.parametrize("method", ["saliency", "input_x_gradient"])
def test_gradients_are_autograd_on_the_whole_sequence(model, method):
    """The gradient of log P(c_{t+1}) at every token embedding of prompt + continuation, by autograd through
    ``model.lm`` (the embedding made a leaf by a hook): the prompt's positions are the source, c_j's position
    P - 1 + j is target column j; for input × gradient, Captum's layer attribution as well."""
    src, tgt = inputs()
    result = attribute(model, src, tgt, method)
    ids, _ = sequence(src, tgt, 0)
    embed = model.tgt_embed(ids).detach().requires_grad_()
    handle = model.tgt_embed.register_forward_hook(lambda *_: embed)
    try:
        for t in range(N):
            (grad,) = torch.autograd.grad(log_probs_by_hand(model, src, tgt, 0)[t], embed)
            per_token = grad[0].norm(dim=-1) if method == "saliency" else (grad[0] * embed[0]).sum(-1)  # (L,)
            expected = torch.cat([per_token[:P], per_token.new_zeros(1), per_token[P:]])  # source | placeholder | c
            got = torch.cat([result.source[0, t], result.target[0, t]])
            scale = float(expected.detach().abs().max())
            torch.testing.assert_close(got, expected.detach(), atol=tolerance(model) * scale, rtol=0)
    finally:
        handle.remove()
    if method == "input_x_gradient":
        for t in range(N):
            captum = LayerGradientXActivation(lambda i, t=t: log_probs_by_hand(model, src, tgt, 0, i)[t:t + 1],
                                              model.tgt_embed)
            by_captum = captum.attribute(ids).sum(-1)[0].detach()  # (L,)
            torch.testing.assert_close(result.source[0, t], by_captum[:P],
                                       atol=tolerance(model) * float(by_captum.abs().max()), rtol=0)


def test_occlusion_is_the_drop_of_recomputed_log_probabilities(model):
    src, tgt = inputs()
    result = attribute(model, src, tgt, "occlusion")
    for b in range(2):
        with torch.no_grad():
            clean = log_probs_by_hand(model, src, tgt, b)
            for j in range(P):
                if src[b, j] == 0:
                    continue
                ids, _ = sequence(src, tgt, b)
                ids = ids.clone()
                ids[0, j] = model.config.unk_id
                drop = clean - log_probs_by_hand(model, src, tgt, b, ids)  # (N,)
                rows = tgt[b, 1:] != 0
                torch.testing.assert_close(result.source[b, rows, j], drop[rows], atol=tolerance(model), rtol=0)


def test_integrated_gradients_is_complete_from_the_models_own_baseline(model):
    """Σ_j attribution_j - delta = f(x) - f(x') with f by ``model.lm`` and x' the baseline at the prompt's real
    positions (the continuation kept): "zero" where positions are added (GPT-2), "pad" on the rotary pre-norm
    families, whose first norm is singular at zero embeddings; every row within the adaptive rule's tolerance."""
    src, tgt = inputs()
    config = model.config
    assert default_baseline(config) == ("zero" if config.positional == "learned" else "pad")
    result = attribute(model, src, tgt, "integrated_gradients")
    for b in range(2):
        ids, _ = sequence(src, tgt, b)
        real = (ids != 0)[0, :, None]
        embed = model.tgt_embed(ids).detach()
        start = (torch.zeros_like(embed) if default_baseline(config) == "zero"
                 else model.tgt_embed(torch.full_like(ids, config.pad_id)).detach())
        origin = torch.cat([torch.where(real[:P], start[:, :P], embed[:, :P]), embed[:, P:]], dim=1)
        with torch.no_grad():
            clean = log_probs_by_hand(model, src, tgt, b)
            handle = model.tgt_embed.register_forward_hook(lambda *_: origin)
            try:
                base = log_probs_by_hand(model, src, tgt, b)
            finally:
                handle.remove()
        rows = tgt[b, 1:] != 0
        found = result.source[b].sum(-1) - result.delta[b]
        torch.testing.assert_close(found[rows], (clean - base)[rows], atol=tolerance(model), rtol=0)
        assert within_tolerance(result.delta[b][rows], (clean - base)[rows]).all()


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_integrated_gradients_against_captum(name):
    """Captum's IntegratedGradients over ``model.lm`` with the prompt's embeddings on the path (its trapezoid
    weights are (n-1)/n of ours: gradients.quadrature), from this model's default baseline."""
    model = build_pair(name).ours
    src, tgt = inputs()
    n = 16
    result = attribute(model, src, tgt, "integrated_gradients", n_steps=n)
    ids, _ = sequence(src, tgt, 0)
    with torch.no_grad():
        embed = model.tgt_embed(ids)
        rest = embed[:, P:]
        start = (torch.zeros_like(embed) if default_baseline(model.config) == "zero"
                 else model.tgt_embed(torch.full_like(ids, model.config.pad_id)))[:, :P]
    for t in range(N):
        def forward(prompt, t=t):  # (k, P, D): Captum's points
            whole = torch.cat([prompt, rest.expand(prompt.size(0), -1, -1)], dim=1)
            handle = model.tgt_embed.register_forward_hook(lambda *_: whole)
            try:
                logits = model.lm(ids.expand(prompt.size(0), -1))[:, P - 1 + t]
            finally:
                handle.remove()
            return torch.log_softmax(logits, -1)[:, tgt[0, t + 1]]

        attr = IntegratedGradients(forward).attribute(embed[:, :P], baselines=start, n_steps=n,
                                                      method="riemann_trapezoid")
        expected = (n / (n - 1) * attr.sum(-1))[0].detach()
        # Captum places its points by torch.linspace in float32: each α is 2^-24 ≈ 6e-8 off, so its integral is
        # ~1e-7 of the largest attribution off ours: 1e-6 of it
        atol = max(tolerance(model), 1e-6) * float(expected.abs().max())
        torch.testing.assert_close(result.source[0, t], expected, atol=atol, rtol=0)


def test_the_logit_lens_last_layer_is_the_models_log_probabilities(model):
    """Gemma-2's soft-capped logits included: the lens caps every layer as the generator does."""
    src, tgt = inputs()
    lens = logit_lens(model, src, tgt)
    assert lens.shape == (model.config.n_decoder_layers, 2, N, model.config.tgt_vocab_size)
    for b in range(2):
        ids, mask = sequence(src, tgt, b)
        with torch.no_grad():
            expected = torch.log_softmax(model.lm(ids, attention_mask=mask)[0, P - 1:], -1)  # (N, V)
        rows = tgt[b, 1:] != 0
        torch.testing.assert_close(lens[-1, b, rows], expected[rows], atol=tolerance(model), rtol=0)


@pytest.mark.parametrize("method", ["attention", "rollout", "alti", "value_zeroing", "occlusion", "saliency"])
def test_a_left_padded_row_is_explained_as_the_row_alone(model, method):
    src, tgt = inputs()
    together = attribute(model, src, tgt, method)
    alone = attribute(model, src[1:, 2:], tgt[1:, :-1], method)  # its padding cut off
    torch.testing.assert_close(together.source[1, :-1, 2:], alone.source[0], atol=tolerance(model), rtol=0)


def test_a_prompt_padded_on_the_right_is_refused(model):
    src, tgt = inputs()
    src = src.flip(1)  # row 1's padding now after its tokens
    with pytest.raises(ValueError, match="padded on the left"):
        attribute(model, src, tgt, "attention")

