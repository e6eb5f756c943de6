"""Several single-panel figures laid out as one figure of panels (``side_by_side``).

In the browser every Plotly figure costs a layout and a draw of its own, while another panel in the same figure
costs little, so a page shows related panels as one figure. The room between rows of panels is estimated from the
panels' labels with ``ui.figures.text_size``, at presentation mode's sizes (the larger).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from ui.charts import MARGIN
from ui.figures.text_size import LINE_HEIGHT, text_lines, text_width


def side_by_side(figures: Sequence[go.Figure], *, cols: int = 2, spacing: float = 0.17) -> go.Figure:
    """Several single-panel figures as one figure of panels, each with its axes, title and colour bar.

    In the browser every Plotly figure costs about 0.3 s to draw on this project's 2-core machine, while
    another panel in the same figure costs little (measured: docs/benchmarks.md, "five heatmaps as five
    Plotly figures vs one"), so a page shows related panels as one figure. Each panel keeps its own
    colour scale: a colour bar is moved next to its panel. The axes' domains are laid out here rather
    than by ``make_subplots``, which cost about 100 ms of the server's rerun for five panels.
    """
    if not figures:
        raise ValueError("side_by_side needs at least one figure")
    n_cols = min(cols, len(figures))
    n_rows = -(-len(figures) // n_cols)
    titles = [_wrap_title(fig.layout.title.text or "", 90 // n_cols) for fig in figures]
    # Between two rows: the upper panels' x labels and titles, then the lower panels' own titles
    gap_px = (max((_below_px(fig) for fig in figures[: (n_rows - 1) * n_cols]), default=0.0)
              + max((_title_px(t) for t in titles[n_cols:]), default=0.0)) if n_rows > 1 else 0.0
    height = int(min(1400, max(fig.layout.height or 400 for fig in figures) * n_rows) + gap_px * (n_rows - 1))
    v_gap = min(0.45, gap_px / height) if n_rows > 1 else 0.0
    width = (1 - spacing * (n_cols - 1)) / n_cols
    tall = (1 - v_gap * (n_rows - 1)) / n_rows
    # A legend only where a panel asks for one (``showlegend=True``: T5's bias per head), each entry once: panels
    # that draw the same series (one ``legendgroup``) share it, and a click on it shows or hides them in every panel.
    legend = any(fig.layout.showlegend is True for fig in figures)
    layout: dict[str, Any] = {"height": height, "margin": MARGIN, "showlegend": legend, "annotations": []}
    data, entries = [], set()
    for i, fig in enumerate(figures):
        row, col = divmod(i, n_cols)
        x0, y1 = col * (width + spacing), 1 - row * (tall + v_gap)
        x1, y0 = min(1.0, x0 + width), max(0.0, y1 - tall)  # rounding must not leave [0, 1]
        suffix = "" if i == 0 else str(i + 1)
        x_axis = {**fig.layout.xaxis.to_plotly_json(), "domain": [x0, x1], "anchor": f"y{suffix}"}
        y_axis = {**fig.layout.yaxis.to_plotly_json(), "domain": [y0, y1], "anchor": f"x{suffix}"}
        if col > 0:  # the y title sits where the left neighbour's colour bar is: the first column's says it
            y_axis.pop("title", None)
            if _same_rows(figures[i - 1], fig):  # its rows are its left neighbour's: their labels say them
                y_axis["showticklabels"] = False
        layout[f"xaxis{suffix}"], layout[f"yaxis{suffix}"] = x_axis, y_axis
        layout["annotations"].append(dict(
            text=titles[i], x=(x0 + x1) / 2, y=y1, xref="paper",
            yref="paper", xanchor="center", yanchor="bottom", showarrow=False, font=dict(size=16)))
        for trace in fig.data:
            part = {**trace.to_plotly_json(), "xaxis": f"x{suffix}", "yaxis": f"y{suffix}"}
            if trace.type in ("heatmap", "contour") and part.get("showscale") is not False:
                part["colorbar"] = {**part.get("colorbar", {}), "x": x1 + 0.005, "xanchor": "left",
                                    "y": (y0 + y1) / 2, "yanchor": "middle", "len": y1 - y0, "thickness": 10}
            if legend:
                entry = part.get("legendgroup") or part.get("name")
                part["showlegend"] = part.get("showlegend") is not False and entry not in entries
                entries.add(entry)
            data.append(part)
    return go.Figure(data=data, layout=layout)


def _same_rows(left: go.Figure, right: go.Figure) -> bool:
    """Whether two panels side by side have the same labelled rows (same tick labels at the same places, as many
    rows, the same direction), so that the right one's y labels would repeat the left one's: each drawn axis of
    labels costs the browser a layout pass (``ui.figures.margins``)."""
    a, b = left.layout.yaxis, right.layout.yaxis
    if a.ticktext is None or a.showticklabels is False or (a.ticktext, a.tickvals, a.autorange) != (
            b.ticktext, b.tickvals, b.autorange):
        return False
    rows = [{len(t.z) if getattr(t, "z", None) is not None else -1 for t in f.data} for f in (left, right)]
    return rows[0] == rows[1] and len(rows[0]) == 1 and -1 not in rows[0]


# Sizes for the room between rows of panels, at presentation mode's sizes (the larger): 14 px tick labels, 16 px
# axis titles and panel titles (ui.figures.projector); labels that do not fit level stand upright.
_GAP_TICK_PX, _GAP_TITLE_PX, _GAP_LABEL_PAD_PX, _GAP_TITLE_STANDOFF_PX = 14, 16, 16, 22


def _below_px(fig: go.Figure) -> float:
    """How far a panel's x axis reaches below its plot: tick labels (upright, the widest) and the axis title."""
    axis = fig.layout.xaxis
    shown = [str(t) for t in axis.ticktext] if axis.ticktext is not None else ["0.00"]
    labels_px = max(text_width(t, _GAP_TICK_PX) for t in shown) if axis.showticklabels is not False else 0.0
    title = axis.title.text
    title_px = _GAP_TITLE_STANDOFF_PX + _GAP_TITLE_PX * LINE_HEIGHT * text_lines(title) if title else 0.0
    return _GAP_LABEL_PAD_PX + labels_px + title_px + 8


def _title_px(title: str) -> float:
    """The height of a panel's title (``side_by_side`` writes it above the panel at 16 px)."""
    return _GAP_TITLE_PX * LINE_HEIGHT * text_lines(title) + 6 if title else 0.0


def _wrap_title(title: str, width: int) -> str:
    """A panel title broken into lines of about ``width`` characters at spaces (Plotly's <br>)."""
    lines: list[str] = []
    for word in title.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "<br>".join(lines)
