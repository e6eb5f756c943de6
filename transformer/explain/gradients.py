"""Gradient attribution to the source token embeddings (tested against Captum and ``torch.autograd.grad``).

- "saliency": ‖∂f_t/∂e_j‖₂, the norm over d_model of the gradient at token j's embedding
  (Simonyan et al. 2014, "Deep Inside Convolutional Networks"); never negative.
- "input_x_gradient": Σ_d e_{j,d} · ∂f_t/∂e_{j,d} (Shrikumar et al. 2016, "Not Just a Black
  Box"), summed over d_model so that the per-token figures add up like the per-dimension ones.
- "integrated_gradients": Sundararajan et al. 2017, "Axiomatic Attribution for Deep
  Networks": Σ_d (e - e')_{j,d} ∫₀¹ ∂f_t/∂e_{j,d}(e' + α(e - e')) dα, summed over d_model so
  completeness holds: Σ_j attribution = f(e) - f(e') up to ``delta``, Captum's convergence
  delta. Baseline e' (option ``baseline``): "zero", a zero token embedding at every
  position, or "pad" / "unk", that token's embedding at every real position; the positional
  encoding and the masks stay, and the target prefix is fixed. The default (None: ``default_baseline``) is the
  first of these at which the model is smooth by its structure. Zero, wherever positions are added to the
  embeddings, because it is the one baseline that carries no token of the vocabulary: "unk" asks what the model
  makes of a sentence of unknown words (a question with an answer of its own, as occlusion asks per token), and
  "pad" puts the padding's vector where the model never saw it. "pad" on a model that is
  ``singular_at_zero_embeddings`` (T5 v1.0 and v1.1: no positions added, an RMSNorm without bias first), where
  norm(αe) jumps from 0 to e / rms(e) within α ≲ √ε / rms(e): on the tests' tiny T5 models the zero baseline's
  attributions summed to 4·10³-3·10⁵ nats against gaps of 0.05-4.6, no row within tolerance even at 1024
  intervals, where "pad" and "unk" had every row within it. A baseline whose path comes within rms √ε of such
  a singular point (``_singular_positions``) is refused with a ValueError that names the baselines that are not.
  The integral uses the trapezoid
  rule with ``n_steps`` points (option ``integration="gausslegendre"``); by default (``n_steps=None``) each row is
  integrated over 8 intervals, and a row whose own |delta| is above 5% of its own |f(e) - f(e')| (plus 0.001 for tiny
  gaps: ``within_tolerance``) is refined to 16, 32, ... 1024 intervals, each level reusing the points of the one
  before and taking the gradients of the rows still off only (``_adaptive_integrated_gradients``): every point costs
  one backward per row (at NLLB size about 0.34 TFLOP for a 20 + 20-token pair), so points are spent only where a
  row's integral needs them. A row still off at 1024 keeps that result, and its delta says so (the Explain page flags
  it). Rows within tolerance by level, cumulative (``python bench/bench_ig_rows.py --inputs 5``: 5 sources of each
  task, greedy outputs): reverse 11% at 8, 29% at 16, 67% at 32, 78% at 64, 89% at 128, 98% at 256, 100% at 512;
  dates-de 52%, 96%, 99%, 100% at 64; numbers-en-de 8%, 52%, 84%, 100% at 64; sentences-en-de 88%, 99%, 100% at 32.
  Completeness is the paper's own check and only a proxy: with the ladder at 16, 24% of reverse's rows stopped at 16,
  with it at 8, 29% have stopped by 16, so a few rows within 5% at 8 would not have been at 16 (their |delta| says
  what they are). At 128 intervals for every row, 78% of reverse's rows were within tolerance: single rows of
  20-character inputs missed their own gap by 29-39% while the sentence's summed |delta| was within 5% (what the
  rule tested before), which is why the rule and ``delta`` are per row. The trapezoid rule is the
  default because the path can be sharp in the middle: on the shipped ``reverse`` model
  f jumps between α ≈ 0.5 and 0.8, where Gauss-Legendre places few points (at 64 steps
  its worst row's |delta| was 49% of |f(e) - f(e')| against the trapezoid's 18%).
  bench/bench_explain.py prints |delta| / |f(e) - f(e')| per model.

e_j is the output of ``model.src_embed`` (before the sqrt(d_model) scale and the
positional encoding; a decoder-only model's one embedding at the prompt's positions, pairs.py, the continuation
being the target). Captum's Layer* classes take baselines as token ids, and no token
has a zero embedding (a PAD baseline would also change the masks), so the forward here
takes the embedding itself: an edit of the ``src.tokens`` site (and ``tgt.tokens`` for the
target side; ``network.interventions``) puts the given tensor in place of the looked-up one, for
that call only.
Saliency and input × gradient also score the target prefix (``target``, B × T-1 × T-1);
integrated gradients keeps it fixed. Every method takes each row's gradient from one forward of its sentence and
one batched backward over the rows (``row_gradients``); at NLLB size that took saliency from 8.1 s (a copy of the
pair per row, through Captum's ``Saliency``) to the figure in docs/benchmarks.md. Integrated gradients computes
the integral itself with the quadrature rules Captum names (``quadrature``): the interpolated
source embeddings are the same for every row of a sentence (the target prefix is fixed), so
one forward over the ``n_steps`` points serves all its rows, and one batched backward
(``is_grads_batched``) gives each row's gradient; 2-4x faster than Captum's
``IntegratedGradients`` over per-row copies, equal to it to float tolerance
(tests/test_explain_attribution.py compares the two).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ..checks import check_choice, check_int
from ..network.config import TransformerConfig
from ..network.model import Transformer
from .inputs import Rows, by_sentence, scatter_rows
from .pairs import source_embedding
from .progress import Progress, tell, within
from .row_gradients import (
    MEMORY_BUDGET,
    backward_floats,
    batched_row_gradients,
    embedding_gradients,
    row_states,
    scores_and_directions,
)

N_STEPS = 128  # the points another ``integration`` rule takes without ``n_steps`` (and Captum's comparison uses)
# n_steps=None: per row, the fewest of these intervals whose |delta| is within tolerance. The levels are nested (each
# adds the midpoints of the one before), so starting at 8 costs nothing when 128 are needed (9 + 8 + 16 + 32 + 64 =
# 129 points either way) and halves the work of a sentence that converges early (opus-mt size: 14.3 s at 33, 6.9 s at
# 17; NLLB size: 17 points were 5.9 TFLOP, 41.5 s, past the 30 s target, where 9 points are within it).
# Past 128 only the rows still off are refined; a row still off at 1024 intervals keeps that result and says so
# in its delta (``within_tolerance`` is False for it).
STEP_LADDER = (8, 16, 32, 64, 128, 256, 512, 1024)
DELTA_TOLERANCE = 0.05  # of a row's own |f(e) - f(e')|
DELTA_FLOOR = 1e-3  # nats: the |delta| every row may keep, so that a tiny gap needs no exact zero
# Interpolation points per forward: chunks of 32 were faster than all 128 at once on the shipped models
# (reverse, 20 tokens, 1 thread: 0.96 s vs 1.40 s; bench/bench_explain.py), as the activations stay in cache.
POINTS_PER_FORWARD = 32


def gradient_attribution(
    model: Transformer, src_ids: Tensor, tgt_ids: Tensor, rows: Rows, method: str,
    n_steps: int | None = None, internal_batch_size: int | None = POINTS_PER_FORWARD,
    integration: str = "riemann_trapezoid", baseline: str | None = None, progress: Progress | None = None,
) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """-> source (B, T-1, S), target (B, T-1, T-1) or None, delta (B, T-1) or None. ``baseline`` None: the
    model's ``default_baseline``. ``progress`` (progress.py) is told between the steps (sentences, batched
    backwards, integrated gradients' chunks of points), so that a deadline (``progress.with_deadline``) stops the
    work at the next one."""
    batch, length = src_ids.size(0), tgt_ids.size(1) - 1
    if method == "integrated_gradients":
        baseline = default_baseline(model.config) if baseline is None else baseline
        check_choice("baseline", baseline, BASELINES)
        attr, delta, _ = _adaptive_integrated_gradients(model, src_ids, tgt_ids, rows, n_steps, internal_batch_size,
                                                        integration, baseline, progress)
        return scatter_rows(attr, rows, batch, length), None, scatter_rows(delta, rows, batch, length)
    n_rows = rows.row.numel()
    weight = source_embedding(model).weight
    src_attr = torch.zeros(n_rows, src_ids.size(1), dtype=weight.dtype, device=weight.device)  # (N, S)
    tgt_attr = torch.zeros(n_rows, length, dtype=weight.dtype, device=weight.device)  # (N, T-1)
    for b, index in by_sentence(rows):  # index: this sentence's real rows, (R,)
        other = rows.contrast[index] if rows.contrast is not None else None
        src_embed, tgt_embed, src_grad, tgt_grad = embedding_gradients(
            model, src_ids[b:b + 1], tgt_ids[b:b + 1, :-1], rows.row[index], rows.target[index], other,
            _sentence(progress, b, batch))
        if method == "saliency":  # ‖∂f/∂e_j‖₂ per token
            src_attr[index], tgt_attr[index] = src_grad.norm(dim=-1), tgt_grad.norm(dim=-1)  # (R, S), (R, T-1)
        else:  # Σ_d e_{j,d} ∂f/∂e_{j,d} per token
            src_attr[index], tgt_attr[index] = (src_grad * src_embed).sum(-1), (tgt_grad * tgt_embed).sum(-1)
    return scatter_rows(src_attr, rows, batch, length), scatter_rows(tgt_attr, rows, batch, length), None


def _sentence(progress: Progress | None, b: int, batch: int) -> Progress | None:
    """Sentence ``b`` of ``batch``'s slice of ``progress``."""
    return within(progress, b / batch, (b + 1) / batch, f"sentence {b + 1} of {batch}: " if batch > 1 else "")


