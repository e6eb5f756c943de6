"""attribute(): shapes and padding for every method, each method against an independent
computation (Captum's layer attribution, torch.autograd.grad, explicit forwards, explicit
per-head sums), IG completeness, contrastive linearity, bad input, and no change to the model."""

from __future__ import annotations

import math

import pytest
import torch
from captum.attr import IntegratedGradients, LayerGradientXActivation
from explain_helpers import batch, tiny_model

from transformer.explain import METHODS, attribute
from transformer.network.trace import Trace
from transformer.text.ids import UNK_ID


@pytest.fixture(scope="module")
def model():
    return tiny_model()


def log_prob(model, src, tgt, row, token=None):
    """log P(tgt[:, row+1]) of one forward, per sentence: (B,)."""
    logits = model(src, tgt[:, :-1])
    token = tgt[:, row + 1] if token is None else token
    return torch.log_softmax(logits[:, row], -1).gather(-1, token[:, None])[:, 0]


@pytest.mark.parametrize("method", METHODS)
def test_shapes_and_padding(model, method):
    src, tgt = batch()
    result = attribute(model, src, tgt, method)
    assert result.method == method
    assert result.source.shape == (2, 4, 5)
    assert torch.isfinite(result.source).all()
    assert (result.source[1, :, 3:] == 0).all()  # source padding columns
    assert (result.source[1, 2:] == 0).all()  # rows whose target is padding
    assert result.source[0].abs().sum() > 0
    if result.target is not None:
        assert result.target.shape == (2, 4, 4)
        assert (result.target[0].triu(1) == 0).all()  # row t never scores later decoder positions
    assert (result.delta is not None) == (method == "integrated_gradients")


def test_input_x_gradient_by_hand_and_by_captum(model):
    src, tgt = batch()
    ours = attribute(model, src, tgt, "input_x_gradient")
    for row in range(2):
        # by hand: the gradient at the embedding, through a hook that makes it a leaf of ours
        embed = model.src_embed(src).detach().requires_grad_()
        handle = model.src_embed.register_forward_hook(lambda *_: embed)
        try:
            (grad,) = torch.autograd.grad(log_prob(model, src, tgt, row).sum(), embed)
        finally:
            handle.remove()
        by_hand = (grad * embed).sum(-1).detach()  # (B, S)
        # by Captum's layer attribution, which patches model.src_embed itself
        captum = LayerGradientXActivation(lambda s: log_prob(model, s, tgt, row), model.src_embed)
        by_captum = captum.attribute(src).sum(-1)
        for b in range(2):
            if tgt[b, row + 1] != 0:
                torch.testing.assert_close(ours.source[b, row], by_hand[b])
                torch.testing.assert_close(ours.source[b, row], by_captum[b].detach())


def test_saliency_is_the_gradient_norm(model):
    src, tgt = batch()
    ours = attribute(model, src, tgt, "saliency")
    embed = model.src_embed(src).detach().requires_grad_()
    handle = model.src_embed.register_forward_hook(lambda *_: embed)
    try:
        (grad,) = torch.autograd.grad(log_prob(model, src, tgt, 1)[0], embed)
    finally:
        handle.remove()
    torch.testing.assert_close(ours.source[0, 1], grad[0].norm(dim=-1))


