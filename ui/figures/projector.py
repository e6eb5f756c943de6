"""Figures restyled for a projector, and the copies of shared figures each display variant needs.

In a lecture hall the back rows read a projector that washes out pale colours and thin lines, and nobody
there can hover. In presentation mode (``ui.state.presentation``) every figure is restyled on its way to the
browser (``for_projector``):

- no chart text under ``MIN_FONT_PX`` (titles, ticks, legends, colour bars, text in cells and on markers),
- text that Plotly would shrink to fit (bar values) kept at ``MIN_FONT_PX`` (``uniformtext``),
- lines at least ``MIN_LINE_PX`` wide, translucent lines raised towards full strength (``stronger``: the order
  of their opacities, which may encode a weight, is kept), larger markers,
- the pale-to-dark sequential scales replaced by ``PROJECTOR_SCALE`` (Cividis: dark blue to bright yellow,
  readable on a washed-out projector and by colour-blind viewers; Nuñez, Anderton & Renslow 2018,
  "Optimizing colormaps with consideration for color vision deficiency"),
- the numbers of small heatmaps written into their cells, since hover is not available.

Figures are restyled as copies: the chart functions stay pure and the cached figures are never mutated.
``restyled`` keeps one copy per figure object and variant, so a figure of ``ui.figures.cache`` is restyled
(and baked, ``ui.figures.house_style``) once, not on every rerun.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import plotly.graph_objects as go

from ui.figures.crowding import HALF_WIDTH_PX
from ui.figures.house_style import baked
from ui.figures.margins import fit_margins, is_fitted
from ui.state.presentation import MIN_CHART_PX, PAGE_FONT_PX

MIN_FONT_PX = 14
BASE_FONT_PX = 16
TITLE_FONT_PX = 20
MIN_LINE_PX = 3.0
PROJECTOR_SCALE = "Cividis"
MAX_CELLS_WITH_TEXT = 100  # heatmaps up to 10 x 10 get their numbers written in presentation mode
# Sequential scales that start near white: invisible on a projector.
_PALE_SCALES = {"blues", "greens", "greys", "reds", "purples", "oranges", "ylorrd", "ylgnbu", "bugn", "gnbu"}


# How wide a chart is drawn, by variant: a half-page column (two side by side at 1280 px with the sidebar
# open), and in presentation mode the page's width at 1024 px (sidebar shut) or a column of MIN_CHART_PX.
PROJECTOR_WIDTH_PX = 964  # the page's width at 1024 px with the sidebar shut
_WIDTHS = {"half": HALF_WIDTH_PX, "projector": PROJECTOR_WIDTH_PX, "projector-half": MIN_CHART_PX}
_RESTYLED: dict[tuple[int, str], go.Figure] = {}  # (id(figure), variant) -> its copy, dropped with the figure
_RESTYLED_LOCK = threading.Lock()


def restyled(fig: go.Figure, variant: str) -> go.Figure:
    """A copy of ``fig`` for ``variant`` ("projector", "projector-half": ``for_projector``; "half": ticks thinned
    for half the width), made once per figure object: a figure reused from ``ui.figures.cache`` is
    restyled once, not on every rerun (restyling copied and re-validated every figure; measured:
    docs/benchmarks.md, "warm rerun in presentation mode"). "plain" is the figure itself. A shared figure's copy is
    ``baked`` (``ui.figures.house_style``): the browser draws it once. Entries go with their figures."""
    key = (id(fig), variant)
    with _RESTYLED_LOCK:
        shown = _RESTYLED.get(key)
    if shown is None:
        if variant == "plain":
            shown = fig
        elif variant.startswith("projector"):
            shown = for_projector(fig, _WIDTHS[variant])
        else:
            shown = fit_margins(go.Figure(fig), _WIDTHS[variant])
        if is_fitted(fig):  # shared by every rerun (ui.figures.cache): baked once
            shown = baked(shown, PAGE_FONT_PX / 16 if variant.startswith("projector") else 1.0)
        with _RESTYLED_LOCK:
            if key not in _RESTYLED:  # figures are unhashable (they compare by content): keyed by identity
                _RESTYLED[key] = shown
                weakref.finalize(fig, _forget, key)
    return shown


def _forget(key: tuple[int, str]) -> None:
    with _RESTYLED_LOCK:
        _RESTYLED.pop(key, None)


def for_projector(fig: go.Figure, width_px: float = PROJECTOR_WIDTH_PX) -> go.Figure:
    """A copy of ``fig`` restyled for a projector (see the module docstring), its token axes thinned for a chart
    ``width_px`` wide; ``fig`` is untouched."""
    out = go.Figure(fig)
    out.update_layout(font=dict(size=BASE_FONT_PX), hoverlabel=dict(font_size=BASE_FONT_PX))
    out.update_layout(title_font_size=max(TITLE_FONT_PX, _size(out.layout.title.font.size)))
    out.for_each_xaxis(lambda a: a.update(tickfont_size=max(MIN_FONT_PX, _size(a.tickfont.size)),
                                          title_font_size=max(BASE_FONT_PX, _size(a.title.font.size))))
    out.for_each_yaxis(lambda a: a.update(tickfont_size=max(MIN_FONT_PX, _size(a.tickfont.size)),
                                          title_font_size=max(BASE_FONT_PX, _size(a.title.font.size))))
    out.update_layout(legend_font_size=max(MIN_FONT_PX, _size(out.layout.legend.font.size)),
                      uniformtext=dict(minsize=MIN_FONT_PX, mode="show"))  # no bar value shrunk to fit its bar
    for annotation in out.layout.annotations or ():  # subplot titles, labels written on the chart
        annotation.font.size = max(MIN_FONT_PX, _size(annotation.font.size))
    for trace in out.data:
        _restyle_trace(trace)
    if out.layout.coloraxis is not None and _is_pale(out.layout.coloraxis.colorscale):
        out.layout.coloraxis.colorscale = PROJECTOR_SCALE
    return fit_margins(out, width_px)  # larger text needs larger margins and room between labels


def _restyle_trace(trace: Any) -> None:
    if "textfont" in trace:
        sizes = trace.textfont.size
        if isinstance(sizes, list | tuple):
            trace.textfont.size = [max(MIN_FONT_PX, _size(s)) for s in sizes]
        else:
            trace.textfont.size = max(MIN_FONT_PX, _size(sizes))
    if "line" in trace and trace.line is not None and "width" in trace.line:
        trace.line.width = max(MIN_LINE_PX, _size(trace.line.width, 2.0) * 1.5)
        mode = (trace.mode if "mode" in trace else None) or "lines"
        if "opacity" in trace and trace.opacity is not None and trace.opacity < 1 and "lines" in mode:
            trace.opacity = stronger(trace.opacity)
    if "marker" in trace and trace.marker is not None and "size" in trace.marker:
        size = trace.marker.size
        if isinstance(size, int | float):
            trace.marker.size = size * 1.4
    if "colorbar" in trace:
        trace.colorbar.tickfont.size = max(MIN_FONT_PX, _size(trace.colorbar.tickfont.size))
    if "colorscale" in trace and _is_pale(trace.colorscale):
        trace.colorscale = PROJECTOR_SCALE
    if trace.type == "heatmap" and trace.z is not None:
        cells = sum(len(row) for row in trace.z) if len(trace.z) else 0
        if trace.texttemplate == "%{text}" and trace.text is not None:
            trace.text = [[_compact(cell) for cell in row] for row in trace.text]
        elif 0 < cells <= MAX_CELLS_WITH_TEXT and not trace.texttemplate:  # no hover in a lecture hall
            trace.text = [[_compact(cell) for cell in row] for row in trace.z]
            trace.texttemplate = "%{text}"
            trace.textfont.size = MIN_FONT_PX


def stronger(opacity: float) -> float:
    """A line's opacity for a projector: its square root (0.05 -> 0.22, 0.3 -> 0.55, 0.75 -> 0.87, 1 -> 1),
    so the faint lines show and the order of the opacities, which may encode a weight, is kept."""
    return float(opacity) ** 0.5


def _compact(cell: Any) -> Any:
    """A cell's number in as few characters as two decimals allow ("0.06" -> ".06", "-0.44" -> "-.44"),
    so that it fits its cell at 14 px; text that is not a number ("-inf", a token) is kept."""
    try:
        value = float(cell)
    except (TypeError, ValueError):
        return cell
    if value != value or value in (float("inf"), float("-inf")):  # NaN (a masked cell), +-inf
        return "" if value != value else cell
    text = f"{value:.2f}".replace("-0.00", "0.00")
    return text.replace("0.", ".", 1) if text.lstrip("-").startswith("0.") else text


def _size(value: Any, default: float = 12.0) -> float:
    """A font size or width that may be unset (None) or a list (per-point): its smallest number."""
    if isinstance(value, list | tuple):
        numbers = [v for v in value if isinstance(v, int | float)]
        return min(numbers) if numbers else default
    return float(value) if isinstance(value, int | float) else default


def _is_pale(scale: Any) -> bool:
    """Whether a colour scale is one of the white-to-colour sequential scales (by name or by its first colour)."""
    if isinstance(scale, str):
        return scale.lower() in _PALE_SCALES
    if isinstance(scale, list | tuple) and scale:
        first = str(scale[0][1]).replace(" ", "").lower()
        return first in {"rgb(247,251,255)", "rgb(255,255,255)", "#ffffff", "white", "rgb(247,252,245)",
                         "rgb(255,245,240)", "rgb(252,251,253)", "rgb(255,245,235)"}
    return False
