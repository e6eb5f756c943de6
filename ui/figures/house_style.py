"""The app's chart style, written into each figure, so that the browser draws a figure once, not twice.

Streamlit's ``st.plotly_chart`` (1.67) draws every figure twice when it mounts: its chart component
draws the figure, then an effect applies the theme again to a JSON copy of it and calls
``Plotly.react`` with that copy. Plotly skips a ``react`` whose figure did not change, but two things
in a themed figure always count as changed there (plotly.js ``plot_api.js``, ``getDiffFlags``, read in
chromium with the Masks page's figures): the layout's ``template`` (a fresh object on every copy,
compared by identity: full redraw) and every numeric array sent base64-encoded (decoded to a typed
array, which is not an ``Array``: recalculated). The second drawing cost 40-130 ms a figure at opus-mt
size, as much as the first.

So ``baked`` gives the browser a figure that needs no theming: Streamlit's light theme, as its
template would apply it (the values below were read from ``layout.template`` of a figure drawn by
Streamlit 1.67 in chromium, light theme: fonts, colours, axis standoffs, ``automargin``, the
colourway, the heatmaps' scale, bold titles), written into the figure where the figure sets nothing
itself; no template; numeric arrays as plain lists (up to ``MAX_LISTED_VALUES``); and a fixed
``layout.datarevision``: with one set, Plotly takes plain data arrays as unchanged unless the revision
changes. Charts are then sent with ``theme=None``. ``tests/test_browser_house_style.py`` compares, pixel
for pixel, the app's charts drawn both ways; a Streamlit whose theme changed fails it.

A fixed ``datarevision`` is safe because Streamlit never hands a mounted chart new data: a chart's
element id includes its JSON, so another figure is another element, mounted and drawn anew (its state
is only ever the first copy, themed again). The app pins the light theme (``.streamlit/config.toml``):
these colours are the light theme's.
"""

from __future__ import annotations

import base64
import re
from typing import Any

import numpy as np
import plotly.graph_objects as go

FONT = '"Source Sans", sans-serif'
TEXT = "#808495"  # tick labels, axis titles, the base font
HEADING = "#2F2D2B"
GRID = "#e6eaf1"
BACKGROUND = "#FFFFFF"
STREAMLIT_BLUES = [[0.0, "#e4f5ff"], [1 / 9, "#c7ebff"], [2 / 9, "#a6dcff"], [3 / 9, "#83c9ff"],
                   [4 / 9, "#60b4ff"], [5 / 9, "#3d9df3"], [6 / 9, "#1c83e1"], [7 / 9, "#0068c9"],
                   [8 / 9, "#0054a3"], [1.0, "#004280"]]
STREAMLIT_DIVERGING = [[0.0, "#7d353b"], [1 / 9, "#bd4043"], [2 / 9, "#ff4b4b"], [3 / 9, "#ff8c8c"],
                       [4 / 9, "#ffc7c7"], [5 / 9, "#a6dcff"], [6 / 9, "#60b4ff"], [7 / 9, "#1c83e1"],
                       [8 / 9, "#0054a3"], [1.0, "#004280"]]
COLORWAY = ["#0068c9", "#83c9ff", "#ff2b2b", "#ffabab", "#29b09d", "#7defa1", "#ff8700", "#ffd16a", "#6d3fc0",
            "#d5dae5"]


