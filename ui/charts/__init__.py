"""Pure chart functions for the app: arrays or a trace in, a Plotly figure or a pandas table out.

One module per concept, named like the page that shows it (``model``, ``tokens``,
``embeddings``, ``attention``, ``masks``, ``decoding``, ``training``). Nothing here imports
Streamlit or runs a model, so tests call these functions directly.

Token axes are numeric positions with the tokens as tick labels: a categorical axis
would merge two cells whose tokens are equal ("a" twice in "banana"). Plotly reads its
text as HTML, where "<s>" starts a strike-through, so every token shown goes through
``label`` first. The helpers below are shared by the modules.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

MARGIN = dict(l=10, r=10, t=50, b=10)


def to_numpy(values: Any) -> np.ndarray:
    """A tensor (any device, any dtype) or array-like as a float64 numpy array."""
    if hasattr(values, "detach"):  # a torch tensor, without importing torch here
        values = values.detach().to("cpu").double().numpy()
    return np.asarray(values, dtype=float)


def label(token: object) -> str:
    """A token as Plotly must receive it to show it literally: "<s>" -> "&lt;s&gt;"."""
    return str(token).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def labels(tokens: Sequence[object]) -> list[str]:
    return [label(t) for t in tokens]


def format_value(value: float) -> str:
    """A cell's number for hover and in-cell text; -inf is what masking writes into scores."""
    if np.isneginf(value):
        return "-inf"
    if np.isnan(value):
        return ""
    return f"{value:.3f}"


def heatmap(
    matrix: Any,
    x_labels: Sequence[str],
    y_labels: Sequence[str],
    *,
    title: str = "",
    x_title: str = "key",
    y_title: str = "query",
    colorscale: str = "Blues",
    zmin: float | None = None,
    zmax: float | None = None,
    zmid: float | None = None,
    colorbar_title: str = "",
    show_values: bool | None = None,
    height: int | None = None,
) -> go.Figure:
    """A (rows, columns) matrix as a heatmap: rows top to bottom, tokens as tick labels.

    -inf cells (masked scores) are drawn blank and read "-inf" on hover and in the cell.
    ``show_values`` writes every number into its cell (default: only for small matrices).
    """
    z = to_numpy(matrix)
    if z.ndim != 2:
        raise ValueError(f"a heatmap needs a 2-D matrix, got shape {z.shape}")
    rows, cols = z.shape
    if len(y_labels) != rows or len(x_labels) != cols:
        raise ValueError(f"{rows}x{cols} matrix but {len(y_labels)} row and {len(x_labels)} column labels")
    if show_values is None:
        show_values = rows * cols <= 144
    fig = go.Figure(heatmap_trace(z, x_labels, y_labels, x_title=x_title, y_title=y_title, colorscale=colorscale,
                                  zmin=zmin, zmax=zmax, zmid=zmid, show_values=show_values))
    fig.data[0].colorbar = dict(title=colorbar_title)
    fig.update_xaxes(tickvals=list(range(cols)), ticktext=labels(x_labels), title_text=x_title)
    fig.update_yaxes(tickvals=list(range(rows)), ticktext=labels(y_labels), title_text=y_title, autorange="reversed")
    fig.update_layout(title=title, margin=MARGIN, height=height or min(800, 220 + 28 * rows))
    return fig


def heatmap_trace(
    matrix: Any,
    x_labels: Sequence[str],
    y_labels: Sequence[str],
    *,
    x_title: str = "key",
    y_title: str = "query",
    colorscale: str = "Blues",
    zmin: float | None = None,
    zmax: float | None = None,
    zmid: float | None = None,
    show_values: bool = False,
    coloraxis: str | None = None,
) -> go.Heatmap:
    """The heatmap trace alone, at positions 0..n-1, for figures with several panels."""
    z = to_numpy(matrix)
    rows, cols = z.shape
    text = [[format_value(v) for v in row] for row in z]
    hover = np.empty((rows, cols, 2), dtype=object)
    hover[:, :, 0] = np.asarray(labels(y_labels), dtype=object)[:, None]
    hover[:, :, 1] = np.asarray(labels(x_labels), dtype=object)[None, :]
    color = dict(coloraxis=coloraxis) if coloraxis else dict(colorscale=colorscale, zmin=zmin, zmax=zmax, zmid=zmid)
    return go.Heatmap(
        z=np.where(np.isfinite(z), z, np.nan), x=list(range(cols)), y=list(range(rows)),
        text=text, customdata=hover, texttemplate="%{text}" if show_values else None,
        hovertemplate=f"{y_title} %{{customdata[0]}}<br>{x_title} %{{customdata[1]}}<br>%{{text}}<extra></extra>",
        xgap=1, ygap=1, **color,
    )


def matrix_frame(matrix: Any, row_labels: Sequence[str], col_labels: Sequence[str]) -> pd.DataFrame:
    """The numbers behind a heatmap as a table (for CSV download); labels get their position
    ("3:a") so that repeated tokens keep their own row and column."""
    z = to_numpy(matrix)
    if z.shape != (len(row_labels), len(col_labels)):
        raise ValueError(f"matrix of shape {z.shape} for {len(row_labels)} rows and {len(col_labels)} columns")
    return pd.DataFrame(z, index=positional_labels(row_labels), columns=positional_labels(col_labels))


def positional_labels(tokens: Sequence[str]) -> list[str]:
    """["a", "b", "a"] -> ["0:a", "1:b", "2:a"]: unique labels for tables."""
    return [f"{i}:{t}" for i, t in enumerate(tokens)]
