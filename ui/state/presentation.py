"""Presentation mode and chart export: every figure of the app passes through ``show_chart``.

In a lecture hall the back rows read a projector that washes out pale colours and thin
lines, and nobody there can hover. The sidebar switch (``switch``), or ``present=1`` in a link
(``LINK_PARAM``; the link of a view in presentation mode carries it), turns on a mode that
collapses the sidebar and restyles every figure on its way to the browser (``for_projector``):

- no chart text under ``MIN_FONT_PX`` (titles, ticks, legends, colour bars, text in cells
  and on markers),
- text that Plotly would shrink to fit (bar values) kept at ``MIN_FONT_PX`` (``uniformtext``),
- lines at least ``MIN_LINE_PX`` wide, translucent lines raised towards full strength
  (``stronger``: the order of their opacities, which may encode a weight, is kept), larger markers,
- the pale-to-dark sequential scales replaced by ``PROJECTOR_SCALE`` (Cividis: dark blue to
  bright yellow, readable on a washed-out projector and by colour-blind viewers; Nuñez,
  Anderton & Renslow 2018, "Optimizing colormaps with consideration for color vision
  deficiency"),
- the numbers of small heatmaps written into their cells, since hover is not available.

The page's own text grows with a style sheet (``style_page``), which also narrows the page's side
margins and gives a column holding a chart at least ``MIN_CHART_PX``: two charts side by side that do
not fit (at 1024 px) stack, each the page's full width. Figures are restyled as
copies: the charts' pure functions stay as they are and the cached figures are never
mutated. The mode and the export format are plain session_state keys, so each browser
session has its own.

The camera button of every chart saves SVG (vectors for papers and slides) or PNG, as
the sidebar's "Chart downloads" choice says (``EXPORT``); CSV buttons keep the numbers.
"""

from __future__ import annotations

import re
import threading
import weakref
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from ui.charts.crowding import HALF_WIDTH_PX
from ui.charts.house_style import baked, is_baked
from ui.charts.margins import fit_margins, is_fitted
from ui.state import links

PRESENTATION = "presentation_mode"  # session_state: bool
EXPORT = "chart_export_format"  # session_state: "svg" or "png"
# The widgets' own keys: a widget's value does not survive a page on which it was not drawn, so
# the plain keys above hold the choice and re-seed the widgets on every run (as ui/sections/sidebar.py does).
PRESENTATION_WIDGET, EXPORT_WIDGET = "presentation_toggle", "chart_export_radio"
SIDEBAR_SHUT = "presentation_sidebar_shut"  # session_state: the sidebar was collapsed for this turn of the mode
EXPORT_FORMATS = ("svg", "png")
MIN_FONT_PX = 14
BASE_FONT_PX = 16
TITLE_FONT_PX = 20
MIN_LINE_PX = 3.0
PAGE_FONT_PX = BASE_FONT_PX + 4  # the page's root font: Streamlit's theme sizes (rem) grow with it, 16 px -> 20 px
MIN_CHART_PX = 560  # a chart's column in presentation mode: narrower ones wrap under each other
LINK_PARAM = "present"  # ?present=1 turns the mode on, present=0 off
_FLAGS = {"1": True, "true": True, "on": True, "yes": True, "0": False, "false": False, "off": False, "no": False}
PROJECTOR_SCALE = "Cividis"
MAX_CELLS_WITH_TEXT = 100  # heatmaps up to 10 x 10 get their numbers written in presentation mode
# Sequential scales that start near white: invisible on a projector.
_PALE_SCALES = {"blues", "greens", "greys", "reds", "purples", "oranges", "ylorrd", "ylgnbu", "bugn", "gnbu"}


def presenting() -> bool:
    """Whether this session is in presentation mode."""
    return bool(st.session_state.get(PRESENTATION, False))


