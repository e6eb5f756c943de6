"""ui.figures.margins: margins estimated from a figure's own labels (the browser test checks that Plotly
never has to grow them on any page; these check the rules one by one)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from ui.charts import MARGIN, heatmap
from ui.figures import margins as m
from ui.figures.cache import FigureCache
from ui.figures.projector import for_projector


def bare(**layout) -> go.Figure:
    return go.Figure(go.Scatter(x=[0, 1], y=[0, 1]), layout={"margin": MARGIN, **layout})


def test_text_width_reads_text_as_plotly_shows_it() -> None:
    assert m.text_width("", 12) == 0
    assert m.text_width("mmmm", 12) > m.text_width("iiii", 12) > 0
    assert m.text_width("ab", 24) == pytest.approx(2 * m.text_width("ab", 12))
    assert m.text_width("&lt;s&gt;", 12) > m.text_width("s", 12)  # entities as the characters they stand for
    assert m.text_width("<s>", 12) == 0  # a tag to Plotly (strike-through), as to ui.charts.label
    assert m.text_width("<b>word</b>", 12) == pytest.approx(m.text_width("word", 12))  # tags take no room
    assert m.text_width("short<br>a longer line", 12) == pytest.approx(m.text_width("a longer line", 12))
    assert m.text_lines("one<br>two<BR/>three") == 3


@pytest.mark.parametrize(("low", "high", "longest"), [(0, 1, "0.0"), (-4.12, 4.12, "-4"), (0, 30_000, "30k"),
                                                      (0.001, 0.004, "0.0040")])
def test_number_labels_are_as_long_as_plotlys(low: float, high: float, longest: str) -> None:
    labels = m.number_labels(low, high)
    assert max(map(len, labels)) == len(longest)


def test_number_labels_of_an_empty_or_infinite_range() -> None:
    assert m.number_labels(float("nan"), 1.0) == ["0"]
    assert m.number_labels(2.0, 2.0)  # one value: still labels


def test_a_y_title_takes_its_standoff_and_a_line() -> None:
    plain = m.needed_margins(bare())
    titled = m.needed_margins(bare(yaxis_title="weight"))
    assert titled["l"] - plain["l"] == pytest.approx(m.Y_TITLE_STANDOFF_PX + m.TITLE_FONT_PX * m.LINE_HEIGHT
                                                     - m.UNTITLED_PAD_PX)
    empty = m.needed_margins(bare(yaxis_title=""))  # Plotly keeps the room for an empty title
    assert empty["l"] == pytest.approx(titled["l"])  # a turned title's length takes no room across


def test_longer_tick_labels_need_a_wider_left_margin() -> None:
    short = heatmap(np.eye(3), ["a", "b", "c"], ["a", "b", "c"])
    long = heatmap(np.eye(3), ["a", "b", "c"], ["a", "b", "▁because"])
    assert m.needed_margins(long)["l"] - m.needed_margins(short)["l"] == pytest.approx(
        m.text_width("▁because", 12) - m.text_width("c", 12))


def test_category_labels_of_a_horizontal_bar_chart_are_its_words() -> None:
    fig = go.Figure(go.Bar(x=[0.5, 0.3], y=["▁zweihundert", "▁drei"], orientation="h"))
    assert m.needed_margins(fig)["l"] >= m.LABEL_GAP_PX + m.text_width("▁zweihundert", 12)


def test_crowded_x_labels_turn_and_need_more_bottom() -> None:
    few = heatmap(np.eye(3), ["word"] * 3, ["a"] * 3)
    many = heatmap(np.eye(30), ["word"] * 30, ["a"] * 30)
    assert m.needed_margins(many)["b"] > m.needed_margins(few)["b"]
    turned = go.Figure(go.Bar(x=[0, 1], y=[1, 2]), layout={"xaxis": {"tickvals": [0, 1], "ticktext": ["a", "▁because"],
                                                                      "tickangle": -90}})
    flat = go.Figure(go.Bar(x=[0, 1], y=[1, 2]), layout={"xaxis": {"tickvals": [0, 1], "ticktext": ["a", "▁because"],
                                                                    "tickangle": 0}})
    assert m.needed_margins(turned)["b"] > m.needed_margins(flat)["b"]


def test_colour_bars_right_of_the_plot_need_the_right_margin_inner_ones_do_not() -> None:
    outside = heatmap(np.eye(3), ["a"] * 3, ["a"] * 3, colorbar_title="weight")
    assert m.needed_margins(outside)["r"] >= m.COLORBAR_THICKNESS_PX + m.text_width("weight", 14)
    inside = heatmap(np.eye(3), ["a"] * 3, ["a"] * 3)
    inside.data[0].colorbar.x = 0.42
    overhang = m.text_width("a", 12) / 2 + m.PUSH_PAD_PX  # the last x label, centred on the right edge, + Plotly's pad
    assert m.needed_margins(inside)["r"] == pytest.approx(overhang)
    hidden = heatmap(np.eye(3), ["a"] * 3, ["a"] * 3)
    hidden.data[0].showscale = False
    assert m.needed_margins(hidden)["r"] == pytest.approx(overhang)


def test_a_vertical_legend_takes_the_right_and_a_horizontal_one_the_bottom() -> None:
    traces = [go.Scatter(x=[0, 1], y=[0, 1], name="integrated_gradients"), go.Scatter(x=[0, 1], y=[1, 0], name="b")]
    vertical = go.Figure(traces)
    assert m.needed_margins(vertical)["r"] >= m.LEGEND_SYMBOL_PX + m.text_width("integrated_gradients", 12)
    horizontal = go.Figure(traces, layout={"legend": {"orientation": "h"}})
    none = m.needed_margins(go.Figure(traces, layout={"showlegend": False}))
    assert m.needed_margins(horizontal)["r"] == none["r"]
    assert m.needed_margins(horizontal)["b"] > none["b"]


def test_a_legend_below_a_tall_plot_is_as_far_below_as_its_y_says() -> None:
    """A horizontal legend at y = -0.02 hangs 2% of the plot's own height below it (the Attention page's lines
    chart, 893 px tall at 1280 px: Plotly grew its bottom margin 52 -> 55 when 250 px was assumed)."""
    traces = [go.Scatter(x=[0, 1], y=[0, 1], name="queries"), go.Scatter(x=[0, 1], y=[1, 0], name="keys")]
    legend = {"orientation": "h", "y": -0.02, "x": 0}
    short = m.needed_margins(go.Figure(traces, layout={"legend": legend, "xaxis": {"visible": False}}))["b"]
    tall = go.Figure(traces, layout={"legend": legend, "xaxis": {"visible": False}, "height": 893,
                                     "margin": {"t": 50, "b": 52}})
    assert m.needed_margins(tall)["b"] == pytest.approx(short + 0.02 * (893 - 50 - 52 - m.PLOT_HEIGHT_PX))


def test_fit_margins_grows_never_shrinks_and_marks_the_figure() -> None:
    fig = heatmap(np.eye(3), ["a"] * 3, ["a"] * 3, colorbar_title="weight")
    assert not m.is_fitted(fig)
    m.fit_margins(fig)
    assert m.is_fitted(fig)
    need = m.needed_margins(fig)
    for side in ("l", "r", "b"):
        assert getattr(fig.layout.margin, side) >= need[side] + m.SLACK_PX
    assert fig.layout.margin.t == MARGIN["t"]  # the title's room is the chart's own
    assert fig.layout.xaxis.ticklabeloverflow == "allow"
    roomy = bare(margin={"l": 300, "r": 300, "t": 50, "b": 300})
    m.fit_margins(roomy)
    assert (roomy.layout.margin.l, roomy.layout.margin.r, roomy.layout.margin.b) == (300, 300, 300)


def test_cached_figures_come_fitted_and_presentation_fits_its_larger_text() -> None:
    cache = FigureCache()
    fig = cache.get(heatmap, (np.eye(4), ["a"] * 4, ["▁word"] * 4), {"y_title": "query"}, False)
    assert m.is_fitted(fig)
    projected = for_projector(fig)
    assert m.is_fitted(projected)
    assert projected.layout.margin.l > fig.layout.margin.l  # 14 px ticks and 16 px titles need more room


# --- crowded token axes (ui.figures.crowding) ---------------------------------------------------

def test_a_crowded_token_axis_keeps_every_kth_label_so_that_neighbours_do_not_touch() -> None:
    from ui.charts import ticks
    from ui.figures.crowding import label_pitch_px, step_needed, thin_ticks

    # by hand: 40 cells on a 300 px plot (400 - 50 - 50) are 7.5 px apart; a 12 px label turned upright
    # needs 12 * 1.3 + 1 = 16.6 px: every 3rd (22.5 px) is the first that fits, every 2nd (15 px) does not
    assert label_pitch_px(["a"], 12, "x", None) == pytest.approx(16.6)
    assert step_needed(40, 300, 1, 16.6) == 3 and step_needed(40, 300, 2, 16.6) == 2
    assert step_needed(40, 1000, 1, 16.6) == 1
    tokens = [f"t{i}" for i in range(40)]
    fig = go.Figure(go.Heatmap(z=np.zeros((40, 40))), layout=dict(height=350, margin=dict(l=50, r=50, t=25, b=25)))
    fig.update_xaxes(**ticks(tokens))
    fig.update_yaxes(**ticks(tokens))
    assert thin_ticks(fig, 400)
    assert fig.layout.xaxis.tickvals == tuple(range(0, 40, 3))
    assert fig.layout.xaxis.ticktext == tuple(tokens[::3])
    assert fig.layout.xaxis.tickangle == -90 and fig.layout.yaxis.tickangle is None  # upright, not Plotly's 30°
    assert fig.layout.yaxis.tickvals == tuple(range(0, 40, 3))  # 300 px high: the same 7.5 px per row
    assert not thin_ticks(fig, 400)  # thinned once, it fits


def test_level_labels_need_their_width_and_other_axes_are_left_alone() -> None:
    from ui.figures.crowding import label_pitch_px, thin_ticks
    from ui.figures.text_size import text_width

    assert label_pitch_px(["wide label", "a"], 12, "x", 0) == pytest.approx(text_width("wide label", 12) + 3.6)
    assert label_pitch_px(["a"], 12, "x", -30) == pytest.approx(12 * 1.3 / 0.5)  # turned 30 degrees
    assert label_pitch_px(["a", "b<br>c"], 10, "y", None) == pytest.approx(26.0)  # two lines
    fig = go.Figure(go.Bar(x=list(range(10)), y=[1] * 10), layout=dict(margin=dict(l=0, r=0)))
    fig.update_xaxes(tickvals=[0, 1, 3, 4, 5, 6, 7, 8, 9, 10], ticktext=["a"] * 10)  # not evenly spaced
    assert not thin_ticks(fig, 100)
    fig.update_xaxes(tickvals=list(range(10)), ticktext=["a long token"] * 10, tickangle=0)
    assert not thin_ticks(fig, 800)  # 80 px apart: each 65 px wide plus a 3.6 px gap fits
    assert thin_ticks(fig, 600)  # 60 px apart: every 2nd
    assert fig.layout.xaxis.tickvals == tuple(range(0, 10, 2))
    roomy = go.Figure(go.Bar(x=list(range(4)), y=[1] * 4), layout=dict(margin=dict(l=0, r=0)))
    roomy.update_xaxes(tickvals=list(range(4)), ticktext=["a", "b", "c", "d"])
    assert not thin_ticks(roomy, 800) and roomy.layout.xaxis.tickangle is None  # level labels that fit: untouched
    plain = go.Figure(go.Scatter(x=list(range(100)), y=list(range(100))))
    assert not thin_ticks(plain, 100)  # Plotly's own numeric ticks: nothing to thin


def test_upright_labels_overhang_the_right_edge_by_half_a_line() -> None:
    fig = go.Figure(go.Heatmap(z=np.zeros((3, 40)), showscale=False), layout=dict(margin=dict(l=0, r=0, t=0, b=0)))
    fig.update_xaxes(tickvals=list(range(40)), ticktext=[f"t{i}" for i in range(40)], tickangle=-90)
    pad = m.PUSH_PAD_PX  # Plotly's Plots.autoMargin adds it to the labels' reach past the axis
    assert m.needed_margins(fig)["r"] == pytest.approx(12 * 1.3 / 2 + pad)  # centred on the last cell, turned
    fig.update_xaxes(tickangle=0)
    assert m.needed_margins(fig)["r"] == pytest.approx(m.text_width("t39", 12) / 2 + pad)


def test_an_x_axis_in_a_middle_panel_pushes_the_right_margin_too() -> None:
    """Plotly pushes the figure's right margin by how far any x axis's labels reach past that axis's own end, not
    only the last panel's (Masks' five panels were laid out twice for it)."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2)
    fig.add_trace(go.Heatmap(z=np.zeros((3, 40)), showscale=False), row=1, col=1)
    fig.add_trace(go.Heatmap(z=np.zeros((3, 2)), showscale=False), row=1, col=2)
    fig.update_xaxes(tickvals=list(range(40)), ticktext=[f"t{i}" for i in range(40)], tickangle=-90, row=1, col=1)
    fig.update_xaxes(showticklabels=False, row=1, col=2)
    assert m.needed_margins(fig)["r"] == pytest.approx(12 * 1.3 / 2 + m.PUSH_PAD_PX)


