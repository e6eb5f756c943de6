"""How a page shows a figure: ``show_chart``, ``st.plotly_chart`` with the figure machinery applied.

A page or section hands over the figure a chart function built (or several, laid side by side); this picks what
the browser gets: in presentation mode the projector's restyle (``ui.figures.projector``), in half a page the
token axes thinned (``ui.figures.crowding``), a shared figure of ``ui.figures.cache`` its baked copy
(``ui.figures.house_style``, sent with ``theme=None``), any other figure its margins fitted
(``ui.figures.margins``); and the camera button's format and file name (``chart_config``) as the sidebar says.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from ui.figures.grid import side_by_side
from ui.figures.house_style import is_baked
from ui.figures.margins import fit_margins, is_fitted
from ui.figures.projector import restyled
from ui.state.presentation import export_format, presenting


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


def show_chart(fig: go.Figure | Sequence[go.Figure], *, key: str, container: Any = None, what: str = "",
               detail: str = "", half: bool = False, cols: int = 2, **kwargs: Any) -> Any:
    """``st.plotly_chart`` with this session's export format and, when on, presentation styling.

    ``fig`` is a figure or a list of single-panel figures, shown as one figure of ``cols`` columns
    (``ui.figures.grid.side_by_side``). ``container`` is where to draw (a column, the sidebar; default the
    page); ``half``: the chart stands in one of two columns, so its token axes keep fewer labels
    (``ui.figures.crowding``); ``what`` (default the key) and ``detail`` name the download:
    ``download_name(what, detail)``, e.g. "attention_reverse_cross_L1H2"; ``kwargs`` go to ``st.plotly_chart``
    (``on_select``, ``selection_mode``, ...). Returns what it returns.
    """
    target = container if container is not None else st
    if not isinstance(fig, go.Figure):
        fig = side_by_side(list(fig), cols=cols)
    if presenting():
        shown = restyled(fig, "projector-half" if half else "projector")
    elif half:
        shown = restyled(fig, "half")
    elif is_fitted(fig):  # a figure of ui.figures.cache, drawn by every rerun: its baked copy
        shown = restyled(fig, "plain")
    else:  # this run's own figure: Streamlit's theme styles it the same in the browser (baking costs a rerun 30 ms)
        shown = fit_margins(fig)
    return target.plotly_chart(shown, key=key, config=chart_config(download_name(what or key, detail)),
                               theme=None if is_baked(shown) else "streamlit", **kwargs)
