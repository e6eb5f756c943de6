"""Pure chart functions for the app: arrays or a trace in, a Plotly figure or a pandas table out.

One module per concept, named like the page that shows it (``model``, ``tokens``,
``embeddings``, ``positions``, ``attention``, ``masks``, ``decoding``, ``training``). Nothing here imports
Streamlit or runs a model, so tests call these functions directly.

Token axes are numeric positions with the tokens as tick labels: a categorical axis
would merge two cells whose tokens are equal ("a" twice in "banana"). Plotly reads its
text as HTML, where "<s>" starts a strike-through, so every token shown goes through
``label`` first. The helpers below are shared by the modules.

A chart function only builds its figure. How it reaches the browser (margins that fit its labels, the
house style, the projector's restyle, the cache of built figures, panels laid side by side) is
``ui.figures``'s, which no module here imports.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

MARGIN = dict(l=10, r=10, t=50, b=10)
CELL_FONT_PX = 12  # numbers written into heatmap cells (Plotly's automatic size shrank them to about 7 px)
MAX_CELLS_PER_SIDE_WITH_TEXT = 12  # larger heatmaps show their numbers on hover only: they would not fit


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


def format_value(value: float, digits: int = 3) -> str:
    """A cell's number for hover and in-cell text; -inf is what masking writes into scores."""
    if np.isneginf(value):
        return "-inf"
    if np.isnan(value):
        return ""
    return f"{value:.{digits}f}"


SMALL = 1e-4  # below this a table writes a number in scientific notation: 1e-60 in fixed point is 60 digits


def readable_number(value: float, digits: int = 4) -> str:
    """A number for a table a reader reads: ``digits`` decimals, scientific notation where its size is below
    ``SMALL`` (a softmax weight of 1e-60 is "1.00e-60", not sixty zeros), "-inf" for a masked score, "" for NaN."""
    value = float(value)
    if np.isnan(value):
        return ""
    if np.isinf(value):
        return "-inf" if value < 0 else "inf"
    if value != 0 and abs(value) < SMALL:
        return f"{value:.2e}"
    return f"{value:.{digits}f}"


