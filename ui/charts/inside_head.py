"""Charts for "inside one head, step by step": the vectors, the scores becoming weights, and the
weighted sum of the values (from ``transformer.explain.inside_head.HeadSteps``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import plotly.graph_objects as go

if TYPE_CHECKING:  # for the type only: the charts need nothing of transformer.explain at run time
    from transformer.explain.inside_head import HeadSteps

from . import MARGIN, heatmap, labels, ticks, to_numpy


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


def steps_frame(steps: HeadSteps, key_tokens: Sequence[str]) -> pd.DataFrame:
    """One row per key: q·k, divided by sqrt(d_k), the mask, the masked score and the softmax weight."""
    return pd.DataFrame({
        "key": range(len(key_tokens)),
        "token": list(key_tokens),
        "q·k": to_numpy(steps.dots),
        f"÷ √{steps.d_k}": to_numpy(steps.scaled),
        "mask": ["may look" if a else "masked (-inf)" for a in steps.allowed.tolist()],
        "score": to_numpy(steps.masked),
        "softmax weight": to_numpy(steps.weights),
    })


def scores_to_weights_panels(steps: HeadSteps, key_tokens: Sequence[str]) -> list[go.Figure]:
    """The masked scores (masked keys marked) and the softmax weights they become, per key: two panels."""
    x = list(range(len(key_tokens)))
    score = to_numpy(steps.masked)
    finite = np.where(np.isfinite(score), score, np.nan)
    left = go.Figure(go.Bar(x=x, y=finite, marker_color="#4c78a8", customdata=labels(key_tokens),
                            text=["masked" if np.isneginf(s) else f"{s:.2f}" for s in score],
                            hovertemplate="key %{customdata}<br>score %{text}<extra></extra>"))
    left.update_xaxes(**ticks(key_tokens), title_text="key")
    left.update_layout(title="q·k / √d_k, masked", yaxis_title="score", margin=MARGIN, height=320)
    weights = to_numpy(steps.weights)
    right = go.Figure(go.Bar(x=x, y=weights, marker_color="#f58518", customdata=labels(key_tokens),
                             text=[f"{w:.2f}" for w in weights],
                             hovertemplate="key %{customdata}<br>weight %{y:.3f}<extra></extra>"))
    right.update_xaxes(**ticks(key_tokens), title_text="key")
    right.update_layout(title="softmax: the weights (sum 1)", yaxis_title="weight", yaxis_range=[0, 1.05],
                        margin=MARGIN, height=320)
    return [left, right]


def output_chart(steps: HeadSteps, key_tokens: Sequence[str]) -> go.Figure:
    """Each value vector scaled by its weight, and their sum: the head's output for this query."""
    rows = np.vstack([to_numpy(steps.weighted_values), to_numpy(steps.output)[None, :]])
    names = [f"{w:.2f} × v{j} {t}" for j, (t, w) in enumerate(zip(key_tokens, to_numpy(steps.weights),
                                                                       strict=True))] + ["= output (sum)"]
    fig = heatmap(rows, [str(d) for d in range(steps.d_k)], names, x_title="dimension", y_title="",
                  colorscale="RdBu_r", zmid=0.0, title=f"Σ_j weight_j · v_j: head {steps.head}'s output")
    fig.add_hline(y=len(key_tokens) - 0.5, line_width=3, line_color="black")
    return fig