def _values(n: int) -> np.ndarray:
    return np.linspace(-0.99, 0.99, n * n).reshape(n, n)  # "-0.99": the widest two-decimal number


def test_cell_numbers_stay_where_they_fit_and_go_to_hover_where_they_would_touch() -> None:
    """Issue 45: an 11-column heatmap in half the page (Attention, Patching, Decoding) wrote 12 px numbers about
    27 px wide into cells of 20 px, into each other. Whether they fit is decided from the cell's width as drawn."""
    from ui.figures.cell_text import CELL_PAD_PX, cell_px
    from ui.figures.crowding import HALF_WIDTH_PX
    from ui.figures.text_size import text_width

    tokens = [f"t{i}" for i in range(11)]
    full = m.fit_margins(heatmap(_values(11), tokens, tokens))
    half = m.fit_margins(heatmap(_values(11), tokens, tokens), HALF_WIDTH_PX)
    widest = text_width("-0.99", 12) + CELL_PAD_PX
    assert cell_px(full, full.data[0], m.FULL_WIDTH_PX)[0] >= widest and full.data[0].texttemplate == "%{text}"
    assert cell_px(half, half.data[0], HALF_WIDTH_PX)[0] < widest and not half.data[0].texttemplate
    assert "%{text}" in half.data[0].hovertemplate and half.data[0].text[0][0] == "-0.99"  # hover keeps them
    few = m.fit_margins(heatmap(_values(5), tokens[:5], tokens[:5]), HALF_WIDTH_PX)
    assert few.data[0].texttemplate == "%{text}"  # five columns in half the page: room to spare


