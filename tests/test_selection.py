"""Linked selection (ui/state/selection.py, ui.charts.clickable_cells): a clicked token is selected everywhere."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest
from streamlit.testing.v1 import AppTest

from ui.charts import MAX_CLICKABLE_CELLS, clickable_cells, heatmap
from ui.figures import side_by_side
from ui.state import selection

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def test_clickable_cells_cover_every_cell_of_every_panel_with_its_row_and_column() -> None:
    a = heatmap(np.arange(6.0).reshape(2, 3), ["x", "y", "z"], ["p", "q"])
    b = heatmap(np.full((4, 3), -np.inf), ["x", "y", "z"], ["p", "q", "r", "s"])
    fig = clickable_cells(side_by_side([a, b]))
    layers = [t for t in fig.data if isinstance(t, go.Scatter)]
    assert len(layers) == 2
    first, second = layers
    assert list(zip(first.x, first.y, strict=True)) == [(c, r) for r in range(2) for c in range(3)]
    assert [list(d) for d in first.customdata] == [[r, c] for r in range(2) for c in range(3)]
    assert (first.xaxis, first.yaxis) == (fig.data[0].xaxis, fig.data[0].yaxis)
    assert (second.xaxis, second.yaxis) == (fig.data[1].xaxis, fig.data[1].yaxis)
    assert "q · z" in first.hovertext[5] and "5.000" in first.hovertext[5]  # the heatmap's own hover
    assert fig.data[0].customdata is None and fig.data[0].hoverinfo == "skip"  # the markers carry the names
    assert fig.layout.clickmode == "event+select"
    big = heatmap(np.zeros((60, 60)), [str(i) for i in range(60)], [str(i) for i in range(60)])
    assert 60 * 60 > MAX_CLICKABLE_CELLS and len(clickable_cells(big).data) == 1


def test_clickable_panels_put_one_marker_at_each_panels_centre() -> None:
    from ui.charts import clickable_panels

    a = heatmap(np.zeros((2, 3)), ["x", "y", "z"], ["p", "q"])
    b = heatmap(np.zeros((4, 5)), list("abcde"), list("pqrs"))
    fig = clickable_panels(side_by_side([a, b]), ["L0 H0", "L0 H1"])
    layers = [t for t in fig.data if isinstance(t, go.Scatter)]
    assert [(t.x[0], t.y[0]) for t in layers] == [(1.0, 0.5), (2.0, 1.5)]
    assert [t.hovertext[0] for t in layers] == ["L0 H0: click to open", "L0 H1: click to open"]
    assert fig.layout.hoverdistance == -1 and all(t.hoverinfo == "skip" for t in fig.data[:2])


def test_point_row_reads_customdata_then_y() -> None:
    assert selection.point_row({"customdata": [3, 1], "y": 9}) == 3
    assert selection.point_row({"customdata": 4}) == 4
    assert selection.point_row({"customdata": {"0": 2, "1": 1}, "y": 2}) == 2  # as the browser sends it
    assert selection.point_row({"y": 2}) == 2
    assert selection.point_row({"x": "a"}) is None


@pytest.fixture
def app(make_app) -> AppTest:
    return make_app("tiny-reverse", "abcdef")


def test_a_selected_output_opens_on_every_page_and_a_page_choice_is_shared(app: AppTest) -> None:
    app.session_state[selection.OUTPUT] = (2, 1)  # as a click on any chart leaves it
    app.switch_page("pages/9_decoding.py").run()
    assert not app.exception, [e.value for e in app.exception]
    assert app.slider(key="dec_step").value == 3  # step t + 1
    app.switch_page("pages/5_explain.py").run()
    assert app.session_state["explain_row"] == 2
    app.switch_page("pages/4_attention.py").run()
    app.radio(key="attn_kind").set_value("cross").run()
    assert app.selectbox(key="attn_query").value == 2
    # choosing another query there selects it for the other pages
    app.selectbox(key="attn_query").set_value(4).run()
    assert app.session_state[selection.OUTPUT][0] == 4
    app.switch_page("pages/9_decoding.py").run()
    assert app.slider(key="dec_step").value == 5
    # and the step the user then sets on this page stays (the selection is applied once)
    app.slider(key="dec_step").set_value(1).run()
    assert app.slider(key="dec_step").value == 1


def test_an_encoder_row_selects_a_source_token_on_its_page_only(app: AppTest) -> None:
    app.session_state[selection.OUTPUT] = (3, 1)
    app.switch_page("pages/4_attention.py").run()
    assert app.radio(key="attn_kind").value == "encoder"
    assert app.selectbox(key="attn_query").value == 0  # not an output position
