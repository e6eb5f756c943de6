"""ui.figures.house_style: the theme written into a figure so that the browser draws it once. These check the
rules one by one; tests/test_browser_house_style.py checks in chromium that a baked figure looks exactly as
Streamlit's theme draws it, and that the app's charts reach the browser baked."""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import plotly.io
import pytest

from ui.figures import house_style as hs
from ui.figures.margins import fit_margins


def sent(fig: go.Figure) -> dict:
    """The figure as Streamlit sends it to the browser."""
    return json.loads(plotly.io.to_json(fig, validate=False))


def test_a_baked_figure_has_no_template_a_data_revision_and_plain_lists() -> None:
    fig = go.Figure(go.Heatmap(z=np.arange(6).reshape(2, 3), x=[0, 1, 2], y=[0, 1]))
    out = sent(hs.baked(fig))
    assert "template" not in out["layout"]  # a template is a new object on every copy: a full redraw
    assert out["layout"]["datarevision"] == hs.DATA_REVISION
    assert out["data"][0]["z"] == [[0, 1, 2], [3, 4, 5]]  # a list, not a base64 spec (a typed array in the browser)
    assert "template" in sent(fig)["layout"] and "bdata" in sent(fig)["data"][0]["z"]  # the original is untouched
    assert hs.is_baked(hs.baked(fig)) and not hs.is_baked(fig)