@pytest.mark.parametrize("contrastive", [False, True])
@pytest.mark.parametrize("method", ["saliency", "input_x_gradient"])
def test_each_row_gets_its_own_gradient_at_the_source_and_the_target_prefix(model, method, contrastive):
    """Every real row of a padded batch, on both sides, against torch.autograd.grad of that row's score alone: the
    rows share one forward and one batched backward (row_gradients.py), which must keep them apart."""
    src, tgt = batch()
    contrast = torch.tensor([[4, 5, 9, 7], [8, 6, 0, 0]]) if contrastive else None
    ours = attribute(model, src, tgt, method, contrast_ids=contrast)
    for row in range(4):
        src_embed = model.src_embed(src).detach().requires_grad_()
        tgt_embed = model.tgt_embed(tgt[:, :-1]).detach().requires_grad_()
        leaves = {src.shape: src_embed, tgt[:, :-1].shape: tgt_embed}  # (2, 5) and (2, 4): told apart by shape
        hooks = [module.register_forward_hook(lambda _m, inputs, _out: leaves[inputs[0].shape])
                 for module in {model.src_embed, model.tgt_embed}]
        try:
            score = log_prob(model, src, tgt, row)
            if contrast is not None:
                score = score - log_prob(model, src, tgt, row, token=contrast[:, row])
            grads = torch.autograd.grad(score.sum(), (src_embed, tgt_embed))
        finally:
            for hook in hooks:
                hook.remove()
        if method == "saliency":
            by_hand = [g.norm(dim=-1) for g in grads]
        else:
            by_hand = [(g * e).sum(-1) for g, e in zip(grads, (src_embed, tgt_embed), strict=True)]
        for b in range(2):
            if tgt[b, row + 1] != 0:
                torch.testing.assert_close(ours.source[b, row], by_hand[0][b].detach())
                torch.testing.assert_close(ours.target[b, row, :row + 1], by_hand[1][b, :row + 1].detach())


def test_integrated_gradients_completeness(model):
    src, tgt = batch()
    result = attribute(model, src, tgt, "integrated_gradients", n_steps=64)
    # f(baseline): zero source embeddings, positions and target prefix kept
    zero = torch.zeros_like(model.src_embed(src))
    handle = model.src_embed.register_forward_hook(lambda *_: zero)
    try:
        with torch.no_grad():
            baseline = torch.stack([log_prob(model, src, tgt, row) for row in range(4)], 1)  # (B, T-1)
    finally:
        handle.remove()
    with torch.no_grad():
        clean = torch.stack([log_prob(model, src, tgt, row) for row in range(4)], 1)
    real = tgt[:, 1:] != 0
    difference = (clean - baseline)[real]
    torch.testing.assert_close(result.source.sum(-1)[real] - result.delta[real], difference)
    assert result.delta[real].abs().sum() <= 0.05 * difference.abs().sum()
    assert (result.delta[real].abs() <= 0.05 * difference.abs() + 1e-3).all()
    assert (result.delta[~real] == 0).all()


def test_integrated_gradients_adaptive_steps_stop_per_row_at_its_first_converged_count(model):
    """The default (n_steps=None) is, per row, the trapezoid rule over the fewest of 8, 16, ... 1024 intervals whose
    |delta| is within tolerance of that row's own |f(e) - f(e')| (the last level whatever its delta), computed by
    refining the coarser levels for the rows still off: equal to integrating anew with that many points. On this
    model rows of one sentence stop at different levels, so stopping a sentence as a whole fails here."""
    from transformer.explain.gradients import STEP_LADDER, within_tolerance

    src, tgt = batch()
    adaptive = attribute(model, src, tgt, "integrated_gradients")
    fixed = {}  # intervals -> the trapezoid rule anew, computed up to the finest level a row needs
    for n in STEP_LADDER:
        fixed[n] = attribute(model, src, tgt, "integrated_gradients", n_steps=n + 1)
        if within_tolerance(fixed[n].delta, fixed[n].source.sum(-1) - fixed[n].delta).all():
            break
    levels = set()
    for b, t in (tgt[:, 1:] != 0).nonzero().tolist():
        chosen = next((n for n in fixed if within_tolerance(fixed[n].delta[b, t], fixed[n].source[b, t].sum()
                                                                  - fixed[n].delta[b, t])), STEP_LADDER[-1])
        levels.add(chosen)
        torch.testing.assert_close(adaptive.source[b, t], fixed[chosen].source[b, t])
        torch.testing.assert_close(adaptive.delta[b, t], fixed[chosen].delta[b, t])
    assert len(levels) > 1  # the rows do not all stop together


@pytest.mark.parametrize("options", [{"n_steps": 128}, {"integration": "gausslegendre", "n_steps": 20},
                                     {"internal_batch_size": 7, "n_steps": 30}])
