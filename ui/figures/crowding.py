"""Tick labels that never overlap: on a crowded token axis only every k-th label is written.

A token axis writes one label per token (``ui.charts.ticks``, at most ``MAX_TICKS``). Whether they
fit depends on how wide the chart is drawn: the 13 source pieces of a sentence fit under a
full-width heatmap, not under one of Explain's small multiples (a quarter of it) or a chart in
half a page. Plotly turns x labels that collide (30 or 90 degrees) but never drops one, so at
1280 px the labels of those charts were drawn over each other (issue 23).

``thin_ticks`` keeps every k-th label of each axis with an explicit, evenly spaced tick array,
the smallest k at which neighbours are a label apart at the width the chart is drawn:

- x labels that do not fit level and that Plotly would turn (``tickangle`` unset or "auto") are set
  upright (-90 degrees): Plotly's own choice, 30 degrees, let long pieces ("▁because") run into
  their neighbours; upright they need one line's height; at an angle θ, that height / sin θ;
- x labels kept level (``tickangle=0``): the widest label plus Plotly's gap (0.3 of the font);
- y labels: one line's height.

Hovering a cell still names every token. The widths are those of the app's layout at a 1280 px
window with the sidebar open: the main column draws a chart 820 px wide, half of it (two
columns) about 400 px (measured in chromium).
"""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go

from ui.figures.text_size import LINE_HEIGHT, TICK_FONT_PX, text_lines, text_width

FULL_WIDTH_PX = 820  # a chart across the main column, 1280 px window, sidebar open
HALF_WIDTH_PX = 400  # a chart in one of two columns
DEFAULT_HEIGHT_PX = 450  # Plotly's default figure height


def label_pitch_px(labels: list[str], font_px: float, letter: str, angle: Any) -> float:
    """The distance two neighbouring labels need between their ticks so that they do not overlap."""
    line = font_px * LINE_HEIGHT * max((text_lines(label) for label in labels), default=1)
    if letter == "y":
        return line
    if angle == 0:
        return max((text_width(label, font_px) for label in labels), default=0.0) + 0.3 * font_px
    turned = abs(angle) % 180 if isinstance(angle, int | float) else 90  # unset or "auto": upright at worst
    if turned == 90:
        return line + 1.0
    return line / math.sin(math.radians(turned))


def step_needed(n_cells: float, room_px: float, ticks_every: float, pitch_px: float) -> int:
    """The smallest k such that every k-th tick (ticks ``ticks_every`` cells apart on an axis of ``n_cells``
    cells drawn ``room_px`` long) leaves ``pitch_px`` between labels."""
    if n_cells <= 0 or room_px <= 0 or ticks_every <= 0:
        return 1
    spacing = room_px * ticks_every / n_cells
    return max(1, math.ceil(pitch_px / spacing - 1e-9))


def thin_ticks(fig: go.Figure, width_px: float = FULL_WIDTH_PX, margins: dict[str, float] | None = None) -> bool:
    """Keep every k-th label of each crowded token axis of ``fig`` (changed in place); whether any was.
    ``margins`` (l, r, t, b in px; default the figure's own or Plotly's 80) leave the plot's size."""
    layout = fig.layout
    own = layout.margin
    margin = {side: float(getattr(own, side) if getattr(own, side) is not None else 80) for side in "lrtb"}
    margin.update(margins or {})
    plot = {"x": max(60.0, width_px - margin["l"] - margin["r"]),
            "y": max(60.0, (layout.height or DEFAULT_HEIGHT_PX) - margin["t"] - margin["b"])}
    base_font = layout.font.size or TICK_FONT_PX
    updates: dict[str, dict] = {}
    for axis in [*fig.select_xaxes(), *fig.select_yaxes()]:
        values, text = axis.tickvals, axis.ticktext
        if values is None or text is None or len(values) < 2 or len(values) != len(text):
            continue
        gaps = {round(float(b) - float(a), 9) for a, b in zip(values[:-1], values[1:], strict=True)}
        if len(gaps) != 1 or (every := gaps.pop()) <= 0:
            continue  # not evenly spaced: not a token axis of ui.charts.ticks
        letter = axis.plotly_name[0]
        cells = _cells(axis, values)
        domain = axis.domain or (0.0, 1.0)
        room = plot[letter] * (domain[1] - domain[0])
        labels, font = [str(t) for t in text], axis.tickfont.size or base_font
        update: dict[str, Any] = {}
        angle = axis.tickangle
        if letter == "x" and angle in (None, "auto") and step_needed(
                cells, room, every, label_pitch_px(labels, font, letter, 0)) > 1:
            angle = update["tickangle"] = -90  # Plotly would turn them 30 degrees, where long ones still collide
        k = step_needed(cells, room, every, label_pitch_px(labels, font, letter, angle))
        if k > 1:
            update.update(tickvals=list(values)[::k], ticktext=labels[::k])
        if update:
            updates[axis.plotly_name] = update
    if updates:
        fig.update_layout(updates)
    return bool(updates)


def _cells(axis: Any, values: Any) -> float:
    """How many cells (token positions) the axis spans: its range if set, else up to the last tick."""
    if axis.range is not None:
        low, high = (float(v) for v in axis.range)
        return abs(high - low)
    return float(values[-1]) - float(values[0]) + 1.0
