"""Numbers written into heatmap cells only where they fit the cell as the chart is drawn.

A heatmap of ``ui.charts.heatmap`` writes its values into its cells when it has few of them (at most
``MAX_CELLS_PER_SIDE_WITH_TEXT`` a side), but whether "0.12" fits a cell depends on how wide the chart is drawn:
eleven columns across the main column leave 60 px a cell, in one of two columns 27 px, where 12 px numbers
(about 25 px wide) ran into each other (issue 45: Attention, Patching, Masks, Decoding). ``fit_cell_text`` measures
each heatmap's cell, from the figure's width, its margins and the axis domain of its panel, against the widest of
its texts (``ui.figures.text_size``) and keeps the text only where every one fits with ``CELL_PAD_PX`` to spare;
otherwise the cells show colour alone. Hover keeps every value: the hover template reads the same ``text``.
All or nothing per panel: hiding only the wider numbers ("-0.12" but not "0.12") would read as a pattern.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go

from ui.figures.text_size import LINE_HEIGHT, TICK_FONT_PX, text_width

CELL_PAD_PX = 4  # between a cell's text and each of its two edges, 2 px: the numbers stay apart
DEFAULT_HEIGHT_PX = 450  # Plotly's figure height where the figure sets none


def cell_px(fig: go.Figure, trace: Any, width_px: float) -> tuple[float, float]:
    """(width, height) in px of one cell of heatmap ``trace`` of ``fig`` drawn ``width_px`` wide with the figure's
    margins: the plot's size times the panel's domain, over the columns and rows, less the gaps between cells."""
    z = np.asarray(trace.z, dtype=object)
    rows, cols = (z.shape + (1, 1))[:2] if z.ndim >= 2 else (1, max(1, z.size))
    margin = fig.layout.margin
    side = {s: float(getattr(margin, s)) if getattr(margin, s) is not None else 80.0 for s in "lrtb"}
    plot_w = max(1.0, width_px - side["l"] - side["r"])
    plot_h = max(1.0, float(fig.layout.height or DEFAULT_HEIGHT_PX) - side["t"] - side["b"])
    spans = []
    for letter, ref in (("x", trace.xaxis or "x"), ("y", trace.yaxis or "y")):
        axis = fig.layout[f"{letter}axis{ref[1:]}"]
        domain = axis.domain if axis is not None and axis.domain is not None else (0.0, 1.0)
        spans.append(float(domain[1]) - float(domain[0]))
    return (plot_w * spans[0] / max(1, cols) - float(trace.xgap or 0),
            plot_h * spans[1] / max(1, rows) - float(trace.ygap or 0))


def text_fits(fig: go.Figure, trace: Any, width_px: float) -> bool:
    """Whether every text of heatmap ``trace`` fits its cell, drawn ``width_px`` wide."""
    cells = trace.text if trace.text is not None else ()  # a list, a tuple or a numpy array (of strings)
    texts = [str(t) for row in cells for t in (row if isinstance(row, list | tuple | np.ndarray) else [row])]
    if not texts:
        return True
    size = trace.textfont.size if isinstance(trace.textfont.size, int | float) else fig.layout.font.size
    size = float(size or TICK_FONT_PX)
    width, height = cell_px(fig, trace, width_px)
    widest = max(text_width(t, size) for t in texts)
    return widest + CELL_PAD_PX <= width and size * LINE_HEIGHT <= height


def fit_cell_text(fig: go.Figure, width_px: float) -> bool:
    """Drop the in-cell text of every heatmap of ``fig`` (changed in place) whose texts do not all fit their cells
    drawn ``width_px`` wide; whether any was dropped. The values stay in the hover."""
    dropped = False
    for trace in fig.data:
        if trace.type == "heatmap" and trace.texttemplate and not text_fits(fig, trace, width_px):
            trace.texttemplate = None
            dropped = True
    return dropped