def readable_frame(frame: pd.DataFrame, digits: int = 4) -> Any:
    """``frame`` for st.dataframe with its float columns shown by ``readable_number`` (a pandas Styler: the values
    stay numbers, so a column still sorts by size and the CSV download keeps every digit)."""
    floats = [c for c in frame.columns if pd.api.types.is_float_dtype(frame[c])]
    return frame.style.format(lambda v: readable_number(v, digits), subset=floats)


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
    ``show_values`` writes every number into its cell, two decimals at CELL_FONT_PX (default:
    only when no side is longer than MAX_CELLS_PER_SIDE_WITH_TEXT, where they fit).
    """
    z = to_numpy(matrix)
    if z.ndim != 2:
        raise ValueError(f"a heatmap needs a 2-D matrix, got shape {z.shape}")
    rows, cols = z.shape
    if len(y_labels) != rows or len(x_labels) != cols:
        raise ValueError(f"{rows}x{cols} matrix but {len(y_labels)} row and {len(x_labels)} column labels")
    if show_values is None:
        show_values = max(rows, cols) <= MAX_CELLS_PER_SIDE_WITH_TEXT
    fig = go.Figure(heatmap_trace(z, x_labels, y_labels, x_title=x_title, y_title=y_title, colorscale=colorscale,
                                  zmin=zmin, zmax=zmax, zmid=zmid, show_values=show_values))
    fig.data[0].colorbar = dict(title=colorbar_title)
    # An empty title still takes its room in Plotly (about 40 px): no title at all instead.
    fig.update_xaxes(**ticks(x_labels), title_text=x_title or None)
    fig.update_yaxes(**ticks(y_labels), title_text=y_title or None, autorange="reversed")
    fig.update_layout(title=title, margin=MARGIN, height=height or min(800, 220 + 28 * rows))
    return fig


MAX_TICKS = 40  # tick labels written along one axis
MAX_HOVER_CELLS = 2500  # cells whose hover text names their tokens


def ticks(tokens: Sequence[object]) -> dict[str, list]:
    """Tick positions and labels for a token axis; beyond MAX_TICKS only every k-th is written
    (hovering still names every cell)."""
    step = max(1, -(-len(tokens) // MAX_TICKS))
    positions = list(range(0, len(tokens), step))
    return {"tickvals": positions, "ticktext": [label(tokens[i]) for i in positions]}


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
    name_cells: bool = True,
) -> go.Heatmap:
    """The heatmap trace alone, at positions 0..n-1, for figures with several panels.

    Hover names the row and column tokens of a cell; for a matrix of more than MAX_HOVER_CELLS
    cells (a positional table), or with ``name_cells=False`` (a figure of many panels), it gives their
    positions instead, which keeps the page fast: a string per cell is serialised in Python on every
    rerun (0.1-0.3 s for 15,000 cells), the numbers alone cost nothing. For the same reason a masked
    cell (-inf) reads "-inf" in its hover only where the cells are named; beyond, it is just blank.
    """
    z = to_numpy(matrix)
    rows, cols = z.shape
    extra: dict[str, Any] = {}
    # positions labelled by their own numbers need no name per cell: the hover by position reads the same
    numbered = list(map(str, x_labels)) == list(map(str, range(cols))) and \
        list(map(str, y_labels)) == list(map(str, range(rows)))
    named = name_cells and rows * cols <= MAX_HOVER_CELLS and not numbered
    if named:
        hover = np.empty((rows, cols, 2), dtype=object)
        hover[:, :, 0] = np.asarray(labels(y_labels), dtype=object)[:, None]
        hover[:, :, 1] = np.asarray(labels(x_labels), dtype=object)[None, :]
        extra["customdata"] = hover
        names = f"{y_title} %{{customdata[0]}}<br>{x_title} %{{customdata[1]}}"
    else:
        names = f"{y_title} %{{y}}<br>{x_title} %{{x}}"
    if show_values or (named and np.isneginf(z).any()):  # "-inf" must be readable where the cell is blank
        extra["text"] = [[format_value(v, 2 if show_values else 3) for v in row] for row in z]
        value = "%{text}"
    else:
        value = "%{z:.3f}"
    if show_values:
        extra["textfont"] = dict(size=CELL_FONT_PX)
    color = dict(coloraxis=coloraxis) if coloraxis else dict(colorscale=colorscale, zmin=zmin, zmax=zmax, zmid=zmid)
    z = np.where(np.isfinite(z), z, np.nan)
    if not named:  # a large or numbered grid: float32 halves the bytes sent and parsed (hover shows 3 decimals)
        z = z.astype(np.float32)
    return go.Heatmap(
        z=z, x=list(range(cols)), y=list(range(rows)),
        texttemplate="%{text}" if show_values else None, hovertemplate=f"{names}<br>{value}<extra></extra>",
        xgap=1 if cols <= 40 else 0, ygap=1 if rows <= 40 else 0, **color, **extra,
    )


MAX_CLICKABLE_CELLS = 2500  # larger heatmaps get no click layer (the browser would carry every marker)


def clickable_cells(fig: go.Figure) -> go.Figure:
    """Make the cells of every heatmap panel of ``fig`` clickable, in place.

    Plotly heatmaps emit no selection events (streamlit/streamlit#8760), so invisible markers sit
    on every cell centre, carrying the heatmap's own hover text and [row, column] as customdata;
    ``st.plotly_chart(on_select="rerun", selection_mode="points")`` then reports the clicked cell.
    A panel of more than MAX_CLICKABLE_CELLS cells is left as it is.
    """
    layers = [_click_layer(trace) for trace in fig.data if isinstance(trace, go.Heatmap)]
    layers = [layer for layer in layers if layer is not None]
    if layers:
        fig.add_traces(layers)
        fig.update_layout(clickmode="event+select")
    return fig


def clickable_panels(fig: go.Figure, names: Sequence[str] | None = None) -> go.Figure:
    """Make each heatmap panel of ``fig`` clickable as a whole, in place: one invisible marker at its
    centre and no hover distance limit, so a click anywhere in a panel picks that panel's marker (the
    nearest one). Cheaper for the browser than a marker per cell in a grid of many panels; the panels'
    own hover then says which panel it is (``names``, default "panel i"), not the cell."""
    heatmaps = [trace for trace in fig.data if isinstance(trace, go.Heatmap)]
    layers = []
    for i, heat in enumerate(heatmaps):
        rows, cols = np.asarray(heat.z, dtype=float).shape
        name = names[i] if names is not None else f"panel {i}"
        layers.append(_invisible_markers(heat, [(cols - 1) / 2], [(rows - 1) / 2], [i], [f"{name}: click to open"]))
    if layers:
        fig.add_traces(layers)
        fig.update_layout(clickmode="event+select", hoverdistance=-1)
    return fig


def _click_layer(heat: go.Heatmap) -> go.Scatter | None:
    z = np.asarray(heat.z, dtype=float)
    rows, cols = z.shape
    if rows * cols > MAX_CLICKABLE_CELLS:
        return None
    row, col = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    names = heat.customdata
    text = [
        (f"{names[r][c][0]} · {names[r][c][1]}" if names is not None else f"{r} · {c}")
        + ("" if np.isnan(z[r, c]) else f"<br>{z[r, c]:.3f}")
        for r, c in zip(row.ravel(), col.ravel(), strict=True)
    ]
    return _invisible_markers(heat, col.ravel(), row.ravel(), np.stack([row.ravel(), col.ravel()], axis=1), text)


def _invisible_markers(heat: go.Heatmap, x: Any, y: Any, customdata: Any, hovertext: Any) -> go.Scatter:
    """Transparent markers on ``heat``'s axes that hover and take clicks in its place: ``heat`` stops
    hovering, since a hovered heatmap cell would take the click and heatmaps report no selection; its
    names per cell go too (the markers carry the hover text), as every string per cell costs on each rerun."""
    heat.update(hoverinfo="skip", hovertemplate=None, customdata=None)
    return go.Scatter(
        x=x, y=y, mode="markers", customdata=customdata, marker=dict(size=10, color="rgba(0,0,0,0)"),
        hovertext=hovertext, hovertemplate="%{hovertext}<extra></extra>", showlegend=False, name="click",
        selected=dict(marker=dict(color="rgba(0,0,0,0)")), unselected=dict(marker=dict(opacity=0)),
        xaxis=heat.xaxis, yaxis=heat.yaxis,
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
