"""Gradient attribution to the source token embeddings, computed by Captum.

- "saliency": ‖∂f_t/∂e_j‖₂, the norm over d_model of the gradient at token j's embedding
  (Simonyan et al. 2014, "Deep Inside Convolutional Networks"); never negative.
- "input_x_gradient": Σ_d e_{j,d} · ∂f_t/∂e_{j,d} (Shrikumar et al. 2016, "Not Just a Black
  Box"), summed over d_model so that the per-token figures add up like the per-dimension ones.
- "integrated_gradients": Sundararajan et al. 2017, "Axiomatic Attribution for Deep
  Networks": Σ_d (e - e')_{j,d} ∫₀¹ ∂f_t/∂e_{j,d}(e' + α(e - e')) dα, summed over d_model so
  completeness holds: Σ_j attribution = f(e) - f(e') up to ``delta``, Captum's convergence
  delta. Baseline e' = 0 (a zero token embedding; the positional encoding stays, and the
  target prefix is fixed). The integral uses Captum's trapezoid rule with ``n_steps``
  points (default 128; option ``integration="gausslegendre"``). At 128, summed over a
  sentence's rows, |delta| is 1-3% of |f(e) - f(e')| on the three shipped models (64 steps
  gave 8% on a 20-character ``reverse`` input); single rows of long ``reverse`` inputs can
  still reach ~12%, which is why ``delta`` is returned per row. The trapezoid rule is the
  default because the path can be sharp in the middle: on the shipped ``reverse`` model
  f jumps between α ≈ 0.5 and 0.8, where Gauss-Legendre places few points (at 64 steps
  its worst row's |delta| was 49% of |f(e) - f(e')| against the trapezoid's 18%).
  bench/bench_explain.py prints |delta| / |f(e) - f(e')| per model.

e_j is the output of ``model.src_embed`` (before the sqrt(d_model) scale and the
positional encoding). Captum's Layer* classes take baselines as token ids, and no token
has a zero embedding (a PAD baseline would also change the masks), so the forward here
takes the embedding itself: a forward hook on ``model.src_embed`` (and ``tgt_embed`` for
the target side) returns the given tensor, and is removed when the call returns.
Saliency and input × gradient also score the target prefix (``target``, B × T-1 × T-1);
integrated gradients keeps it fixed. For saliency and input × gradient every real row runs
as its own copy, so one backward serves all rows. Integrated gradients computes the integral
itself with Captum's step sizes and alphas (``approximation_parameters``): the interpolated
source embeddings are the same for every row of a sentence (the target prefix is fixed), so
one forward over the ``n_steps`` points serves all its rows, and one batched backward
(``is_grads_batched``) gives each row's gradient; 2-4x faster than Captum's
``IntegratedGradients`` over per-row copies, equal to it to float tolerance
(tests/test_explain_attribution.py compares the two).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from captum.attr import InputXGradient, Saliency
from captum.attr._utils.approximation_methods import approximation_parameters
from torch import Tensor, nn

from ..network.model import Transformer
from .inputs import Rows, row_scores, scatter_rows
from .views import private_view

N_STEPS = 128
# Interpolation points per forward: chunks of 32 were faster than all 128 at once on the shipped models
# (reverse, 20 tokens, 1 thread: 0.96 s vs 1.40 s; bench/bench_explain.py), as the activations stay in cache.
POINTS_PER_FORWARD = 32


def _replacing(module: nn.Module, value: Tensor):
    """A forward hook that makes ``module`` return ``value``; the caller removes it."""
    return module.register_forward_hook(lambda _module, _args, _output: value)


def embedding_forward(model: Transformer, with_target: bool) -> Callable[..., Tensor]:
    """forward(src_embed, [tgt_embed,] src_ids, tgt_in, row, target, contrast) -> f (N,)."""

    def forward(*args: Tensor) -> Tensor:
        if with_target:
            src_embed, tgt_embed, src_ids, tgt_in, row, target, contrast = args
        else:
            (src_embed, src_ids, tgt_in, row, target, contrast), tgt_embed = args, None
        handles = [_replacing(model.src_embed, src_embed)]
        if tgt_embed is not None:
            handles.append(_replacing(model.tgt_embed, tgt_embed))
        try:
            logits = model(src_ids, tgt_in)
        finally:
            for handle in handles:
                handle.remove()
        return row_scores(logits, row, target, None if contrast.numel() == 0 else contrast)

    return forward


def gradient_attribution(
    model: Transformer, src_ids: Tensor, tgt_ids: Tensor, rows: Rows, method: str,
    n_steps: int = N_STEPS, internal_batch_size: int | None = POINTS_PER_FORWARD,
    integration: str = "riemann_trapezoid",
) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """-> source (B, T-1, S), target (B, T-1, T-1) or None, delta (B, T-1) or None."""
    model = private_view(model)  # the embedding hooks must not reach other callers of the shared model (views.py)
    batch, length = src_ids.size(0), tgt_ids.size(1) - 1
    if method == "integrated_gradients":
        attr, delta = _integrated_gradients(model, src_ids, tgt_ids, rows, n_steps, internal_batch_size, integration)
        return scatter_rows(attr, rows, batch, length), None, scatter_rows(delta, rows, batch, length)
    src, tgt_in = src_ids[rows.batch], tgt_ids[rows.batch, :-1]  # (N, S), (N, T-1): one copy per real row
    contrast = rows.contrast if rows.contrast is not None else rows.target.new_empty(0)
    with torch.no_grad():
        src_embed, tgt_embed = model.src_embed(src), model.tgt_embed(tgt_in)  # (N, S, D), (N, T-1, D)
    src_embed.requires_grad_(), tgt_embed.requires_grad_()  # fresh leaves of ours, not the model's weights
    args = (src, tgt_in, rows.row, rows.target, contrast)
    with torch.enable_grad():
        forward = embedding_forward(model, with_target=True)
        if method == "saliency":
            grads = Saliency(forward).attribute((src_embed, tgt_embed), additional_forward_args=args, abs=False)
            src_attr, tgt_attr = (g.norm(dim=-1) for g in grads)  # (N, S), (N, T-1)
        else:
            products = InputXGradient(forward).attribute((src_embed, tgt_embed), additional_forward_args=args)
            src_attr, tgt_attr = (p.sum(dim=-1) for p in products)
    return scatter_rows(src_attr, rows, batch, length), scatter_rows(tgt_attr, rows, batch, length), None


def _integrated_gradients(
    model: Transformer, src_ids: Tensor, tgt_ids: Tensor, rows: Rows, n_steps: int,
    internal_batch_size: int | None, integration: str,
) -> tuple[Tensor, Tensor]:
    """-> attribution (N, S) and delta (N,) for the N real rows, one sentence at a time.

    The interpolated embeddings are the same for every row of a sentence, so one forward over
    the ``n_steps`` points serves all its rows; the rows' gradients come from one batched
    backward (``is_grads_batched``: a one-hot ``grad_outputs`` per row). ``internal_batch_size``
    caps the points per forward. Step sizes and alphas are Captum's (``approximation_parameters``).
    """
    step_sizes, alphas = approximation_parameters(integration)
    weights, points = step_sizes(n_steps), alphas(n_steps)
    chunk = internal_batch_size or n_steps
    weight = model.src_embed.weight
    attr = torch.zeros(rows.row.numel(), src_ids.size(1), dtype=weight.dtype, device=weight.device)  # (N, S)
    delta = attr.new_zeros(rows.row.numel())  # (N,)
    contrast = rows.contrast
    for b in rows.batch.unique().tolist():
        index = (rows.batch == b).nonzero(as_tuple=True)[0]  # this sentence's real rows, (R,)
        row, target = rows.row[index], rows.target[index]
        other = contrast[index] if contrast is not None else None
        src, tgt_in = src_ids[b:b + 1], tgt_ids[b:b + 1, :-1]
        with torch.no_grad():
            embed = model.src_embed(src)  # (1, S, D)
            ends = _sentence_scores(model, src, tgt_in, torch.cat([torch.zeros_like(embed), embed]), row, target, other)
        grads = torch.zeros(len(index), *embed.shape[1:], dtype=embed.dtype, device=embed.device)  # (R, S, D)
        for start in range(0, n_steps, chunk):
            alpha = torch.tensor(points[start:start + chunk], dtype=embed.dtype, device=embed.device)
            weight = torch.tensor(weights[start:start + chunk], dtype=embed.dtype, device=embed.device)
            with torch.enable_grad():
                scaled = (alpha[:, None, None] * embed).requires_grad_()  # (n, S, D): baseline 0 + α(e - 0)
                scores = _sentence_scores(model, src, tgt_in, scaled, row, target, other)  # (n, R)
                one_hot = torch.eye(len(index), dtype=scores.dtype, device=scores.device)[:, None, :]
                (grad,) = torch.autograd.grad(scores, scaled, grad_outputs=one_hot.expand(-1, scores.size(0), -1),
                                              is_grads_batched=True)  # (R, n, S, D): row r's gradient at each point
            grads += torch.einsum("rnsd,n->rsd", grad, weight)
        attr[index] = (grads * embed).sum(-1)  # (R, S): Σ_d (e - 0) · ∫ ∂f_r/∂e dα
        delta[index] = attr[index].sum(-1) - (ends[1] - ends[0])
    return attr, delta


def _sentence_scores(model: Transformer, src: Tensor, tgt_in: Tensor, src_embed: Tensor, row: Tensor,
                     target: Tensor, contrast: Tensor | None) -> Tensor:
    """One sentence (1, S), (1, T-1) read with n source embeddings (n, S, D) -> f (n, R) for its rows."""
    n = src_embed.size(0)
    handle = _replacing(model.src_embed, src_embed)
    try:
        logits = model(src.expand(n, -1), tgt_in.expand(n, -1))  # (n, T-1, V)
    finally:
        handle.remove()
    log_probs = torch.log_softmax(logits[:, row], dim=-1)  # (n, R, V)
    score = log_probs.gather(-1, target[None, :, None].expand(n, -1, 1))[..., 0]
    if contrast is not None:
        score = score - log_probs.gather(-1, contrast[None, :, None].expand(n, -1, 1))[..., 0]
    return score
