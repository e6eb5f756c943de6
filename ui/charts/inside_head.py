"""Charts for "inside one head, step by step": the vectors, the scores becoming weights, and the
weighted sum of the values (from ``transformer.explain.inside_head.HeadSteps``).

The score follows the model: q·k / √d_k in the paper, q·k alone where the model does not scale (T5), plus the
head's relative position bias where the model has one (T5's self-attention, Raffel et al. 2020 section 2.1):
``bias`` (T_k,) is that head's row for the query, from the trace's ``{stack}.position_bias``, shown as its own
term and panel."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

if TYPE_CHECKING:  # for the type only: the charts need nothing of transformer.explain at run time
    from transformer.explain.inside_head import HeadSteps

from . import MARGIN, formulas, heatmap, labels, ticks, to_numpy


def vectors_panels(steps: HeadSteps, query_token: str, key_tokens: Sequence[str]) -> list[go.Figure]:
    """q_i, every k_j and every v_j of the head, each on its own colour scale centred on 0: three panels, shown
    side by side (``ui.figures.show_chart`` of the list, three columns)."""
    dims = [str(d) for d in range(steps.d_k)]
    q = heatmap(to_numpy(steps.q)[None, :], dims, [query_token], title=f"q (query {steps.query})",
                x_title="dimension", y_title="query", colorscale="RdBu_r", zmid=0.0, height=260)
    k = heatmap(steps.k, dims, key_tokens, title="K (one row per key)", x_title="dimension", y_title="key",
                colorscale="RdBu_r", zmid=0.0)
    v = heatmap(steps.v, dims, key_tokens, title="V (one row per key)", x_title="dimension", y_title="key",
                colorscale="RdBu_r", zmid=0.0)
    return [q, k, v]


BIAS_COLUMN = "+ position bias"


def score_formula(scale: bool = True, bias: bool = False) -> str:
    """The score of one key in plain text: "q·k / √d_k" (the paper), "q·k" (T5), "+ bias" where a head adds one
    (``ui.charts.formulas``, the one writer of the formula)."""
    return formulas.score_formula(scale, bias, per_key=True)


def score_latex(scale: bool = True, bias: bool = False) -> str:
    """``score_formula`` in LaTeX, for the page's text."""
    return formulas.score_formula(scale, bias, per_key=True, latex=True)


def steps_frame(steps: HeadSteps, key_tokens: Sequence[str], bias: Any = None, scale: bool = True) -> pd.DataFrame:
    """One row per key: q·k, divided by sqrt(d_k) where the model scales (``scale``), plus the head's position
    bias where it has one (``bias``, (T_k,)), the mask, the masked score and the softmax weight."""
    dots = to_numpy(steps.dots)
    columns: dict[str, Any] = {"key": range(len(key_tokens)), "token": list(key_tokens), "q·k": dots}
    if scale:  # 1/sqrt(d_k), or Gemma's query_pre_attn_scalar^-1/2
        paper = np.isclose(steps.scale, 1 / np.sqrt(steps.d_k), rtol=1e-12, atol=0)
        columns[f"÷ √{steps.d_k}" if paper else f"× {steps.scale:.4g}"] = dots * steps.scale
    if bias is not None:
        columns[BIAS_COLUMN] = to_numpy(bias)
    cap = getattr(steps, "softcap", None)
    if cap is not None:  # Gemma-2: the score soft-capped before the mask
        columns[f"{cap:g}·tanh(· / {cap:g})"] = cap * np.tanh(dots * steps.scale / cap)
    columns["mask"] = ["may look" if a else "masked (-inf)" for a in steps.allowed.tolist()]
    columns["score"] = to_numpy(steps.masked)
    columns["softmax weight"] = to_numpy(steps.weights)
    return pd.DataFrame(columns)


