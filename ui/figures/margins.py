"""Margins that already fit a figure's labels, so that the browser lays it out once, not twice.

Plotly grows a figure's margins to fit its tick labels, axis titles, colour bars and legends
(``automargin``, ``margin.autoexpand``), but it learns their sizes only by drawing them: it draws
the whole figure, measures, and draws it all again with the larger margins. Every chart of the app
has small margins (``MARGIN``) and labels beyond them, so every chart was drawn twice. Measured
in chromium on this project's 2-core machine with the app's own figures, drawing a page's figures
took 2-5 times as long as with margins that already fit and no overflow check (measured: docs/benchmarks.md,
"Plotly figures with fitted margins").

``fit_margins`` estimates, from the figure's own text and ranges, how much room each side needs and
sets those margins, a little generously. Plotly's automatic growth stays on: a side estimated too
small still gets its room, at the old price of a second layout. The estimate follows Plotly's
layout rules with the Streamlit theme's sizes (12 px tick labels, 14 px titles, title standoffs of
20-24 px, 5 px ticks), calibrated on every chart of every page in chromium; text widths come from
``ui.figures.text_size``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from ui.figures.cell_text import fit_cell_text
from ui.figures.crowding import FULL_WIDTH_PX, thin_ticks
from ui.figures.text_size import LINE_HEIGHT, TICK_FONT_PX, text_lines, text_width

TITLE_FONT_PX = 14
LABEL_GAP_PX = 16  # from the axis line to its tick labels: 5 px ticks and the labels' own offset
Y_TITLE_STANDOFF_PX = 24
X_TITLE_STANDOFF_PX = 20
SLACK_PX = 7  # added to every side that has something to fit: rounding, font differences
SLACK_PER_FONT_PX = 2.5  # and this per px of text above 12: Plotly's own gaps grow with the font (presentation)
NOMINAL_FIGURE_WIDTH_PX = 440  # the narrowest chart drawn: one in half of the wide layout's main column
UNTITLED_PAD_PX = 10  # measured: an axis without a title pushes 10 px further than its labels
PUSH_PAD_PX = 12  # Plotly's Plots.autoMargin adds this to every push, e.g. an x label past its axis's end
COLORBAR_THICKNESS_PX = 30
COLORAXIS_EXTRA_PX = 22  # measured: a shared colour axis's bar is this much wider than a trace's own
COLORBAR_PAD_PX = 10
LEGEND_SYMBOL_PX = 40  # a legend entry's line sample and gaps
LEGEND_PAD_PX = 8
PLOT_WIDTH_PX = 800  # a wide plot area, for positions given as fractions of it (a legend at x = 1.02)
PLOT_HEIGHT_PX = 250  # a plot's height where the figure sets none (Plotly's 450 px less its default margins)


def _turned(width: float, height: float, degrees: float) -> float:
    """The height of a text box of ``width`` x ``height`` turned by ``degrees``."""
    radians = math.radians(abs(degrees))
    return width * math.sin(radians) + height * math.cos(radians)


def number_labels(low: float, high: float) -> list[str]:
    """The labels Plotly's automatic ticks write for the range [low, high] (about six nice steps)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return ["0"]
    low, high = min(low, high), max(low, high)
    span = high - low or abs(high) or 1.0
    magnitude = 10 ** math.floor(math.log10(span / 6))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= span / 6)
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    values = [low, high, math.ceil(low / step) * step, math.floor(high / step) * step]
    return [_format_number(v, decimals) for v in values]


def _format_number(value: float, decimals: int) -> str:
    if abs(value) >= 10_000:  # Plotly's SI suffixes: 12k, 1.5M
        for suffix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
            if abs(value) >= scale:
                return f"{value / scale:.3g}{suffix}"
    return f"{value:.{decimals}f}".replace("−", "-")


def _finite_range(values: Iterable[Any]) -> tuple[float, float] | None:
    numbers = []
    for array in values:
        try:
            data = np.asarray(array, dtype=float).ravel()
        except (TypeError, ValueError):  # text categories
            continue
        data = data[np.isfinite(data)]
        if data.size:
            numbers += [float(data.min()), float(data.max())]
    return (min(numbers), max(numbers)) if numbers else None