def test_large_arrays_stay_base64() -> None:
    big = go.Figure(go.Heatmap(z=np.zeros((10, hs.MAX_LISTED_VALUES // 10 + 1))))
    assert "bdata" in sent(hs.baked(big))["data"][0]["z"]  # lists would cost Python time on every rerun


def test_the_theme_fills_only_what_the_figure_leaves_unset() -> None:
    fig = go.Figure(go.Scatter(x=[0, 1], y=[1, 2]), layout={
        "title": "T", "margin": {"l": 40, "r": 10}, "xaxis": {"tickfont": {"size": 20}}, "font": {"color": "red"}})
    layout = sent(hs.baked(fig))["layout"]
    assert layout["margin"] == {"l": 40, "r": 10, "pad": 8}  # own sides kept, the theme's pad added
    assert layout["xaxis"]["tickfont"] == {"size": 20, "color": hs.TEXT}
    assert layout["font"]["color"] == "red" and layout["font"]["size"] == 12 and layout["font"]["family"] == hs.FONT
    assert layout["yaxis"]["title"]["standoff"] == 24 and layout["xaxis"]["title"]["standoff"] == 20
    assert layout["xaxis"]["showgrid"] is False and "showgrid" not in layout["yaxis"]
    assert layout["title"]["font"]["weight"] == "bold"  # Streamlit writes a figure's title bold
    assert layout["colorway"] == hs.COLORWAY and layout["paper_bgcolor"] == hs.BACKGROUND
    assert sent(hs.baked(fig))["data"][0]["marker"] == {"line": {"width": 0}}  # the theme's scatter markers


def test_no_title_no_bold_title() -> None:
    assert "weight" not in sent(hs.baked(go.Figure(go.Bar(x=[1], y=[2]))))["layout"]["title"]["font"]


def test_every_axis_of_a_grid_of_panels_gets_the_theme() -> None:
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=3)
    for col in (1, 2, 3):
        fig.add_trace(go.Heatmap(z=[[1, 2]]), row=1, col=col)
    layout = sent(hs.baked(fig))["layout"]
    for name in ("xaxis", "xaxis2", "xaxis3", "yaxis", "yaxis2", "yaxis3"):
        assert layout[name]["automargin"] is True and layout[name]["tickfont"]["color"] == hs.TEXT, name
        assert layout[name]["tickcolor"] == hs.GRID  # a heatmap's axes draw ticks: the theme colours them


def test_colours_that_would_switch_plotly_features_on_are_left_out() -> None:
    """plotly.js turns ticks on when a figure (not a template) sets ``tickcolor``, and a bar chart's category
    grid and zero line when it sets ``gridcolor``/``zerolinecolor``: baked, they must not change what is drawn."""
    lines = sent(hs.baked(go.Figure(go.Scatter(x=[0, 1], y=[0, 1]))))["layout"]
    assert "tickcolor" not in lines["xaxis"] and "tickcolor" not in lines["yaxis"]
    assert all("minor" not in lines[name] for name in ("xaxis", "yaxis"))
    across = sent(hs.baked(go.Figure(go.Bar(x=[0.5, 0.2], y=["a", "b"], orientation="h"))))["layout"]
    assert across["yaxis"]["showgrid"] is False and across["yaxis"]["zeroline"] is False
    assert "showgrid" not in {k for k, v in across["xaxis"].items() if v is True}
    upright = sent(hs.baked(go.Figure(go.Bar(x=["a", "b"], y=[1, 2]))))["layout"]
    assert upright["xaxis"]["showgrid"] is False and "zeroline" not in {k for k, v in upright["yaxis"].items() if not v}
    own = sent(hs.baked(go.Figure(go.Bar(x=[0.5], y=["a"], orientation="h"), layout={"yaxis": {"gridcolor": "red"}})))
    assert "showgrid" not in own["layout"]["yaxis"]  # a grid colour of its own: Plotly draws the grid, as before


def test_a_heatmap_without_a_colour_scale_gets_the_themes() -> None:
    data = sent(hs.baked(go.Figure([go.Heatmap(z=[[1]]), go.Heatmap(z=[[1]], colorscale="Viridis")])))["data"]
    assert data[0]["colorscale"][0] == [0.0, "#e4f5ff"] and data[0]["colorscale"][-1] == [1.0, "#004280"]
    assert data[1]["colorscale"][0][1] != "#e4f5ff"


def test_sizes_grow_with_the_pages_root_font() -> None:
    """In presentation mode the page's root font is 20 px, and Streamlit's theme sizes (rem) grow by 1.25."""
    fig = go.Figure([go.Scatter(x=[0], y=[0]), go.Heatmap(z=[[1]], coloraxis="coloraxis2")])
    layout = sent(hs.baked(fig, rem=1.25))["layout"]
    assert layout["yaxis"]["title"]["standoff"] == 30 and layout["xaxis"]["title"]["font"]["size"] == 17.5
    assert layout["font"]["size"] == 15 and layout["margin"]["pad"] == 10 and layout["title"]["font"]["size"] == 20
    assert layout["coloraxis2"]["colorbar"]["xpad"] == 30 and layout["coloraxis2"]["colorbar"]["thickness"] == 16


def test_baking_keeps_what_fit_margins_decided() -> None:
    fig = fit_margins(go.Figure(go.Heatmap(z=np.eye(3), x=[0, 1, 2], y=[0, 1, 2]),
                                layout={"xaxis": {"tickvals": [0, 1, 2], "ticktext": ["a", "b", "c"]}}))
    before, after = sent(fig)["layout"], sent(hs.baked(fig))["layout"]
    assert {k: after["margin"][k] for k in before["margin"]} == before["margin"]
    assert after["xaxis"]["ticklabeloverflow"] == "allow" and after["xaxis"]["ticktext"] == ["a", "b", "c"]


@pytest.mark.parametrize("variant", ["plain", "half", "projector"])
def test_show_chart_sends_a_shared_figure_baked_with_theme_none(monkeypatch, variant: str) -> None:
    from ui.figures import display
    from ui.figures.cache import FigureCache

    calls = []

    class Target:
        def plotly_chart(self, fig, **kwargs):
            calls.append((fig, kwargs))

    monkeypatch.setattr(display, "presenting", lambda: variant == "projector")
    monkeypatch.setattr(display, "export_format", lambda: "svg")
    monkeypatch.setattr(display, "download_name", lambda what, detail="": what)
    shared = FigureCache().get(_heatmap, (), {}, False)  # fitted, as every cached figure is
    display.show_chart(shared, key="k", container=Target(), half=variant == "half")
    display.show_chart(shared, key="k", container=Target(), half=variant == "half")
    (first, kwargs), (second, _) = calls
    assert kwargs["theme"] is None and hs.is_baked(first) and first is second  # baked once, reused
    own = _heatmap()  # a figure of this run alone: Streamlit's theme styles it (baking would cost every rerun)
    display.show_chart(own, key="k2", container=Target(), half=variant == "half")
    assert calls[-1][1]["theme"] == "streamlit" and not hs.is_baked(calls[-1][0])


def _heatmap() -> go.Figure:
    return go.Figure(go.Heatmap(z=np.eye(2)), layout={"title": "t"})
