"""The head view (ui/charts/head_view.py): one line per weight above MIN_WEIGHT, its opacity its weight's bin."""

from __future__ import annotations

import numpy as np
import pytest

from ui.charts.head_view import HEAD_COLORS, LEVELS, MIN_WEIGHT, head_view

W = np.array([
    [[0.9, 0.1, 0.0], [0.01, 0.49, 0.5]],  # head 0: queries 0 and 1 over keys 0..2
    [[0.0, 0.0, 1.0], [0.34, 0.33, 0.33]],  # head 1
])


def lines(fig, head: int) -> list[tuple[float, float, float, float]]:
    """Every drawn (y_query, y_key, opacity, width) of one head."""
    out = []
    for trace in fig.data:
        if trace.mode == "lines" and trace.line.color == HEAD_COLORS[head] and trace.x[0] is not None:
            ys = [y for y in trace.y if y is not None]
            out += [(ys[i], ys[i + 1], trace.opacity, trace.line.width) for i in range(0, len(ys), 2)]
    return out


def bin_edge(weight: float) -> float:
    return next(edge for edge in LEVELS if weight <= edge)


def test_one_line_per_weight_above_the_threshold_at_its_bins_opacity() -> None:
    fig = head_view(W, ["a", "b"], ["x", "y", "z"])
    y_q, y_k = [0.0, 2.0], [0.0, 1.0, 2.0]  # two queries spread over the three rows of the keys
    for head in (0, 1):
        expected = sorted((y_q[q], y_k[k], bin_edge(W[head, q, k]), 2.5)
                          for q in range(2) for k in range(3) if W[head, q, k] > MIN_WEIGHT)
        assert sorted(lines(fig, head)) == pytest.approx(expected)
    legend = [t.name for t in fig.data if t.showlegend is not False and t.name]
    assert legend == ["head 0", "head 1"]


def test_a_selected_query_keeps_its_lines_strong_and_fades_the_others() -> None:
    fig = head_view(W, ["a", "b"], ["x", "y", "z"], heads=[0], query=1)
    drawn = lines(fig, 0)
    strong = [d for d in drawn if d[3] == 2.5]
    faded = [d for d in drawn if d[3] != 2.5]
    assert {d[0] for d in strong} == {2.0} and len(strong) == 2  # query 1's keys 1 and 2
    assert {d[0] for d in faded} == {0.0} and all(d[2] < 0.2 for d in faded)
    assert lines(fig, 1) == []  # head 1 not asked for
    queries, keys = fig.data[-2], fig.data[-1]
    assert list(queries.customdata) == [0, 1] and list(keys.customdata) == [-1, -1, -1]
    assert queries.text[1] == "<b>b</b>" and queries.text[0] == "a"


def test_tokens_are_escaped_and_shapes_checked() -> None:
    fig = head_view(W[:, :1, :2], ["<s>"], ["</s>", "y"])
    assert fig.data[-2].text[0] == "&lt;s&gt;"
    with pytest.raises(ValueError):
        head_view(W, ["a"], ["x", "y", "z"])
    with pytest.raises(ValueError):
        head_view(W[0], ["a", "b"], ["x", "y", "z"])


def test_inside_head_charts_show_the_steps_numbers() -> None:
    import torch

    from transformer import Trace, Transformer, TransformerConfig
    from transformer.explain.inside_head import inside_head
    from ui.charts.inside_head import output_chart, scores_to_weights_panels, steps_frame, vectors_panels

    model = Transformer(TransformerConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=8, n_heads=2, n_layers=1,
                                          d_ff=16, dropout=0.0)).eval()
    src, tgt = torch.tensor([[5, 6, 7, 0]]), torch.tensor([[1, 8, 9]])  # 0 is padding
    trace = Trace()
    with torch.no_grad():
        model(src, tgt, trace=trace)
    steps = inside_head(model, trace, "cross", 0, 1, 2)
    keys = ["a", "b", "c", "<pad>"]
    frame = steps_frame(steps, keys)
    assert list(frame["mask"]) == ["may look"] * 3 + ["masked (-inf)"]
    assert frame["softmax weight"].iloc[3] == 0 and frame["softmax weight"].sum() == pytest.approx(1)
    assert np.allclose(frame["÷ √4"], frame["q·k"] / 2)
    out = output_chart(steps, keys)
    assert np.allclose(np.asarray(out.data[0].z)[-1], steps.output.numpy())
    assert out.data[0].z.__len__() == 5  # four weighted values and their sum
    scores, weights = scores_to_weights_panels(steps, keys)
    assert scores.data[0].text[3] == "masked" and np.allclose(weights.data[0].y, steps.weights.numpy())
    assert [len(panel.data) for panel in vectors_panels(steps, "<s>", keys)] == [1, 1, 1]