@pytest.mark.parametrize("contrastive", [False, True])
def test_integrated_gradients_against_captum(model, options, contrastive):
    """Ours shares one forward per sentence over the steps; Captum's IntegratedGradients runs each
    real row as its own copy of the input, the independent reference."""
    src, tgt = batch()
    contrast = torch.tensor([[4, 5, 9, 7], [8, 6, 0, 0]]) if contrastive else None
    result = attribute(model, src, tgt, "integrated_gradients", contrast_ids=contrast, **options)
    batch_index, row = (tgt[:, 1:] != 0).nonzero(as_tuple=True)  # one copy per real row
    copies = src[batch_index]

    def forward(embed):  # Captum stacks the steps: (k · N, S, D), step-major
        k = embed.size(0) // len(row)
        handle = model.src_embed.register_forward_hook(lambda *_: embed)
        try:
            logits = model(copies.repeat(k, 1), tgt[batch_index, :-1].repeat(k, 1))
        finally:
            handle.remove()
        log_probs = torch.log_softmax(logits[torch.arange(k * len(row)), row.repeat(k)], -1)
        score = log_probs.gather(-1, tgt[batch_index, row + 1].repeat(k)[:, None])[:, 0]
        if contrast is not None:
            score = score - log_probs.gather(-1, contrast[batch_index, row].repeat(k)[:, None])[:, 0]
        return score

    embed = model.src_embed(copies).detach()
    captum_options = {"n_steps": options.get("n_steps", 128), "method": options.get("integration", "riemann_trapezoid")}
    attr, delta = IntegratedGradients(forward).attribute(embed, baselines=torch.zeros_like(embed),
                                                          return_convergence_delta=True, **captum_options)
    n = captum_options["n_steps"]
    # Captum's trapezoid weights add up to (n-1)/n instead of 1 (gradients.quadrature): ours are n/(n-1) of its
    scale = n / (n - 1) if captum_options["method"] == "riemann_trapezoid" else 1.0
    expected = (scale * attr.sum(-1)).masked_fill(copies == 0, 0.0)
    torch.testing.assert_close(result.source[batch_index, row], expected.detach())
    gap = attr.sum(-1).sum(-1) - delta  # f(e) - f(e'), as Captum computed it
    torch.testing.assert_close(result.delta[batch_index, row], (expected.sum(-1) - gap).detach())


def test_occlusion_is_two_forward_passes(model):
    src, tgt = batch()
    result = attribute(model, src, tgt, "occlusion")
    occluded = src.clone()
    occluded[0, 2] = UNK_ID
    with torch.no_grad():
        drop = log_prob(model, src, tgt, 1) - log_prob(model, occluded, tgt, 1)
    torch.testing.assert_close(result.source[0, 1, 2], drop[0])


def test_norm_against_explicit_heads(model):
    src, tgt = batch()
    result = attribute(model, src, tgt, "norm")
    trace = Trace()
    with torch.no_grad():
        model(src, tgt[:, :-1], trace=trace)
    attn = model.decoder.layers[-1].cross_attn
    d, d_k = attn.d_model, attn.d_k
    alpha, memory = trace.attention("cross", 1), trace["encoder.output"]
    b, t, j = 0, 2, 1
    total = torch.zeros(d, dtype=torch.float64)
    for h in range(attn.n_heads):
        w_v = attn.in_proj.weight[2 * d + h * d_k: 2 * d + (h + 1) * d_k]  # (d_k, D)
        b_v = attn.in_proj.bias[2 * d + h * d_k: 2 * d + (h + 1) * d_k]
        w_o = attn.w_o.weight[:, h * d_k:(h + 1) * d_k]  # (D, d_k)
        total += alpha[b, h, t, j] * (w_o @ (w_v @ memory[b, j] + b_v))
    torch.testing.assert_close(result.source[b, t, j], total.norm().detach())