def export_format() -> str:
    """The camera button's format for this session: "svg" (default) or "png"."""
    value = st.session_state.get(EXPORT)
    return value if value in EXPORT_FORMATS else EXPORT_FORMATS[0]


def switch(container: Any = None) -> None:
    """The sidebar's switches: presentation mode and the charts' download format. A link's ``present=1``
    (or 0) sets the mode first; in presentation mode the sidebar collapses (see ``_collapse_sidebar``)."""
    bar = container if container is not None else st.sidebar
    links.restore(LINK_PARAM, PRESENTATION, (True, False), parse=_parse_flag)
    st.session_state[PRESENTATION_WIDGET] = presenting()
    st.session_state[EXPORT_WIDGET] = export_format()
    bar.toggle("Presentation mode", key=PRESENTATION_WIDGET, on_change=_copy, args=(PRESENTATION_WIDGET, PRESENTATION),
               help="Large text, thick lines and projector-proof colours; the numbers shown without hovering.")
    bar.radio("Chart downloads (camera button)", EXPORT_FORMATS, key=EXPORT_WIDGET, horizontal=True,
              on_change=_copy, args=(EXPORT_WIDGET, EXPORT), format_func=str.upper,
              help="SVG is a vector figure for papers and slides; PNG a picture.")


    _collapse_sidebar(presenting(), bar)


def link_value() -> str | None:
    """The value of ``LINK_PARAM`` in the link of this view: "1" in presentation mode, else None (absent)."""
    return "1" if presenting() else None


def _parse_flag(raw: str) -> bool:
    """A link's "1"/"0" (or true/false, on/off, yes/no) as a bool; anything else is a ValueError."""
    try:
        return _FLAGS[raw.strip().lower()]
    except KeyError:
        raise ValueError(raw) from None


def _collapse_sidebar(collapsed: bool, bar: Any) -> None:
    """Collapse the sidebar when the mode turns on (by the switch or a link), once: the presenter can open
    it again with its arrow, and it is not shut again on every rerun.

    Streamlit 1.67 applies ``initial_sidebar_state`` whenever its value changes, not only on the first
    load, but a browser whose user once opened or closed the sidebar by hand keeps that choice (in
    localStorage) against the page's request; so the turn also clicks the sidebar's own collapse button,
    which exists only while the sidebar is open (``_SHUT_SIDEBAR_JS``)."""
    st.set_page_config(initial_sidebar_state="collapsed" if collapsed else "auto")
    if collapsed and not st.session_state.get(SIDEBAR_SHUT):
        bar.html(_SHUT_SIDEBAR_JS, unsafe_allow_javascript=True)
    st.session_state[SIDEBAR_SHUT] = collapsed


_SHUT_SIDEBAR_JS = """<script>
  document.querySelector('[data-testid="stSidebarCollapseButton"] button')?.click();
</script>"""


def _copy(widget_key: str, key: str) -> None:
    st.session_state[key] = st.session_state[widget_key]


_PAGE_STYLE = f"""
<style>
  html, body, [data-testid="stMarkdownContainer"], [data-testid="stWidgetLabel"], .stMarkdown p,
  [data-testid="stCaptionContainer"], [data-testid="stMetricValue"], [data-testid="stDataFrame"] {{
    font-size: {PAGE_FONT_PX}px !important;
  }}
  [data-testid="stCaptionContainer"] {{ color: #222 !important; }}
  h1 {{ font-size: 2.6rem !important; }}
  /* the root font grew, and Streamlit's side margins (5rem) with it: give the width to the charts */
  [data-testid="stMainBlockContainer"] {{ padding-left: 1.5rem !important; padding-right: 1.5rem !important; }}
  /* a column that holds a chart is never narrower than MIN_CHART_PX: columns that do not fit wrap */
  [data-testid="stHorizontalBlock"]:has(> [data-testid="stColumn"] [data-testid="stPlotlyChart"]) {{
    flex-wrap: wrap !important;
  }}
  [data-testid="stColumn"]:has([data-testid="stPlotlyChart"]) {{ min-width: min({MIN_CHART_PX}px, 100%) !important; }}
</style>
"""