def test_cell_numbers_of_panels_are_measured_in_their_own_panel() -> None:
    """Masks: three panels across the page, each a third of it: 11 columns there are as narrow as in half a page."""
    from ui.figures import side_by_side

    tokens = [f"t{i}" for i in range(11)]
    one = m.fit_margins(heatmap(_values(11), tokens, tokens))
    three = m.fit_margins(side_by_side([heatmap(_values(11), tokens, tokens) for _ in range(3)], cols=3))
    assert one.data[0].texttemplate and not any(trace.texttemplate for trace in three.data)


def test_presentation_writes_cell_numbers_only_where_its_larger_text_fits() -> None:
    from ui.figures.crowding import HALF_WIDTH_PX
    from ui.state.presentation import MIN_CHART_PX

    tokens = [f"t{i}" for i in range(10)]
    assert for_projector(heatmap(_values(10), tokens, tokens), HALF_WIDTH_PX).data[0].texttemplate is None
    wide = for_projector(heatmap(_values(10), tokens, tokens), MIN_CHART_PX).data[0]
    assert wide.texttemplate == "%{text}" and wide.textfont.size >= 14


def test_a_title_above_a_row_of_panel_titles_gets_the_top_margin_to_clear_them() -> None:
    """Issue 45, presentation mode: Attention's and Explain's grids drew their 20 px title into the titles of their
    first row of panels (Plotly centres the title in a 50 px top margin)."""
    from ui.figures import side_by_side

    tokens = ["a", "b", "c"]
    panels = side_by_side([heatmap(np.eye(3), tokens, tokens, title=f"panel {i}") for i in range(2)])
    panels.update_layout(title="All of them")
    fitted = for_projector(panels)
    panel_px, title_px = 16 * m.TEXT_BOX_EM, 20 * m.TEXT_BOX_EM
    # the title, centred in the margin, ends above where the panel titles begin
    assert fitted.layout.margin.t / 2 + title_px / 2 <= fitted.layout.margin.t - panel_px
    untitled = m.fit_margins(side_by_side([heatmap(np.eye(3), tokens, tokens, title="p") for _ in range(2)]))
    assert untitled.layout.margin.t == MARGIN["t"]  # no figure title: the margin stays