def test_attention_is_the_last_cross_attention_head_mean(model):
    src, tgt = batch()
    trace = Trace()
    model(src, tgt[:, :-1], trace=trace)
    result = attribute(model, src, tgt, "attention")
    torch.testing.assert_close(result.source[0], trace.attention("cross", 1)[0].mean(0))


@pytest.mark.parametrize("method", ["input_x_gradient", "integrated_gradients", "occlusion"])
def test_contrastive_is_the_difference_of_two_targets(model, method):
    src, tgt = batch()
    contrast = torch.tensor([[4, 5, 9, 7], [8, 6, 0, 0]])
    steps = {"n_steps": 32} if method == "integrated_gradients" else {}  # linear at a fixed number of points
    both = attribute(model, src, tgt, method, contrast_ids=contrast, **steps).source
    plain = attribute(model, src, tgt, method, **steps).source
    for row in range(3):
        foil = tgt.clone()
        foil[:, row + 1] = torch.where(tgt[:, row + 1] == 0, 0, contrast[:, row])  # row's prefix unchanged
        other = attribute(model, src, foil, method, **steps).source
        real = tgt[:, row + 1] != 0
        torch.testing.assert_close(both[real, row], (plain - other)[real, row])


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(method="gradcam"), "unknown attribution method"),
    (dict(tgt=torch.tensor([[2], [2]])), "empty output"),
    (dict(tgt=torch.tensor([[2, 3, 4]])), "batch"),
    (dict(src=torch.tensor([[5, 99, 3], [5, 3, 0]])), "outside the vocabulary"),
    (dict(src=torch.tensor([5, 6, 3])), "2-D"),
    (dict(method="attention", contrast_ids=torch.zeros(2, 4, dtype=torch.long)), "contrast_ids works with"),
    (dict(method="occlusion", contrast_ids=torch.zeros(2, 3, dtype=torch.long)), "shape"),
    (dict(method="saliency", n_steps=3), "unknown option"),
])
def test_bad_input(model, kwargs, message):
    src, tgt = batch()
    args = dict(src=src, tgt=tgt, method="saliency") | kwargs
    src, tgt, method = args.pop("src"), args.pop("tgt"), args.pop("method")
    with pytest.raises(ValueError, match=message):
        attribute(model, src, tgt, method, **args)


def test_a_vocabulary_without_unk_is_a_clear_message():
    """A source vocabulary of one id holds only <pad>: no <unk> to occlude with, and nothing to attribute."""
    from transformer import Transformer, TransformerConfig

    config = TransformerConfig(src_vocab_size=1, tgt_vocab_size=8, d_model=8, n_heads=2, n_layers=1, d_ff=16,
                               dropout=0.0)
    tiny = Transformer(config).eval()
    with pytest.raises(ValueError, match="a source row is all padding"):
        attribute(tiny, torch.zeros(1, 2, dtype=torch.long), torch.tensor([[2, 5, 3]]), "occlusion")


def hooks(model):
    return [(name, len(m._forward_hooks), len(m._forward_pre_hooks), len(m._backward_hooks))
            for name, m in model.named_modules() if m._forward_hooks or m._forward_pre_hooks or m._backward_hooks]


@pytest.mark.parametrize("method", METHODS)
def test_never_changes_the_model(method):
    model = tiny_model(seed=3)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    grad_mode = torch.is_grad_enabled()
    src, tgt = batch()
    attribute(model, src, tgt, method)
    with pytest.raises(ValueError):
        attribute(model, src, tgt[:, :1], method)
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert hooks(model) == []
    assert not model.training and torch.is_grad_enabled() == grad_mode
    assert all(p.grad is None for p in model.parameters())


def test_hooks_removed_after_an_exception_inside_the_forward():
    model = tiny_model(seed=4)
    src, tgt = batch()
    too_long = torch.full((1, 40), 5)  # longer than max_len: the model raises inside the hooked forward
    with pytest.raises(ValueError):
        attribute(model, too_long, tgt[:1], "saliency")
    assert hooks(model) == []


