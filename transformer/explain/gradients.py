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
integrated gradients keeps it fixed. Every real row runs as its own copy, so one
backward (one forward for all of IG's steps) serves all rows.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from captum.attr import InputXGradient, IntegratedGradients, Saliency
from torch import Tensor, nn

from ..network.model import Transformer
from .inputs import Rows, row_scores, scatter_rows

N_STEPS = 128


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
    n_steps: int = N_STEPS, internal_batch_size: int | None = None, integration: str = "riemann_trapezoid",
) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """-> source (B, T-1, S), target (B, T-1, T-1) or None, delta (B, T-1) or None."""
    batch, length = src_ids.size(0), tgt_ids.size(1) - 1
    src, tgt_in = src_ids[rows.batch], tgt_ids[rows.batch, :-1]  # (N, S), (N, T-1): one copy per real row
    contrast = rows.contrast if rows.contrast is not None else rows.target.new_empty(0)
    with torch.no_grad():
        src_embed, tgt_embed = model.src_embed(src), model.tgt_embed(tgt_in)  # (N, S, D), (N, T-1, D)
    src_embed.requires_grad_(), tgt_embed.requires_grad_()  # fresh leaves of ours, not the model's weights
    args = (src, tgt_in, rows.row, rows.target, contrast)
    with torch.enable_grad():
        if method == "integrated_gradients":
            ig = IntegratedGradients(embedding_forward(model, with_target=False))
            attr, delta = ig.attribute(src_embed, baselines=torch.zeros_like(src_embed), additional_forward_args=args,
                                       n_steps=n_steps, method=integration, internal_batch_size=internal_batch_size,
                                       return_convergence_delta=True)
            return (scatter_rows(attr.sum(dim=-1), rows, batch, length), None,
                    scatter_rows(delta.detach().to(attr.dtype), rows, batch, length))
        forward = embedding_forward(model, with_target=True)
        if method == "saliency":
            grads = Saliency(forward).attribute((src_embed, tgt_embed), additional_forward_args=args, abs=False)
            src_attr, tgt_attr = (g.norm(dim=-1) for g in grads)  # (N, S), (N, T-1)
        else:
            products = InputXGradient(forward).attribute((src_embed, tgt_embed), additional_forward_args=args)
            src_attr, tgt_attr = (p.sum(dim=-1) for p in products)
    return scatter_rows(src_attr, rows, batch, length), scatter_rows(tgt_attr, rows, batch, length), None