def test_a_short_colour_bar_keeps_fewer_ticks() -> None:
    """Issue 45, presentation mode: Patching's two-row heatmaps drew a colour bar 90 px long with five 14 px ticks,
    "-0.5" into "0"."""
    short = for_projector(heatmap(np.array([[-1.0, 0.5], [0.2, 1.0]]), ["a", "b"], ["x", "y"], height=276))
    bar = short.data[0].colorbar
    length = (276 - short.layout.margin.t - short.layout.margin.b) * 0.75
    assert bar.nticks * 14 * m.LINE_HEIGHT * 2 <= length + 14 * m.LINE_HEIGHT * 2
    assert bar.nticks < 5


def test_cell_text_is_read_from_a_numpy_array_too() -> None:
    """The logit lens's heatmap carries its cell texts as a numpy array: its truth value is ambiguous, so the fit
    read it as `trace.text or ()` and failed the Explain page."""
    import numpy as np
    import plotly.graph_objects as go

    from ui.figures.cell_text import text_fits

    fig = go.Figure(go.Heatmap(z=[[1, 2], [3, 4]], text=np.array([["a", "b"], ["c", "d"]]), texttemplate="%{text}"))
    assert text_fits(fig, fig.data[0], 1200)
    fig.data[0].text = np.array([["a very long label indeed" * 4] * 2] * 2)
    assert not text_fits(fig, fig.data[0], 300)