def theme(rem: float = 1.0) -> dict[str, dict[str, Any]]:
    """The theme's layout (key "layout"), x and y axes and colour axis. Its sizes are rem of the page's root font
    (Streamlit converts its theme's "0.75rem" with the page's font size): ``rem`` = that font / 16 px, 1.25 in
    presentation mode (20 px).

    ``tickcolor`` goes only on the axes that draw ticks anyway (``baked``): set in a figure rather than by a
    template it switches Plotly's ticks on (``Lib.coerce2``); for the same reason there is no ``minor.gridcolor``
    (the figures draw no minor grid)."""
    def px(size: float) -> float:
        return size * rem

    axis = {"zerolinecolor": GRID, "gridcolor": GRID, "tickfont": {"color": TEXT, "size": px(12)}, "automargin": True}
    return {
        "xaxis": {**axis, "showgrid": False, "zeroline": False,
                  "title": {"font": {"color": TEXT, "size": px(14)}, "standoff": px(20)}},
        "yaxis": {**axis, "ticklabelposition": "outside",
                  "title": {"font": {"color": TEXT, "size": px(14)}, "standoff": px(24)}},
        "coloraxis": {"colorscale": STREAMLIT_BLUES, "colorbar": {
            "thickness": 16, "xpad": px(24), "ticklabelposition": "outside", "outlinecolor": "rgba(0,0,0,0)",
            "outlinewidth": 8, "len": 0.75, "y": 0.5745, "title": {"font": {"color": TEXT, "size": px(14)}},
            "tickfont": {"color": TEXT, "size": px(12)}}},
        "layout": {
            "colorway": COLORWAY,
            "colorscale": {"sequential": STREAMLIT_BLUES, "sequentialminus": STREAMLIT_BLUES,
                           "diverging": STREAMLIT_DIVERGING},
            "font": {"color": TEXT, "family": FONT, "size": px(12), "weight": 400},
            "title": {"font": {"family": FONT, "size": px(16), "color": HEADING}, "pad": {"l": px(4)},
                      "xanchor": "left", "x": 0},
            "legend": {"title": {"font": {"size": px(12), "color": TEXT}, "side": "top"}, "valign": "top",
                       "bordercolor": "rgba(0,0,0,0)", "borderwidth": 0,
                       "font": {"size": px(12), "color": "#262730"}},
            "paper_bgcolor": BACKGROUND,
            "plot_bgcolor": BACKGROUND,
            "margin": {"pad": px(8), "r": 0, "l": 0},
            "hoverlabel": {"bgcolor": BACKGROUND, "bordercolor": "#DCD8D4",
                           "font": {"color": TEXT, "family": FONT, "size": px(12)}},
        },
    }


DATA_REVISION = "baked"
MAX_LISTED_VALUES = 20_000  # numeric arrays up to this many values a figure go as lists (see ``_as_lists``)
_AXIS_NAME = re.compile(r"^([xy])axis(\d*)$")


def baked(fig: go.Figure, rem: float = 1.0) -> go.Figure:
    """A copy of ``fig`` with the house style (``theme(rem)``) written in where it sets nothing (see the module
    docstring), no template, numeric arrays as lists and a fixed ``datarevision``. ``fig`` is untouched. One
    validation of the whole figure (20-40 ms for the Masks page's five panels): edited as JSON, then built once."""
    style = theme(rem)
    spec = fig.to_plotly_json()
    layout, data = spec["layout"], spec["data"]
    layout.pop("template", None)
    ticked, gridless = _special_axes(data)
    for name in _axis_names(data, layout):
        own = layout.get(name) or {}
        defaults = dict(style["xaxis"] if name.startswith("x") else style["yaxis"])
        if name in ticked or any(own.get(key) for key in ("ticks", "ticklen", "tickwidth")):
            defaults["tickcolor"] = GRID
        if name in gridless and own.get("gridcolor") is None and own.get("gridwidth") is None:
            defaults["showgrid"] = False
        if name in gridless and own.get("zerolinecolor") is None and own.get("zerolinewidth") is None:
            defaults["zeroline"] = False
        layout[name] = _filled(own, defaults)
    shared_scales = {key for key in layout if key.startswith("coloraxis")} | \
        {trace["coloraxis"] for trace in data if isinstance(trace.get("coloraxis"), str)}
    for name in shared_scales:
        layout[name] = _filled(layout.get(name), style["coloraxis"])
    titled = "title" in layout
    layout = _filled(layout, style["layout"])
    if titled:  # Streamlit's theme writes a figure's title bold
        layout["title"]["font"].setdefault("weight", "bold")
    layout["datarevision"] = DATA_REVISION
    for trace in data:  # what Streamlit's template gives the app's kinds of trace
        if trace.get("type") == "heatmap" and "colorscale" not in trace:
            trace["colorscale"] = STREAMLIT_BLUES
        elif trace.get("type", "scatter") == "scatter":
            trace.update(_filled(trace, {"marker": {"line": {"width": 0}}}))
    _as_lists(data)
    out = go.Figure({"data": data, "layout": layout})
    out.layout.template = None  # a new figure takes Plotly's default template: none is sent
    out._house_baked = True  # a plain attribute: Plotly never sends it to the browser
    return out