def _title_text(title: Any) -> str:
    if isinstance(title, dict):
        return str(title.get("text") or "")
    return str(title or "")


def _has_title(title: Any) -> bool:
    return title is not None and (not isinstance(title, dict) or title.get("text") is not None)


def _font_size(font: Any, default: float) -> float:
    size = font.get("size") if isinstance(font, dict) else None
    return float(size) if isinstance(size, int | float) else default


class _Axis:
    """What one axis writes beside the plot: its tick labels and title, and where it sits."""

    def __init__(self, name: str, spec: dict, traces: Sequence[dict], layout_font: float) -> None:
        self.name = name
        self.spec = spec
        self.letter = name[0]
        self.domain = spec.get("domain") or [0.0, 1.0]
        self.visible = spec.get("visible", True) is not False and spec.get("showticklabels", True) is not False
        self.tick_px = _font_size(spec.get("tickfont"), layout_font)
        self.title = _title_text(spec.get("title")) if _has_title(spec.get("title")) else None
        self.title_px = _font_size(spec["title"].get("font") if isinstance(spec.get("title"), dict) else None,
                                   max(TITLE_FONT_PX, layout_font + 2))
        self.labels = self._labels(traces)

    def _labels(self, traces: Sequence[dict]) -> list[str]:
        if self.spec.get("ticktext") is not None:
            return [str(t) for t in self.spec["ticktext"]]
        if self.spec.get("range") is not None:
            low, high = self.spec["range"]
            return number_labels(float(low), float(high))
        values = [t[self.letter] for t in traces if t.get(self.letter) is not None]
        if not values and any(t.get("type") in ("heatmap", "contour") for t in traces):
            values = [np.arange(np.asarray(t["z"]).shape[1 if self.letter == "x" else 0]) for t in traces
                      if t.get("z") is not None]
        words = [str(v) for array in values for v in np.asarray(array, dtype=object).ravel()
                 if isinstance(v, str)]
        if words or self.spec.get("type") == "category":  # a category axis writes its values
            return words or [str(v) for array in values for v in np.asarray(array, dtype=object).ravel()]
        if any(t.get("type") == "bar" for t in traces):
            values.append([0.0])  # bars start at zero
        found = _finite_range(values)
        return number_labels(*found) if found is not None else []

    def label_extent(self, spacing_px: float) -> float:
        """How far the tick labels reach out from the axis line, in px."""
        if not self.visible or not self.labels:
            return 0.0
        width = max(text_width(label, self.tick_px) for label in self.labels)
        height = self.tick_px * LINE_HEIGHT * max(text_lines(label) for label in self.labels)
        if self.letter == "y":
            return width
        angle = self.spec.get("tickangle")
        if not isinstance(angle, int | float):  # "auto": Plotly turns the labels 30 or 90 degrees when they collide
            angle = 0 if width + 0.3 * self.tick_px <= spacing_px else 30 if spacing_px >= 2 * height else 90
            if angle:  # Plotly may settle on either turn: room for the larger
                return max(width, _turned(width, height, 30)) + 4
        return _turned(width, height, angle)

    def outer_px(self, spacing_px: float) -> float:
        """The room the axis needs outside the plot: ticks, labels, title."""
        room = LABEL_GAP_PX + self.label_extent(spacing_px) if self.visible else 0.0
        if self.title is not None:  # Plotly keeps room for a title even when its text is empty
            standoff = Y_TITLE_STANDOFF_PX if self.letter == "y" else X_TITLE_STANDOFF_PX
            return room + standoff + self.title_px * LINE_HEIGHT * text_lines(self.title)
        return room + UNTITLED_PAD_PX if room else 0.0

    def overhang_px(self) -> float:
        """How far an x axis's last tick label, centred on the plot's edge, reaches beyond it: half its width when
        level, half its line's height when upright (``ui.figures.crowding`` stands crowded labels up)."""
        if self.letter != "x" or not self.visible or not self.labels:
            return 0.0
        angle = self.spec.get("tickangle")
        if angle in (None, 0):
            return text_width(self.labels[-1], self.tick_px) / 2
        if isinstance(angle, int | float) and abs(angle) == 90:
            return self.tick_px * LINE_HEIGHT * text_lines(self.labels[-1]) / 2
        return 0.0