def score_terms(steps: HeadSteps, key_tokens: Sequence[str], bias: Any, scale: bool = True) -> go.Figure:
    """The two terms of each key's score side by side: q·k (/ √d_k where the model scales) and the head's position
    bias, which a model with relative positions (T5) adds; their sum is the score."""
    x = list(range(len(key_tokens)))
    dots = to_numpy(steps.dots) / (np.sqrt(steps.d_k) if scale else 1.0)
    fig = go.Figure([
        go.Bar(x=x, y=dots, name=score_formula(scale), marker_color="#4c78a8", customdata=labels(key_tokens),
               hovertemplate="key %{customdata}<br>%{y:.3f}<extra></extra>"),
        go.Bar(x=x, y=to_numpy(bias), name="position bias", marker_color="#54a24b", customdata=labels(key_tokens),
               hovertemplate="key %{customdata}<br>bias %{y:.3f}<extra></extra>"),
    ])
    fig.update_xaxes(**ticks(key_tokens), title_text="key")
    fig.update_layout(title=f"the terms: {score_formula(scale)} and the bias", barmode="group", yaxis_title="term",
                      margin=MARGIN, height=320, legend=dict(orientation="h", y=-0.3))
    return fig


def rotation_panel(steps: HeadSteps, query_token: str) -> go.Figure:
    """Rotary positions: the query before and after its turn (RoPE turns each pair of dimensions by the angle
    position x that pair's frequency, keeping the pair's length), on one colour scale centred on 0."""
    rows = np.vstack([to_numpy(steps.q_unrotated), to_numpy(steps.q)])
    return heatmap(rows, [str(d) for d in range(steps.d_k)], ["q before RoPE", f"q turned (position {steps.query})"],
                   title=f"the query of {query_token}, turned by its position", x_title="dimension", y_title="",
                   colorscale="RdBu_r", zmid=0.0, height=240)


def scores_to_weights_panels(steps: HeadSteps, key_tokens: Sequence[str], bias: Any = None,
                             scale: bool = True, formula: str | None = None) -> list[go.Figure]:
    """The masked scores (masked keys marked) and the softmax weights they become, per key: two panels; three
    where the head adds a position bias (``bias``), the score's two terms first (``score_terms``)."""
    x = list(range(len(key_tokens)))
    score = to_numpy(steps.masked)
    finite = np.where(np.isfinite(score), score, np.nan)
    left = go.Figure(go.Bar(x=x, y=finite, marker_color="#4c78a8", customdata=labels(key_tokens),
                            text=["masked" if np.isneginf(s) else f"{s:.2f}" for s in score],
                            hovertemplate="key %{customdata}<br>score %{text}<extra></extra>"))
    left.update_xaxes(**ticks(key_tokens), title_text="key")
    left.update_layout(title=f"{formula or score_formula(scale, bias is not None)}, masked", yaxis_title="score",
                       margin=MARGIN, height=320)
    weights = to_numpy(steps.weights)
    right = go.Figure(go.Bar(x=x, y=weights, marker_color="#f58518", customdata=labels(key_tokens),
                             text=[f"{w:.2f}" for w in weights],
                             hovertemplate="key %{customdata}<br>weight %{y:.3f}<extra></extra>"))
    right.update_xaxes(**ticks(key_tokens), title_text="key")
    right.update_layout(title="softmax: the weights (sum 1)", yaxis_title="weight", yaxis_range=[0, 1.05],
                        margin=MARGIN, height=320)
    return [left, right] if bias is None else [score_terms(steps, key_tokens, bias, scale), left, right]


def output_chart(steps: HeadSteps, key_tokens: Sequence[str]) -> go.Figure:
    """Each value vector scaled by its weight, and their sum: the head's output for this query."""
    rows = np.vstack([to_numpy(steps.weighted_values), to_numpy(steps.output)[None, :]])
    names = [f"{w:.2f} × v{j} {t}" for j, (t, w) in enumerate(zip(key_tokens, to_numpy(steps.weights),
                                                                       strict=True))] + ["= output (sum)"]
    fig = heatmap(rows, [str(d) for d in range(steps.d_k)], names, x_title="dimension", y_title="",
                  colorscale="RdBu_r", zmid=0.0, title=f"Σ_j weight_j · v_j: head {steps.head}'s output")
    fig.add_hline(y=len(key_tokens) - 0.5, line_width=3, line_color="black")
    return fig
