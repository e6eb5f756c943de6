"""BertViz's head view (Vig 2019, "A Multiscale Visualization of Attention in the Transformer Model"):
the query tokens in a column on the left, the key tokens on the right, and a line from each query to
each key whose opacity is the attention weight, one colour per head.

BertViz shows one token's lines while the mouse is over it; Plotly cannot hide traces on hover, so
here a query is *selected* (by a click on its token, ``ui.state.selection``) and only its lines are drawn
strongly, the others faintly. Opacity is binned into a few levels so that the figure has a handful of
traces (one per head and level), not one per line: a trace per line would make the browser slow.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from . import MARGIN, labels, to_numpy

HEAD_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
               "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd")
LEVELS = (0.05, 0.15, 0.3, 0.5, 0.75, 1.0)  # upper edges of the weight bins; a bin is drawn at its edge
MIN_WEIGHT = 0.02  # lighter lines are not drawn at all
LEFT, RIGHT = 0.0, 1.0  # x of the query and key columns
FADED = 0.15  # opacity factor of the lines of queries other than the selected one
ROOM_PER_CHAR = 0.035  # x-axis units a label's character takes in a half-page chart (14 px text, ~560 px wide)


def head_view(weights: Any, query_tokens: Sequence[str], key_tokens: Sequence[str], *,
              heads: Sequence[int] | None = None, query: int | None = None, title: str = "") -> go.Figure:
    """weights: (H, T_q, T_k) of one layer and kind. ``heads`` to draw (default all); ``query``: the
    selected query row, whose lines are drawn at full strength (None: every query alike).

    The token columns are clickable points whose customdata is the query row (left) or -1 (right).
    """
    w = to_numpy(weights)
    if w.ndim != 3:
        raise ValueError(f"head_view needs (heads, queries, keys) weights, got shape {w.shape}")
    n_heads, t_q, t_k = w.shape
    if (t_q, t_k) != (len(query_tokens), len(key_tokens)):
        raise ValueError(f"{t_q}x{t_k} weights for {len(query_tokens)} queries and {len(key_tokens)} keys")
    heads = list(range(n_heads)) if heads is None else [h for h in heads if 0 <= h < n_heads]
    rows = max(t_q, t_k)
    y_q, y_k = _positions(t_q, rows), _positions(t_k, rows)
    fig = go.Figure()
    for head in heads:
        for lower, upper in zip((MIN_WEIGHT, *LEVELS[:-1]), LEVELS, strict=True):
            for strong in (True, False):
                x, y = _segments(w[head], lower, upper, y_q, y_k, query, strong)
                if x:
                    fig.add_trace(go.Scatter(
                        x=x, y=y, mode="lines", hoverinfo="skip", showlegend=False,
                        line=dict(color=HEAD_COLORS[head % len(HEAD_COLORS)], width=2.5 if strong else 1.5),
                        opacity=upper * (1.0 if strong else FADED), legendgroup=f"head {head}",
                    ))
    for head in heads:  # a legend entry per head, its colour
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name=f"head {head}",
                                 line=dict(color=HEAD_COLORS[head % len(HEAD_COLORS)], width=4),
                                 legendgroup=f"head {head}"))
    bold = [i == query for i in range(t_q)]
    fig.add_trace(_token_column(LEFT, y_q, query_tokens, "left", list(range(t_q)), bold, w, heads, "query"))
    fig.add_trace(_token_column(RIGHT, y_k, key_tokens, "right", [-1] * t_k, [False] * t_k, w, heads, "key"))
    fig.update_xaxes(visible=False, range=[LEFT - _room(query_tokens), RIGHT + _room(key_tokens)], fixedrange=True)
    fig.update_yaxes(visible=False, range=[rows - 0.5, -0.8], fixedrange=True)
    fig.update_layout(title=title, margin=MARGIN, height=max(260, 90 + 26 * rows), clickmode="event+select",
                      plot_bgcolor="white", legend=dict(orientation="h", y=-0.02),
                      annotations=[dict(x=LEFT, y=-0.7, text="queries", showarrow=False, xanchor="right"),
                                   dict(x=RIGHT, y=-0.7, text="keys", showarrow=False, xanchor="left")])
    return fig


def _room(tokens: Sequence[str]) -> float:
    """The x-axis room beside a column for its labels: 0.45 (15 characters) at least, more for longer labels (a
    language model's "␣international → ␣relations"), about 0.03 of the axis per character of a half-page chart."""
    longest = max((len(t) for t in labels(tokens)), default=0)
    return max(0.45, 0.05 + ROOM_PER_CHAR * longest)


def _positions(n: int, rows: int) -> np.ndarray:
    """Token rows spread over the taller column's height, so both columns span the same range."""
    return np.linspace(0, rows - 1, n) if n > 1 else np.array([(rows - 1) / 2])


def _segments(w: np.ndarray, lower: float, upper: float, y_q: np.ndarray, y_k: np.ndarray,
              query: int | None, strong: bool) -> tuple[list, list]:
    """One head's lines with a weight in (lower, upper], as None-separated segments."""
    x: list[float | None] = []
    y: list[float | None] = []
    rows, cols = np.nonzero((w > lower) & (w <= upper))
    for q, k in zip(rows, cols, strict=True):
        if (query is None or q == query) != strong:
            continue
        x += [LEFT + 0.03, RIGHT - 0.03, None]
        y += [y_q[q], y_k[k], None]
    return x, y


def _token_column(x: float, ys: np.ndarray, tokens: Sequence[str], side: str, customdata: list[int],
                  bold: list[bool], w: np.ndarray, heads: list[int], role: str) -> go.Scatter:
    shown = [f"<b>{t}</b>" if b else t for t, b in zip(labels(tokens), bold, strict=True)]
    if role == "query":  # hover: where this query looks most, per head
        hover = [f"query {i}: {shown[i]}<br>" + "<br>".join(
            f"head {h}: key {int(w[h, i].argmax())} ({w[h, i].max():.2f})" for h in heads) for i in range(len(tokens))]
    else:
        hover = [f"key {i}: {t}" for i, t in enumerate(shown)]
    return go.Scatter(x=[x] * len(tokens), y=ys, mode="markers+text", text=shown, textposition=f"middle {side}",
                      marker=dict(size=12, color="rgba(120,120,120,0.25)"), customdata=customdata,
                      hovertext=hover, hovertemplate="%{hovertext}<extra></extra>", showlegend=False,
                      textfont=dict(size=14), selected=dict(marker=dict(color="rgba(120,120,120,0.25)")),
                      unselected=dict(marker=dict(opacity=1)))