def needed_margins(fig: go.Figure) -> dict[str, float]:
    """Pixels each side (l, r, b) needs for what Plotly draws there; 0 where nothing is."""
    layout = fig.layout.to_plotly_json()
    data = [trace.to_plotly_json() for trace in fig.data]
    layout_font = _font_size(layout.get("font"), TICK_FONT_PX)
    need = {"l": 0.0, "r": 0.0, "b": 0.0}

    axes: dict[str, _Axis] = {}
    names = {key for key in layout if re.fullmatch(r"[xy]axis\d*", key)}
    for trace in data:
        names |= {_axis_key(trace.get("xaxis", "x")), _axis_key(trace.get("yaxis", "y"))}
    for name in sorted(names):
        on_axis = [t for t in data if _axis_key(t.get(f"{name[0]}axis", name[0])) == name]
        axes[name] = _Axis(name, layout.get(name) or {}, on_axis, layout_font)

    def across(axis: _Axis) -> list[float]:  # the domain of the axis it is anchored to
        anchor = axes.get(_axis_key(axis.spec.get("anchor") or ("y" if axis.letter == "x" else "x")))
        return anchor.domain if anchor is not None else [0.0, 1.0]

    for axis in axes.values():  # left and right first: they decide how wide the plot is
        if axis.letter == "y" and across(axis)[0] <= 0.01:
            side = "r" if axis.spec.get("side") == "right" else "l"
            need[side] = max(need[side], axis.outer_px(0.0))
        overhang = axis.overhang_px()  # 0 but for an x axis with labels
        if overhang > 0:
            # Plotly pushes the figure's right margin by how far any x axis's labels reach past that axis's own end
            # (a panel's in the middle too), plus its pad: 15 -> 17 px on Masks' five panels drew them twice
            need["r"] = max(need["r"], overhang + PUSH_PAD_PX)
    need["r"] = max(need["r"], _colorbars_px(layout, data, layout_font))
    legend_side, legend_px = _legend_px(layout, data, layout_font)
    if legend_side == "r":
        need["r"] = max(need["r"], legend_px)

    plot_width = max(100.0, NOMINAL_FIGURE_WIDTH_PX - need["l"] - need["r"])
    for axis in axes.values():  # then the bottom: whether the x labels turn depends on the room between them
        if axis.letter == "x" and across(axis)[0] <= 0.01 and axis.spec.get("side", "bottom") == "bottom":
            spacing = plot_width * (axis.domain[1] - axis.domain[0]) / max(1, len(axis.labels))
            need["b"] = max(need["b"], axis.outer_px(spacing))
    if legend_side == "b+":
        need["b"] += legend_px
    elif legend_side == "b":
        need["b"] = max(need["b"], legend_px)
    return need


def _axis_key(ref: str) -> str:
    """"x2" -> "xaxis2", "y" -> "yaxis"."""
    return f"{ref[0]}axis{ref[1:]}"


