"""Linked selection: click a token in a chart and it becomes the selected token on every page.

The selected *output position* t (0-based: the t-th output token, the decoder row that predicts it)
is shared: the query row on the Attention page (decoder and cross-attention), the output step on the
Decoding page (step t + 1) and the explained token on the Explain page. Clicking a cell's row of an
attention heatmap, a query token of the head view or a bar of the decoding confidence chart selects
it; each page applies a new selection once, before drawing its widget, so the page's own widgets
keep working afterwards.

Plotly heatmaps emit no selection events (streamlit/streamlit#8760), so charts that should be
clickable carry a layer of invisible markers (``ui.charts.clickable_cells``) whose clicks do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

OUTPUT = "selected_output"  # session_state: (output position, version) of the last click on any page
_SEEN = "selection_seen"  # session_state: {chart key: the last selection of that chart already used}
_APPLIED = "selection_applied"  # session_state: {widget key: the version of OUTPUT it last took}


def clicked(event: Any, chart_key: str) -> dict[str, Any] | None:
    """The point clicked in ``chart_key``'s chart (``st.plotly_chart(on_select="rerun")``), only when the
    selection is new: a chart keeps its selection across reruns, which must not undo later choices."""
    points = _points(event)
    seen = st.session_state.setdefault(_SEEN, {})
    signature = repr(points)
    if not points or seen.get(chart_key) == signature:
        if not points:
            seen.pop(chart_key, None)
        return None
    seen[chart_key] = signature
    return points[0]


def point_row(point: dict[str, Any]) -> int | None:
    """The row (y position) of a clicked cell or bar: its customdata's first entry, else its y."""
    data = point.get("customdata")
    if isinstance(data, dict):  # a numpy row arrives as {"0": row, "1": column} (Plotly's typed arrays)
        data = data.get("0")
    value = data[0] if isinstance(data, (list, tuple)) and data else data
    if value is None:
        value = point.get("y")
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def on_output_click(chart_key: str) -> Callable[[], None]:
    """The ``on_select`` callback of a chart whose rows (or bars' customdata) are output positions:
    the clicked one becomes the selected output. A callback runs before the page's next run, so
    every widget can still take the selection before it is drawn."""
    return _on_row(chart_key, select_output)


def on_row_click(chart_key: str, widget_key: str) -> Callable[[], None]:
    """The ``on_select`` callback of a chart whose clicked row sets one widget of its page only."""
    return _on_row(chart_key, lambda row: st.session_state.__setitem__(widget_key, row))


def _on_row(chart_key: str, take: Callable[[int], None]) -> Callable[[], None]:
    def callback() -> None:
        point = clicked(st.session_state.get(chart_key), chart_key)
        row = point_row(point) if point is not None else None
        if row is not None and row >= 0:  # -1: a point that is no row (a key token of the head view)
            take(row)
    return callback


def on_panel_click(chart_key: str, n_panels: int, per_row: int, row_key: str, col_key: str) -> Callable[[], None]:
    """The ``on_select`` callback of a grid of ``n_panels`` heatmap panels made clickable by
    ``clickable_cells`` (its click layers follow the panels, in order): the clicked panel's row
    and column (``per_row`` panels a row) go to the widgets ``row_key`` and ``col_key``."""
    def callback() -> None:
        point = clicked(st.session_state.get(chart_key), chart_key)
        curve = point.get("curve_number") if point is not None else None
        if curve is None or not n_panels <= int(curve) < 2 * n_panels:
            return
        panel = int(curve) - n_panels
        st.session_state[row_key], st.session_state[col_key] = divmod(panel, per_row)
    return callback


def select_output(position: int) -> None:
    """Make output position ``position`` the selected token everywhere."""
    _, version = st.session_state.get(OUTPUT, (None, 0))
    st.session_state[OUTPUT] = (int(position), version + 1)


def apply_output(widget_key: str, n_positions: int, offset: int = 0) -> None:
    """Before ``widget_key``'s widget is drawn: give it a selection made since it last took one
    (``offset`` 1 for a 1-based step); a position it does not have is left alone."""
    position, version = st.session_state.get(OUTPUT, (None, 0))
    applied = st.session_state.setdefault(_APPLIED, {})
    if position is None or applied.get(widget_key) == version:
        return
    applied[widget_key] = version
    if 0 <= position < n_positions:
        st.session_state[widget_key] = position + offset


def note_output(widget_key: str, position: int) -> None:
    """A page's own widget chose ``position``: share it without re-applying it to that widget."""
    current, version = st.session_state.get(OUTPUT, (None, 0))
    if current != position:
        st.session_state[OUTPUT] = (int(position), version + 1)
        st.session_state.setdefault(_APPLIED, {})[widget_key] = version + 1


def _points(event: Any) -> list[dict[str, Any]]:
    if event is None:
        return []
    selection = event.get("selection") if isinstance(event, dict) else getattr(event, "selection", None)
    if selection is None:
        return []
    points = selection.get("points") if isinstance(selection, dict) else getattr(selection, "points", None)
    return [dict(p) for p in points or [] if isinstance(p, dict)]