def within_tolerance(delta: Tensor | np.ndarray, gap: Tensor | np.ndarray) -> Tensor | np.ndarray:
    """Whether each row's integral has converged: |delta| <= ``DELTA_TOLERANCE`` · |f(e) - f(e')| + ``DELTA_FLOOR``,
    elementwise over tensors or arrays of any shape (False where delta is NaN). The adaptive rule refines a row
    until this holds, and the Explain page flags a row where it does not."""
    return abs(delta) <= DELTA_TOLERANCE * abs(gap) + DELTA_FLOOR


def _adaptive_integrated_gradients(
    model: Transformer, src_ids: Tensor, tgt_ids: Tensor, rows: Rows, n_steps: int | None,
    internal_batch_size: int | None, integration: str, baseline: str, progress: Progress | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """Integrated gradients with ``n_steps`` points, or (``n_steps=None``) adaptively, row by row: each sentence is
    integrated by the trapezoid rule over 8 intervals, then each row whose own |delta| is not yet
    ``within_tolerance`` of its own |f(e) - f(e')| is refined to 16, 32, ... up to 1024 intervals (``STEP_LADDER``;
    a row still off at 1024 keeps that result, its delta saying how far off it is). Each level reuses the points of
    the one before and adds the midpoints, T(2n) = T(n)/2 + Σ g(midpoints)/(2n), as Romberg integration refines
    the trapezoid rule, and computes the gradients of the rows still off only: the forward over the new points is
    shared, the batched backward is over those rows. Another ``integration`` rule without ``n_steps`` takes
    ``N_STEPS`` points. Each row of the answer says its own delta, and how many points its rule took."""
    if n_steps is None and integration != "riemann_trapezoid":
        n_steps = N_STEPS
    return _integrated_gradients(model, src_ids, tgt_ids, rows, n_steps, internal_batch_size, integration, baseline,
                                 progress)


def _integrated_gradients(
    model: Transformer, src_ids: Tensor, tgt_ids: Tensor, rows: Rows, n_steps: int | None,
    internal_batch_size: int | None, integration: str, baseline: str, progress: Progress | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """-> attribution (N, S), delta (N,) and the points each row's rule took (N,), for the N real rows, one
    sentence at a time.

    The interpolated embeddings are the same for every row of a sentence, so one forward over
    the ``n_steps`` points serves all its rows; the rows' gradients come from one batched
    backward (``is_grads_batched``: a one-hot ``grad_outputs`` per row). The generator is not in
    that backward: row r's score depends on the decoder state h_r alone, and its gradient there has
    a closed form (``row_gradients.scores_and_directions``), so the backward starts at the R explained states instead of
    at (points x T x V) logits — at a 58k-word vocabulary that was most of the time and memory.
    ``internal_batch_size`` caps the points per forward; fewer are taken where the batched gradients of
    the rows asked for would pass ``MEMORY_BUDGET`` (``_points_per_chunk``). Step sizes and alphas are
    Captum's (``quadrature``). ``progress`` is told before each level of the ladder and each chunk of points.
    """
    weights, points = quadrature(integration, n_steps) if n_steps is not None else ([], [])
    weight = source_embedding(model).weight
    attr = torch.zeros(rows.row.numel(), src_ids.size(1), dtype=weight.dtype, device=weight.device)  # (N, S)
    delta = attr.new_zeros(rows.row.numel())  # (N,)
    taken = torch.full((rows.row.numel(),), len(points), dtype=torch.long, device=weight.device)  # (N,): points per row
    contrast = rows.contrast
    for b, index in by_sentence(rows):  # index: this sentence's real rows, (R,)
        row, target = rows.row[index], rows.target[index]
        other = contrast[index] if contrast is not None else None
        src, tgt_in = src_ids[b:b + 1], tgt_ids[b:b + 1, :-1]
        with torch.no_grad():
            embed = source_embedding(model)(src)  # (1, S, D)
            origin = _baseline(model, src, embed, baseline)  # (1, S, D): e'
            states = row_states(model, src, tgt_in, row, torch.cat([origin, embed]))
            ends = scores_and_directions(model.generator, states, target, other)[0]  # (2, R)
        gap = ends[1] - ends[0]  # (R,): f(e) - f(e')
        path = _Path(model, src, tgt_in, embed, origin, row, target, other, internal_batch_size)
        sentence = _sentence(progress, b, src_ids.size(0))
        if n_steps is None:  # the adaptive default: 8, 16, ... intervals, each reusing the points before
            levels = len(STEP_LADDER)  # the bar's share per level: the most the ladder may take
            grads = path.gradients(*_trapezoid(STEP_LADDER[0]),
                                   progress=within(sentence, 0, 1 / levels, f"{STEP_LADDER[0]} intervals, "))
            taken[index] = STEP_LADDER[0] + 1
            for level, intervals in enumerate(STEP_LADDER[1:], start=1):
                found = (grads * (embed - origin)).sum(-1)  # (R, S)
                off = (~within_tolerance(found.sum(-1) - gap, gap)).nonzero(as_tuple=True)[0]  # rows still off, (R',)
                if off.numel() == 0:
                    break
                h, n = 1 / intervals, intervals // 2  # T(2n) = T(n)/2 + h Σ g(the n midpoints): the rule halved
                level_progress = within(sentence, level / levels, (level + 1) / levels,
                                        f"{intervals} intervals for {off.numel()} rows, ")
                grads[off] = grads[off] / 2 + path.gradients([h] * n, [(2 * i + 1) * h for i in range(n)], off,
                                                             level_progress)
                taken[index[off]] = intervals + 1
        else:
            grads = path.gradients(weights, points, progress=sentence)
        attr[index] = (grads * (embed - origin)).sum(-1)  # (R, S): Σ_d (e - e') · ∫ ∂f_r/∂e dα
        delta[index] = attr[index].sum(-1) - gap
    return attr, delta, taken


def _trapezoid(intervals: int) -> tuple[list[float], list[float]]:
    """The trapezoid rule's weights and points for ``intervals`` equal steps (intervals + 1 points)."""
    return quadrature("riemann_trapezoid", intervals + 1)


class _Path:
    """One sentence's straight path e' + α(e - e') and its rows: ``gradients`` sums their weighted gradients."""

    def __init__(self, model: Transformer, src: Tensor, tgt_in: Tensor, embed: Tensor, origin: Tensor,
                 row: Tensor, target: Tensor, other: Tensor | None, cap: int | None) -> None:
        self.model, self.src, self.tgt_in, self.embed, self.origin = model, src, tgt_in, embed, origin
        self.row, self.target, self.other, self.cap = row, target, other, cap

    def gradients(self, weights: list[float], points: list[float], only: Tensor | None = None,
                  progress: Progress | None = None) -> Tensor:
        """Σ_i w_i ∂f_r/∂e at e' + α_i (e - e') for every row r, or for the rows ``only`` (indices into this
        sentence's rows, (R',)): (R', S, D). The forward reads the whole sentence once per point whatever the rows;
        the backward, and so the memory that sets the points per forward, grows with the rows asked for.
        ``progress`` is told before each chunk of points."""
        row, target, other = self.row, self.target, self.other
        if only is not None:
            row, target, other = row[only], target[only], None if other is None else other[only]
        embed, origin, n_rows = self.embed, self.origin, row.numel()
        chunk = _points_per_chunk(self.model.config, self.src.size(1), self.tgt_in.size(1), n_rows, self.cap)
        grads = torch.zeros(n_rows, *embed.shape[1:], dtype=embed.dtype, device=embed.device)  # (R', S, D)
        for start in range(0, len(points), chunk):
            tell(progress, start / len(points), f"points {start + 1}-{min(start + chunk, len(points))} of "
                 f"{len(points)}")
            alpha = torch.tensor(points[start:start + chunk], dtype=embed.dtype, device=embed.device)
            weight = torch.tensor(weights[start:start + chunk], dtype=embed.dtype, device=embed.device)
            with torch.enable_grad():
                scaled = (origin + alpha[:, None, None] * (embed - origin)).requires_grad_()  # (n, S, D): e'+α(e-e')
                states = row_states(self.model, self.src, self.tgt_in, row, scaled)  # (n, R', D)
                with torch.no_grad():
                    direction = scores_and_directions(self.model.generator, states, target, other)[1]
                (grad,) = batched_row_gradients(states, direction, (scaled,))  # (R', n, S, D): each row, each point
            grads += torch.einsum("rnsd,n->rsd", grad, weight)
        return grads


INTEGRATIONS = ("riemann_trapezoid", "riemann_left", "riemann_right", "riemann_middle", "gausslegendre")


def quadrature(integration: str, n_steps: int) -> tuple[list[float], list[float]]:
    """The weights and points α in [0, 1] of ∫₀¹ g(α) dα ≈ Σ w_i g(α_i), by the names of Captum's
    ``IntegratedGradients`` methods.

    Riemann sums: n equal steps 1/n at the left ends, right ends or middles; Gauss-Legendre: the n-point
    rule mapped from [-1, 1] to [0, 1]; all as Captum places them. Trapezoid: n points from 0 to 1 with the
    spacing h = 1/(n-1), weighted h and the two ends h/2, so that the weights add up to 1. Captum (0.9)
    weights the same points 1/n and 1/(2n), which add up to (n-1)/n: its attributions are (n-1)/n of the
    trapezoid rule's (3% short at 32 points), a gap its convergence delta then reports as error; the tests
    compare ours with Captum's scaled by n/(n-1).
    """
    check_choice("integration", integration, INTEGRATIONS)
    check_int("n_steps", n_steps, 2 if integration == "riemann_trapezoid" else 1)
    n = n_steps
    if integration == "gausslegendre":
        nodes, weights = np.polynomial.legendre.leggauss(n)
        return list(0.5 * weights), list(0.5 * (nodes + 1))
    if integration == "riemann_trapezoid":
        h = 1 / (n - 1)  # the spacing of n points from 0 to 1
        return [h / 2, *[h] * (n - 2), h / 2], list(np.linspace(0, 1, n))
    start = {"riemann_left": 0.0, "riemann_right": 1 / n, "riemann_middle": 0.5 / n}[integration]
    return [1 / n] * n, list(np.linspace(start, start + 1 - 1 / n, n))


def _points_per_chunk(config: TransformerConfig, src_len: int, tgt_len: int, n_rows: int, cap: int | None) -> int:
    """How many interpolation points one forward takes: ``cap`` (default ``POINTS_PER_FORWARD``), fewer where the
    batched backward of ``n_rows`` gradients would hold more than ``MEMORY_BUDGET`` bytes of activations
    (``row_gradients.backward_floats`` per point)."""
    fit = MEMORY_BUDGET // max(1, 4 * backward_floats(config, src_len, tgt_len, n_rows))
    return int(max(1, min(cap or POINTS_PER_FORWARD, fit)))


BASELINES = ("zero", "pad", "unk")  # in the order ``default_baseline`` tries them
BASELINE_NAMES = {"zero": "the zero embedding", "pad": "the <pad> embedding", "unk": "the <unk> embedding"}


def default_baseline(config: TransformerConfig) -> str:
    """Integrated gradients' baseline when none is asked for: the first of ``BASELINES`` at which the model is
    smooth by its structure. "zero" (no token of the vocabulary), except where the model is
    ``singular_at_zero_embeddings`` (T5: no positions added, a norm first), then "pad"."""
    return "pad" if config.singular_at_zero_embeddings else "zero"


def baseline_note(config: TransformerConfig, baseline: str | None = None) -> str:
    """Which baseline integrated gradients starts from on this model (``baseline``, None: the default) and why,
    in a sentence: what the Explain page says."""
    default = default_baseline(config)
    used = default if baseline is None else baseline
    why = ("this model adds no positions to its token embeddings and normalises them first, so at zero embeddings "
           "its first norm, x / sqrt(mean(x²) + ε), is singular and a path from there runs through its jump; "
           f"{BASELINE_NAMES[default]} is the first of {', '.join(BASELINES)} at which it is smooth"
           if config.singular_at_zero_embeddings else
           "it carries no token of the vocabulary, and this model adds positions to its embeddings, so its norms "
           "never read a zero vector on the way")
    if used == default:
        return f"Integrated gradients starts from {BASELINE_NAMES[used]} at every source position, this model's " \
               f"default: {why}."
    return (f"Integrated gradients starts from {BASELINE_NAMES[used]} at every source position, as chosen (this "
            f"model's default is {BASELINE_NAMES[default]}: {why}).")


def _baseline(model: Transformer, src: Tensor, embed: Tensor, baseline: str) -> Tensor:
    """The path's start e' for one sentence (1, S, D): zero embeddings, or the ``<pad>`` / ``<unk>`` embedding at
    every position that holds a real token (padding keeps its own, so the masks and the padding's part stay).
    ValueError where the path meets the model's singular point (``_singular_positions``): refused, not drawn."""
    origin = _start(model, src, embed, baseline)
    if not model.config.singular_at_zero_embeddings:
        return origin
    bad = _singular_positions(model.config, embed, origin)[0].nonzero()[:, 0].tolist()
    if bad:
        smooth = [other for other in BASELINES if other != baseline and not _singular_positions(
            model.config, embed, _start(model, src, embed, other)).any()]
        raise ValueError(
            f"integrated gradients' {baseline!r} baseline sits on this model's singularity: it adds no positions to "
            f"its token embeddings and normalises them first, and the path from {BASELINE_NAMES[baseline]} passes "
            f"within rms √ε of zero at {len(bad)} of {src.size(1)} source positions, where the norm's output jumps; "
            + (f"choose {' or '.join(repr(b) for b in smooth)}" if smooth else "no baseline is smooth here"))
    return origin


def _start(model: Transformer, src: Tensor, embed: Tensor, baseline: str) -> Tensor:
    """``_baseline`` before its check."""
    if baseline == "zero":
        return torch.zeros_like(embed)
    token = model.config.pad_id if baseline == "pad" else model.config.unk_id
    other = source_embedding(model)(torch.full_like(src, token))  # (1, S, D)
    return torch.where((src != model.config.pad_id)[..., None], other, embed)


def _singular_positions(config: TransformerConfig, embed: Tensor, origin: Tensor) -> Tensor:
    """(1, S) bool: the positions whose straight path e' + α(e - e'), α in [0, 1], comes within rms √ε of the first
    norm's singular set, as that norm reads it (times sqrt(d_model) where embeddings are scaled; about the mean for
    LayerNorm, whose singular set is every constant vector): there the norm's own ε, not the vector, sets its
    scale, and its output turns through up to 180° within that distance. The closest point has a closed form:
    α* = clamp(-<a, d> / <d, d>, 0, 1), a = e', d = e - e'. A position whose token is its own baseline (padding)
    stays at e."""
    scale = config.d_model ** 0.5 if config.scale_embedding else 1.0
    dtype = torch.promote_types(origin.dtype, torch.float32)  # a half model's squares would overflow
    start, step = scale * origin.to(dtype), scale * (embed - origin).to(dtype)  # (1, S, D) each
    if config.norm == "layer":
        start, step = start - start.mean(-1, keepdim=True), step - step.mean(-1, keepdim=True)
    alpha = (-(start * step).sum(-1) / (step * step).sum(-1).clamp_min(torch.finfo(step.dtype).tiny)).clamp(0, 1)
    closest = start + alpha[..., None] * step  # (1, S, D)
    return closest.pow(2).mean(-1).sqrt() <= config.layer_norm_eps ** 0.5