def _colorbars_px(layout: dict, data: Sequence[dict], layout_font: float) -> float:
    """Room right of the plot for colour bars that stand there (x at or beyond the right edge)."""
    bars: list[tuple[dict, tuple[float, float] | None, float]] = []
    for trace in data:
        if trace.get("type") not in ("heatmap", "contour", "histogram2d") or trace.get("showscale") is False:
            continue
        if trace.get("coloraxis"):
            continue
        low, high = trace.get("zmin"), trace.get("zmax")
        found = (low, high) if low is not None and high is not None else _finite_range([trace.get("z", [])])
        bars.append((trace.get("colorbar") or {}, found, 0.0))
    used = {t.get("coloraxis") for t in data if t.get("coloraxis")}
    for name in used:
        axis = layout.get(name) or {}
        if axis.get("showscale") is False:
            continue
        low, high = axis.get("cmin"), axis.get("cmax")
        found = (low, high) if low is not None and high is not None else _finite_range(
            [t.get("z", []) for t in data if t.get("coloraxis") == name])
        bars.append((axis.get("colorbar") or {}, found, COLORAXIS_EXTRA_PX))
    room = 0.0
    for bar, found, extra in bars:
        x = bar.get("x", 1.02)
        if x < 0.99:  # a bar placed beside an inner panel: inside the plot
            continue
        labels = number_labels(*found) if found is not None else ["0.00"]
        tick_px = _font_size(bar.get("tickfont"), layout_font)
        thickness = bar.get("thickness", COLORBAR_THICKNESS_PX)
        box = thickness + 3 + max(text_width(t, tick_px) for t in labels) + 2 * COLORBAR_PAD_PX
        if _has_title(bar.get("title")):  # a title above the bar, wider than it
            title_px = _font_size(bar["title"].get("font") if isinstance(bar.get("title"), dict) else None,
                                  max(TITLE_FONT_PX, layout_font + 2))
            box = max(box, text_width(_title_text(bar["title"]), title_px) + 24)
        room = max(room, (x - 1.0) * PLOT_WIDTH_PX + box + extra + COLORBAR_PAD_PX)
    return room


def _plot_height_px(layout: dict) -> float:
    """The plot area's height: the figure's own height less its top and bottom margins (Plotly's defaults where
    it sets none), or ``PLOT_HEIGHT_PX`` for a figure without a height."""
    if not layout.get("height"):
        return PLOT_HEIGHT_PX
    margin = layout.get("margin") or {}
    return max(0.0, float(layout["height"]) - float(margin.get("t", 100)) - float(margin.get("b", 80)))