def test_training_mode_is_refused():
    model = tiny_model(seed=5).train()
    src, tgt = batch()
    with pytest.raises(ValueError, match="training mode"):
        attribute(model, src, tgt, "attention")
    assert model.training


@pytest.mark.parametrize("integration", ["riemann_trapezoid", "riemann_left", "riemann_right", "riemann_middle",
                                         "gausslegendre"])
def test_quadrature_weights_add_up_to_one_and_integrate_what_they_should(integration):
    from transformer.explain.gradients import quadrature

    for n in (2, 5, 32):
        weights, points = quadrature(integration, n)
        assert len(weights) == len(points) == n and all(0 <= a <= 1 for a in points)
        assert math.isclose(sum(weights), 1.0, rel_tol=1e-12)
        exact_degree = {"gausslegendre": 2 * n - 1, "riemann_trapezoid": 1, "riemann_middle": 1}.get(integration, 0)
        for degree in range(exact_degree + 1):  # ∫₀¹ α^k dα = 1 / (k + 1)
            assert math.isclose(sum(w * a**degree for w, a in zip(weights, points, strict=True)), 1 / (degree + 1),
                                rel_tol=1e-9)
    with pytest.raises(ValueError, match="integration"):
        quadrature("simpson", 8)


@pytest.mark.parametrize("method", METHODS)
def test_the_registry_says_what_each_method_does(model, method):
    from transformer.explain import REGISTRY

    entry = REGISTRY[method]
    src, tgt = batch()
    options = {"n_steps": 8} if method == "integrated_gradients" else {}
    result = attribute(model, src, tgt, method, **options)
    assert (result.target is not None) == entry.target
    contrast = torch.tensor([[4, 5, 9, 7], [8, 6, 0, 0]])
    if entry.contrast:
        attribute(model, src, tgt, method, contrast_ids=contrast, **options)
    else:
        with pytest.raises(ValueError, match="contrast_ids works with"):
            attribute(model, src, tgt, method, contrast_ids=contrast)
    assert entry.label and entry.summary and entry.description and entry.good_for
    assert entry.paper or method == "attention"  # plain attention implements no paper


def test_integrated_gradients_from_the_unk_baseline_is_complete_against_an_unk_source(model):
    """Baseline "unk": e' is <unk>'s embedding at every real position, so f(e') is the model's score on a source of
    <unk> tokens (same masks): Σ attribution - delta must equal f(e) - f(that source), computed by plain forwards."""
    src, tgt = batch()
    result = attribute(model, src, tgt, "integrated_gradients", baseline="unk", n_steps=32)
    unk_src = torch.where(src == 0, src, torch.full_like(src, model.config.unk_id))

    def scores(source):
        log_probs = torch.log_softmax(model(source, tgt[:, :-1]), -1)
        return log_probs.gather(-1, tgt[:, 1:, None])[..., 0]

    with torch.no_grad():
        gap = scores(src) - scores(unk_src)
    real = tgt[:, 1:] != 0
    torch.testing.assert_close((result.source.sum(-1) - result.delta)[real], gap[real])
    with pytest.raises(ValueError, match="baseline"):
        attribute(model, src, tgt, "integrated_gradients", baseline="mask")


@pytest.mark.parametrize("method", ["saliency", "relevancy"])
def test_rows_in_several_backward_passes_give_the_same_answer(model, method, monkeypatch):
    """Where a sentence's rows do not fit one batched backward (``row_gradients.MEMORY_BUDGET``), they are taken a
    few at a time with the graph kept: one row per pass must give what all rows in one pass give."""
    from transformer.explain import row_gradients

    src, tgt = batch()
    whole = attribute(model, src, tgt, method)
    monkeypatch.setattr(row_gradients, "MEMORY_BUDGET", 1)
    assert row_gradients.rows_per_backward(model.config, 5, 4) == 1
    one_by_one = attribute(model, src, tgt, method)
    torch.testing.assert_close(one_by_one.source, whole.source)
    torch.testing.assert_close(one_by_one.target, whole.target)