def style_page() -> None:
    """Larger text for the whole page in presentation mode (nothing otherwise)."""
    if presenting():
        st.markdown(_PAGE_STYLE, unsafe_allow_html=True)


def download_name(what: str, detail: str = "") -> str:
    """A chart's file name that says what it shows: ``attention_reverse_cross_L1H2`` (what, the current
    model, then ``detail``), in letters, digits, ``-`` and ``_`` only."""
    from ui.state.settings import MODEL

    model = str(st.session_state.get(MODEL) or "")
    parts = [re.sub(r"[^A-Za-z0-9_-]+", "-", part).strip("-_") for part in (what, model, detail)]
    return "_".join(part for part in parts if part) or "chart"


def chart_config(name: str) -> dict[str, Any]:
    """Plotly's config for one chart: the camera button's format and file name (without extension)."""
    fmt = export_format()
    options: dict[str, Any] = {"format": fmt, "filename": name or "chart"}
    if fmt == "png":
        options["scale"] = 2  # sharp on slides
    return {"toImageButtonOptions": options, "displaylogo": False}


def show_chart(fig: go.Figure, *, key: str, container: Any = None, what: str = "", detail: str = "",
               half: bool = False, **kwargs: Any) -> Any:
    """``st.plotly_chart`` with this session's export format and, when on, presentation styling.

    ``container`` is where to draw (a column, the sidebar; default the page); ``half``: the chart stands in
    one of two columns, so its token axes keep fewer labels (``ui.charts.crowding``); ``what`` (default the
    key) and ``detail`` name the download: ``download_name(what, detail)``, e.g. "attention_reverse_cross_L1H2";
    ``kwargs`` go to ``st.plotly_chart`` (``on_select``, ``selection_mode``, ...). Returns what it returns.
    """
    target = container if container is not None else st
    if presenting():
        shown = restyled(fig, "projector-half" if half else "projector")
    elif half:
        shown = restyled(fig, "half")
    elif is_fitted(fig):  # a figure of ui.compute.figure_cache, drawn by every rerun: its baked copy
        shown = restyled(fig, "plain")
    else:  # this run's own figure: Streamlit's theme styles it the same in the browser (baking costs a rerun 30 ms)
        shown = fit_margins(fig)
    return target.plotly_chart(shown, key=key, config=chart_config(download_name(what or key, detail)),
                               theme=None if is_baked(shown) else "streamlit", **kwargs)


# How wide a chart is drawn, by variant: a half-page column (two side by side at 1280 px with the sidebar
# open), and in presentation mode the page's width at 1024 px (sidebar shut) or a column of MIN_CHART_PX.
PROJECTOR_WIDTH_PX = 964  # the page's width at 1024 px with the sidebar shut
_WIDTHS = {"half": HALF_WIDTH_PX, "projector": PROJECTOR_WIDTH_PX, "projector-half": MIN_CHART_PX}
_RESTYLED: dict[tuple[int, str], go.Figure] = {}  # (id(figure), variant) -> its copy, dropped with the figure
_RESTYLED_LOCK = threading.Lock()


def restyled(fig: go.Figure, variant: str) -> go.Figure:
    """A copy of ``fig`` for ``variant`` ("projector", "projector-half": ``for_projector``; "half": ticks thinned
    for half the width), made once per figure object: a figure reused from ``ui.compute.figure_cache`` is
    restyled once, not on every rerun (restyling copied and re-validated every figure: a warm rerun of the
    Attention page in presentation mode took 220-290 ms). "plain" is the figure itself. A shared figure's copy is
    ``baked`` (``ui.charts.house_style``): the browser draws it once. Entries go with their figures."""
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
        if is_fitted(fig):  # shared by every rerun (ui.compute.figure_cache): baked once
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