def _legend_px(layout: dict, data: Sequence[dict], layout_font: float) -> tuple[str, float]:
    """Which side a legend takes and how much of it."""
    entries = [t.get("name") or "" for t in data if t.get("showlegend") is not False and (
        t.get("showlegend") is True or t.get("name"))]
    shown = layout.get("showlegend")
    if shown is False or not entries or (shown is None and len(entries) < 2 and not layout.get("legend")):
        return "r", 0.0
    legend = layout.get("legend") or {}
    size = _font_size(legend.get("font"), layout_font)
    widths = [LEGEND_SYMBOL_PX + text_width(label, size) for label in entries]
    if legend.get("orientation") == "h":  # rows of entries below the plot
        rows = 1 + int(sum(widths) // (NOMINAL_FIGURE_WIDTH_PX - 100))
        height = rows * (size * LINE_HEIGHT + LEGEND_PAD_PX) + 2 * LEGEND_PAD_PX
        below = max(0.0, -float(legend.get("y", -0.1))) * _plot_height_px(layout)  # y: a fraction of the plot
        if legend.get("yanchor") == "bottom":  # hung from a point below the plot
            return "b", below
        return "b+", height + below  # under the x axis
    return "r", 0.02 * PLOT_WIDTH_PX + max(widths) + 2 * LEGEND_PAD_PX


def fit_margins(fig: go.Figure, width_px: float = FULL_WIDTH_PX) -> go.Figure:
    """Thin crowded token axes for a chart drawn ``width_px`` wide (``ui.figures.crowding``), then set ``fig``'s
    left, right and bottom margins to what its labels need (never below its own), keep heatmap cell text only where
    it fits (``ui.figures.cell_text``) and mark it fitted; returns it. It changes ``fig``: call it on a figure
    nobody else holds yet."""
    _pin_colorbars(fig)
    need = needed_margins(fig)
    font = _font_size(fig.layout.font.to_plotly_json(), TICK_FONT_PX)
    slack = SLACK_PX + SLACK_PER_FONT_PX * max(0.0, font - TICK_FONT_PX)
    if thin_ticks(fig, width_px, {side: need[side] + slack for side in ("l", "r", "b") if need[side] > 0}):
        need = needed_margins(fig)  # fewer labels may need less room
    margin = fig.layout.margin
    update = {}
    for side in ("l", "r", "b"):
        own = getattr(margin, side)
        own = 80 if own is None else own  # Plotly's default margins
        if need[side] > 0 and need[side] + slack > own:
            update[side] = math.ceil(need[side] + slack)
    top = _top_px(fig.layout.to_plotly_json(), font)
    if top > (margin.t if margin.t is not None else 100):  # Plotly's default top margin
        update["t"] = math.ceil(top)
    if update:
        fig.update_layout(margin=update)
    _space_colorbar_ticks(fig)
    fit_cell_text(fig, width_px)  # numbers in heatmap cells only where the cells, now sized, hold them
    # Labels that fit need no check: Plotly's default ("hide past div") measures every tick label's box
    # to hide those past the figure's edge, 15-25% of drawing a page's figures.
    fig.update_xaxes(ticklabeloverflow="allow")
    fig.update_yaxes(ticklabeloverflow="allow")
    fig._margins_fitted = True  # a plain attribute: Plotly never sends it to the browser
    return fig


TEXT_BOX_EM = 1.2  # an SVG text line's box: its font's ascent and descent
TITLE_GAP_PX = 3


def _top_px(layout: dict, layout_font: float) -> float:
    """The top margin a figure's title needs above the titles of its top row of panels (annotations standing on a
    panel's top edge): Plotly centres the title in the top margin, so the margin holds the panel titles' height
    twice and the title's once (at 50 px, presentation mode's 20 px title ran into 16 px panel titles)."""
    title = layout.get("title") or {}
    if not _title_text(title):
        return 0.0
    tops = [_font_size(a.get("font"), layout_font) * TEXT_BOX_EM * text_lines(str(a.get("text") or ""))
            for a in layout.get("annotations") or () if a.get("yref") == "paper" and a.get("yanchor") == "bottom"
            and float(a.get("y") or 0) >= 0.99]
    if not tops:
        return 0.0
    title_px = _font_size(title.get("font"), max(16.0, layout_font + 4)) * TEXT_BOX_EM * text_lines(_title_text(title))
    return 2 * (max(tops) + TITLE_GAP_PX) + title_px


def _space_colorbar_ticks(fig: go.Figure) -> None:
    """At most as many colour-bar ticks as the bar's length holds a label and a line's gap apart: Plotly picks them
    by the bar's length alone, and a short bar (a heatmap of two rows) at 14 px wrote "-0.5" into "0"."""
    height = float(fig.layout.height or 450)
    plot = max(1.0, height - float(fig.layout.margin.t or 0) - float(fig.layout.margin.b or 0))
    font = _font_size(fig.layout.font.to_plotly_json(), TICK_FONT_PX)
    bars = [trace.colorbar for trace in fig.data if trace.type in ("heatmap", "contour") and not trace.coloraxis]
    bars += [fig.layout[name].colorbar for name in {t.coloraxis for t in fig.data if getattr(t, "coloraxis", None)}]
    for bar in bars:
        size = bar.tickfont.size or font
        length = plot * (bar.len if bar.len is not None else 0.75)  # Streamlit's theme draws bars 0.75 long
        if bar.nticks is None:
            bar.nticks = max(2, int(length // (2 * size * LINE_HEIGHT)))


def _pin_colorbars(fig: go.Figure) -> None:
    """Colour bars at Plotly's default place (x = 1.02 of the plot's width, which depends on the page) move to
    the plot's edge, x = 1, so that the room they need does not depend on how wide the chart is drawn."""
    for trace in fig.data:
        if trace.type in ("heatmap", "contour", "histogram2d") and trace.colorbar.x is None and not trace.coloraxis:
            trace.colorbar.x = 1.0
    for name in {trace.coloraxis for trace in fig.data if getattr(trace, "coloraxis", None)}:
        axis = fig.layout[name]
        if axis.colorbar.x is None:
            axis.colorbar.x = 1.0


def is_fitted(fig: go.Figure) -> bool:
    return bool(getattr(fig, "_margins_fitted", False))
