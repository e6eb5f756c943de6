"""Presentation mode and the charts' download format: the session's choice and the sidebar's widgets.

In a lecture hall the back rows read a projector that washes out pale colours and thin lines, and nobody
there can hover. The sidebar switch (``switch``), or ``present=1`` in a link (``LINK_PARAM``; the link of a
view in presentation mode carries it), turns on a mode that collapses the sidebar, makes the page's own text
larger (``style_page``: a style sheet that also narrows the page's side margins and gives a column holding a
chart at least ``MIN_CHART_PX``, so two charts side by side that do not fit at 1024 px stack, each the page's
full width) and restyles every figure on its way to the browser: that restyle is ``ui.figures.projector``'s,
applied by ``ui.figures.show_chart``, which reads ``presenting`` here.

The camera button of every chart saves SVG (vectors for papers and slides) or PNG, as the sidebar's "Chart
downloads" choice says (``EXPORT``); CSV buttons keep the numbers. The mode and the export format are plain
session_state keys, so each browser session has its own.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from ui.state import links

PRESENTATION = "presentation_mode"  # session_state: bool
EXPORT = "chart_export_format"  # session_state: "svg" or "png"
# The widgets' own keys: a widget's value does not survive a page on which it was not drawn, so
# the plain keys above hold the choice and re-seed the widgets on every run (as ui/sections/sidebar.py does).
PRESENTATION_WIDGET, EXPORT_WIDGET = "presentation_toggle", "chart_export_radio"
SIDEBAR_SHUT = "presentation_sidebar_shut"  # session_state: the sidebar was collapsed for this turn of the mode
EXPORT_FORMATS = ("svg", "png")
PAGE_FONT_PX = 20  # the page's root font (Streamlit's 16 px + 4): Streamlit's theme sizes (rem) grow with it
MIN_CHART_PX = 560  # a chart's column in presentation mode: narrower ones wrap under each other
LINK_PARAM = "present"  # ?present=1 turns the mode on, present=0 off
_FLAGS = {"1": True, "true": True, "on": True, "yes": True, "0": False, "false": False, "off": False, "no": False}


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