def is_baked(fig: go.Figure) -> bool:
    """Whether ``fig`` came from ``baked``: it is sent with ``theme=None``."""
    return bool(getattr(fig, "_house_baked", False))


def _axis_names(data: list[dict[str, Any]], layout: dict[str, Any]) -> list[str]:
    """Every axis of the figure: those its layout names and those its traces use ("x2" -> "xaxis2")."""
    names = {key for key in layout if _AXIS_NAME.match(key)}
    for trace in data:
        names.update(_trace_axes(trace))
    return sorted(names)


def _trace_axes(trace: dict[str, Any]) -> tuple[str, str]:
    """The layout names of a trace's x and y axes ("x2" -> "xaxis2"; unset -> "xaxis")."""
    x, y = (trace.get(f"{letter}axis", letter) for letter in "xy")
    return f"xaxis{x[1:]}", f"yaxis{y[1:]}"


def _special_axes(data: list[dict[str, Any]]) -> tuple[set[str], set[str]]:
    """The axes whose defaults a colour given in the figure would change (plotly.js ``cartesian/layout_defaults``):
    a heatmap's axes draw ticks ("ticked"), so a ``tickcolor`` shows there and only there; a bar chart's category
    axis draws no grid and no zero line ("gridless") unless the figure gives it a ``gridcolor``/``zerolinecolor``
    (which the theme's, set in the figure, would be)."""
    ticked, gridless = set(), set()
    for trace in data:
        x, y = _trace_axes(trace)
        if trace.get("type") == "heatmap":
            ticked |= {x, y}
        elif trace.get("type") == "bar":
            gridless.add(y if trace.get("orientation") == "h" else x)
    return ticked, gridless


def _filled(own: Any, defaults: dict[str, Any]) -> dict[str, Any]:
    """``own`` (a dict or None) with ``defaults`` under it: a template's rule, key by key, into nested dicts;
    what ``own`` sets wins."""
    out = dict(own) if isinstance(own, dict) else {}
    for key, value in defaults.items():
        mine = out.get(key)
        if isinstance(value, dict):
            if mine is None or isinstance(mine, dict):
                out[key] = _filled(mine, value)
        elif mine is None:
            out[key] = value
    return out


def _as_lists(data: list[dict[str, Any]]) -> None:
    """The traces' numeric arrays as lists, when all of them hold at most ``MAX_LISTED_VALUES`` values: a
    list costs Python time on every rerun (Streamlit serialises the figure each time, value by value), a
    base64 array almost none, so a larger figure keeps its arrays and is drawn twice. Plotly's JSON holds
    numpy arrays as base64 specs ({"dtype", "bdata", "shape"})."""
    found = {(i, key): _decoded(value) for i, trace in enumerate(data) for key, value in trace.items()
             if isinstance(value, dict) and "bdata" in value and "dtype" in value}
    if sum(values.size for values in found.values()) <= MAX_LISTED_VALUES:
        for (i, key), values in found.items():
            data[i][key] = values.tolist()


def _decoded(spec: dict[str, Any]) -> np.ndarray:
    values = np.frombuffer(base64.b64decode(spec["bdata"]), dtype=np.dtype(spec["dtype"]))
    shape = spec.get("shape")
    if isinstance(shape, str):
        shape = tuple(int(n) for n in shape.split(","))
    return values.reshape(shape) if shape else values
