"""Charts of rotary position embeddings (RoPE: Su et al. 2021, "RoFormer"), as Llama, Mistral, Qwen and Gemma use
them: nothing is added to the embeddings; each head's query and key are turned by their position, plane by plane.

Dimensions i and i + d_k/2 form plane i, turned by the angle m θ_i at position m, θ_i = θ^(-2i/d_k): plane 0 turns
by one radian per position (a wavelength 2π/θ_0 = 2π), the last one by about 1/θ (a wavelength near 2π θ).
``wavelength_chart`` draws 2π/θ_i per plane (the model's own θ_i, scaled where the model scales them, beside the
unscaled ones, and Gemma-3's second base of its window layers), ``rotation_chart`` one query turned along the
positions in a few planes, ``score_chart`` the score q_m · k_n of a query and key against the distance m - n: the
curves of different query positions lie on one another, since R_m^T R_n = R_(n-m) (section 3.4.2 of the paper).

Every function takes plain arrays (``ui.compute.positions.rotary_curves`` computes them with the model's own
rotary modules) and returns a figure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from . import MARGIN, heatmap, to_numpy

BASE_NAMES = {"full": "this model's θ_i", "sliding": "window layers' θ_i (own base)"}
PAIR_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")


def wavelengths(inv_freq: Any) -> np.ndarray:
    """2π / θ_i: how many positions plane i takes to turn once."""
    return 2 * np.pi / to_numpy(inv_freq)


def wavelength_chart(inv_freq: Mapping[str, Any], unscaled: Any | None = None, context: int | None = None,
                     bands: tuple[float, float] | None = None, scaling: str = "") -> go.Figure:
    """Wavelength 2π/θ_i of each dimension pair i (log scale): the model's θ_i per base (``inv_freq``: "full", and
    "sliding" for Gemma-3's window layers), the unscaled θ_i where the model scales them (``unscaled``, dashed;
    ``scaling``: its name), a dotted line at the model's ``context`` (max positions), and for the llama3 scaling
    its ``bands``: (original context / high_freq_factor, / low_freq_factor), wavelengths below the first kept, above
    the second divided by the factor, smoothly between."""
    fig = go.Figure()
    for name, values in inv_freq.items():
        y = wavelengths(values)
        fig.add_trace(go.Scatter(x=np.arange(len(y)), y=y, mode="lines+markers", name=BASE_NAMES.get(name, name),
                                 hovertemplate="pair %{x}: wavelength %{y:,.1f} positions<extra></extra>"))
    if unscaled is not None:
        y = wavelengths(unscaled)
        fig.add_trace(go.Scatter(x=np.arange(len(y)), y=y, mode="lines", line_dash="dash", name="unscaled θ_i",
                                 hovertemplate="pair %{x}: unscaled wavelength %{y:,.1f}<extra></extra>"))
    if context:
        fig.add_hline(y=context, line_dash="dot", line_color="#555",
                      annotation_text=f"{context:,} positions", annotation_position="top left")
    for edge in bands or ():
        fig.add_hline(y=edge, line_dash="dot", line_color="#bbb")
    title = "Wavelength of each dimension pair" + (f" ({scaling} scaling against unscaled)" if unscaled is not None
                                                   else "")
    fig.update_layout(title=title, xaxis_title="dimension pair i (dimensions i and i + d_k/2)",
                      yaxis_title="wavelength 2π/θ_i (positions)", yaxis_type="log", margin=MARGIN, height=380,
                      showlegend=True)
    return fig


def rotation_chart(rotated: Any, pairs: Sequence[int]) -> go.Figure:
    """The query q = (1, ..., 1) turned to each position (``rotated``: (P, d_k)), drawn in the planes ``pairs``:
    plane i holds dimensions i and i + d_k/2, and its point goes round a circle, one position at a time, at its own
    speed θ_i (plane 0 fastest)."""
    values = to_numpy(rotated)
    half = values.shape[1] // 2
    fig = go.Figure()
    for n, pair in enumerate(pairs):
        x, y = values[:, pair], values[:, pair + half]
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines+markers", name=f"pair {pair}", marker_size=5,
                                 line_color=PAIR_COLOURS[n % len(PAIR_COLOURS)], text=list(range(len(x))),
                                 hovertemplate=f"pair {pair}, position %{{text}}: (%{{x:.2f}}, %{{y:.2f}})"
                                               "<extra></extra>"))
    fig.update_layout(title="One query turned along the positions", xaxis_title="dimension i",
                      yaxis_title="dimension i + d_k/2", margin=MARGIN, height=380, showlegend=True,
                      yaxis_scaleanchor="x")
    return fig


def score_curves(scores: Any, queries: Sequence[int]) -> dict[int, np.ndarray]:
    """Per query position m: the scores q_m · k_n of keys n = m, m - 1, ..., 0 (index: the distance m - n)."""
    values = to_numpy(scores)
    return {m: values[m, m::-1] for m in queries}


def score_chart(scores: Any, queries: Sequence[int]) -> go.Figure:
    """q_m · k_n against the distance m - n, one line per query position m (``scores``: (P, P), rows m): the lines
    coincide, since the score depends only on the distance."""
    fig = go.Figure()
    for m, row in score_curves(scores, queries).items():
        fig.add_trace(go.Scatter(x=np.arange(len(row)), y=row, mode="lines", name=f"query at position {m}",
                                 hovertemplate=f"query {m}, distance %{{x}}: score %{{y:.3f}}<extra></extra>"))
    fig.update_layout(title="q_m · k_n against the distance m - n", xaxis_title="distance m - n (keys before m)",
                      yaxis_title="q_m · k_n", margin=MARGIN, height=380, showlegend=True)
    return fig


def score_map(scores: Any) -> go.Figure:
    """The (P, P) scores q_m · k_n, causal cells only (keys after the query blank): constant along every
    diagonal."""
    values = to_numpy(scores).astype(float).copy()
    values[np.triu_indices_from(values, k=1)] = np.nan
    names = [str(i) for i in range(values.shape[0])]
    return heatmap(values, names, names, title="q_m · k_n for every query m and key n", x_title="key position n",
                   y_title="query position m", colorscale="RdBu_r", zmid=0.0, colorbar_title="score",
                   show_values=False)


def offset_spread(scores: Any, queries: Sequence[int]) -> float:
    """The largest difference between the query positions' curves over the distances they share: float rounding
    of the angles, where the score depends on the distance only."""
    curves = list(score_curves(scores, queries).values())
    shared = min(len(c) for c in curves)
    stack = np.stack([c[:shared] for c in curves])
    return float(np.abs(stack - stack[0]).max())
