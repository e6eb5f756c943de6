"""The figures' way to a projector (ui/figures/projector.py) and the camera button's options
(ui/figures/display.py): no chart text under 14 px, thick lines, projector-proof colours, one copy per figure."""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import pytest

from ui.charts import heatmap
from ui.charts import training as tc
from ui.figures import display, projector
from ui.state import presentation


def font_sizes(value: object, path: str = "") -> list[tuple[str, float]]:
    """Every explicit font size in a figure's JSON, with where it is."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "size" and "font" in path.rsplit(".", 1)[-1] and isinstance(item, int | float):
                found.append((path, float(item)))
            elif key == "size" and "font" in path.rsplit(".", 1)[-1] and isinstance(item, list):
                found.extend((path, float(s)) for s in item)
            else:
                found.extend(font_sizes(item, f"{path}.{key}"))
    elif isinstance(value, list):
        for item in value:
            found.extend(font_sizes(item, path))
    return found


def line_widths(fig: go.Figure) -> list[float]:
    return [t.line.width for t in fig.data if "line" in t and t.line is not None and t.line.width is not None]


@pytest.fixture
def figures() -> list[go.Figure]:
    rng = np.random.default_rng(0)
    small = heatmap(rng.random((4, 5)), list("abcde"), list("wxyz"), title="small")
    big = heatmap(rng.random((30, 30)), [str(i) for i in range(30)], [str(i) for i in range(30)])
    lines = go.Figure(go.Scatter(x=[0, 1, 2], y=[1, 3, 2], mode="lines+markers+text", text=["a", "b", "c"],
                                 textfont=dict(size=9), line=dict(width=1), marker=dict(size=6)))
    lines.update_layout(xaxis_tickfont_size=8, legend_font_size=10, annotations=[dict(text="note", font_size=7)])
    schedule = tc.lr_schedule_chart(tc.lr_schedule_frame(64, 50, 500, points=30), warmup_steps=50)
    boxes = go.Figure(layout=dict(shapes=[dict(type="rect", x0=0, x1=1, y0=0, y1=1)],  # text in annotations
                                  annotations=[dict(x=0.5, y=0.5, text="a box", showarrow=False, font_size=11)]))
    return [small, big, lines, schedule, boxes]


def test_projector_figures_have_no_text_under_14px_and_thick_lines(figures):
    for fig in figures:
        before = json.loads(fig.to_json())
        shown = projector.for_projector(fig)
        assert json.loads(fig.to_json()) == before, "the chart function's figure is not mutated"
        sizes = font_sizes(shown.to_plotly_json())
        assert shown.layout.font.size >= projector.MIN_FONT_PX  # the default for everything unset
        assert sizes and all(size >= projector.MIN_FONT_PX for _, size in sizes), sizes
        assert all(width >= projector.MIN_LINE_PX for width in line_widths(shown))


def test_pale_scales_are_replaced_and_small_heatmaps_show_their_numbers(figures):
    small, big = figures[0], figures[1]
    assert projector._is_pale(small.data[0].colorscale)  # "Blues" starts near white
    shown_small, shown_big = projector.for_projector(small), projector.for_projector(big)
    assert not projector._is_pale(shown_small.data[0].colorscale)
    assert shown_small.data[0].texttemplate  # no hover in a lecture hall: numbers in the cells
    z = np.asarray(small.data[0].z, dtype=float)
    expected = [[f"{v:.2f}".replace("0.", ".", 1) for v in row] for row in z]  # all in [0, 1)
    assert [list(row) for row in shown_small.data[0].text] == expected  # short enough for a cell at 14 px
    masked = heatmap(np.array([[0.5, -np.inf]]), ["a", "b"], ["q"])
    assert list(projector.for_projector(masked).data[0].text[0]) == [".50", "-inf"]
    assert not shown_big.data[0].texttemplate  # 900 cells: the colour bar has to do
    diverging = heatmap(np.zeros((2, 2)), ["a", "b"], ["c", "d"], colorscale="RdBu", zmid=0.0)
    assert projector.for_projector(diverging).data[0].colorscale == diverging.data[0].colorscale


def test_chart_config_names_the_format_and_file(monkeypatch):
    state: dict = {}
    monkeypatch.setattr(presentation.st, "session_state", state)
    assert display.chart_config("attn_weights")["toImageButtonOptions"] == {
        "format": "svg", "filename": "attn_weights"}
    state[presentation.EXPORT] = "png"
    assert display.chart_config("x")["toImageButtonOptions"]["format"] == "png"
    state[presentation.EXPORT] = "gif"  # not offered: back to the default
    assert display.chart_config("x")["toImageButtonOptions"]["format"] == "svg"
    # a download's name says the page, the model and the view
    state["model"] = "reverse (trained here)"
    assert display.download_name("attention", "cross_L1H2") == "attention_reverse-trained-here_cross_L1H2"
    state["model"] = "../../etc"
    assert display.download_name("x", "a/b") == "x_etc_a-b"


# --- every page of the app in presentation mode (AppTest) ---------------------------------------

PAGES_WITH_CHARTS = ["1_model", "3_embeddings", "4_attention", "5_explain", "6_heads", "7_patching", "8_masks",
                     "9_decoding", "10_training"]


@pytest.mark.parametrize("page", PAGES_WITH_CHARTS)
def test_every_chart_of_every_page_is_restyled_and_exports_svg(page, tiny_models_dir, monkeypatch):
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    from ui.state import settings

    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(tiny_models_dir))
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=90)
    at.session_state[settings.MODEL] = "tiny-reverse"
    at.session_state[settings.TEXT] = "abc12"
    at.session_state[presentation.PRESENTATION] = True
    at.switch_page(f"pages/{page}.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    charts = at.get("plotly_chart")
    assert charts
    for chart in charts:
        spec = json.loads(chart.proto.spec)
        sizes = font_sizes(spec)
        assert spec["layout"]["font"]["size"] >= projector.MIN_FONT_PX
        assert all(size >= projector.MIN_FONT_PX for _, size in sizes), (chart.proto.id, sizes)
        config = json.loads(chart.proto.config)
        assert config["toImageButtonOptions"]["format"] == "svg"


def test_a_figure_is_restyled_once_per_variant_and_the_copies_follow_the_figures_life() -> None:
    import gc

    from ui.charts import ticks
    from ui.figures.margins import fit_margins
    from ui.figures.projector import _RESTYLED, for_projector, restyled

    tokens = [f"tok{i}" for i in range(30)]
    fig = go.Figure(go.Heatmap(z=[[0.1] * 30, [0.3] * 30], colorscale="Blues"))
    fig.update_xaxes(**ticks(tokens))
    shown = restyled(fig, "projector")
    assert restyled(fig, "projector") is shown and shown is not fig
    assert shown.to_dict() == for_projector(fig).to_dict()
    assert fig.data[0].colorscale != shown.data[0].colorscale  # the original is untouched
    half = restyled(fig, "half")
    assert restyled(fig, "half") is half and half is not shown
    # half a page (400 px), or a projector's column at 14 px, holds fewer of the 30 labels than the full width
    assert fit_margins(go.Figure(fig)).layout.xaxis.tickvals == tuple(range(30))
    assert len(half.layout.xaxis.tickvals) < 30 and len(restyled(fig, "projector-half").layout.xaxis.tickvals) < 30
    assert fig.layout.xaxis.ticktext == tuple(tokens)
    mine = [key for key in _RESTYLED if key[0] == id(fig)]  # (id of the figure, variant)
    assert sorted(variant for _, variant in mine) == ["half", "projector", "projector-half"]
    del fig, shown, half
    gc.collect()  # other tests' figures may go too: only this figure's copies are counted
    assert not [key for key in mine if key in _RESTYLED]


def test_bar_values_are_never_shrunk_and_translucent_lines_are_strengthened():
    bars = go.Figure(go.Bar(x=[0.9, 0.05], y=["a", "b"], orientation="h", text=["0.900", "0.050"],
                            textposition="auto"))
    shown = projector.for_projector(bars)
    assert shown.layout.uniformtext.minsize == projector.MIN_FONT_PX and shown.layout.uniformtext.mode == "show"
    from ui.charts.head_view import head_view

    weights = np.array([[[0.9, 0.1], [0.3, 0.7]]])
    fig = head_view(weights, ["a", "b"], ["c", "d"], query=0)
    lines = [t for t in fig.data if t.mode == "lines" and t.opacity is not None]
    projected_lines = [t for t in projector.for_projector(fig).data if t.mode == "lines" and t.opacity is not None]
    before, after = [t.opacity for t in lines], [t.opacity for t in projected_lines]
    assert all(a > b for a, b in zip(after, before, strict=True) if b < 1)  # stronger
    assert sorted(range(len(before)), key=before.__getitem__) == sorted(range(len(after)), key=after.__getitem__)
    assert max(after) == 1.0  # the selected query's strongest line at full strength
    assert all(t.line.width >= projector.MIN_LINE_PX for t in projected_lines)
