"""The decoding and training chart functions, called directly: shapes, labels and values."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
import torch

from ui.charts import training as tc

# --- training: learning-rate schedule ------------------------------------------------


def paper_formula(step: int, d_model: int, warmup: int) -> float:
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def test_schedule_frame_equals_the_paper_formula_at_known_steps():
    frame = tc.lr_schedule_frame(d_model=512, warmup_steps=4000, total_steps=20000, points=50)
    assert list(frame.columns) == ["step", "lr"]
    assert frame["step"].iloc[0] == 1 and frame["step"].iloc[-1] == 20000
    assert 4000 in set(frame["step"])  # the peak is always drawn
    for step, lr in zip(frame["step"], frame["lr"], strict=True):
        assert lr == pytest.approx(paper_formula(int(step), 512, 4000), rel=1e-12)
    peak = frame.loc[frame["lr"].idxmax()]
    assert peak["step"] == 4000
    assert peak["lr"] == pytest.approx((512 * 4000) ** -0.5)
    # values a reader can check by hand
    assert frame.set_index("step").loc[1, "lr"] == pytest.approx(512**-0.5 * 4000**-1.5)
    assert frame.set_index("step").loc[20000, "lr"] == pytest.approx(512**-0.5 * 20000**-0.5)


def test_schedule_factor_scales_the_curve_and_bad_sizes_are_rejected():
    one = tc.lr_schedule_frame(128, 100, 1000, points=20)
    two = tc.lr_schedule_frame(128, 100, 1000, factor=2.0, points=20)
    np.testing.assert_allclose(two["lr"], 2 * one["lr"])
    constant = tc.lr_schedule_frame(128, 100, 1000, points=20, lr_fn=lambda step: 1e-3)
    assert (constant["lr"] == 1e-3).all()
    with pytest.raises(ValueError):
        tc.lr_schedule_frame(0, 100, 1000)
    with pytest.raises(ValueError):
        tc.lr_schedule_frame(128, 100, 0)


def test_schedule_chart_draws_the_frame_and_marks_warmup():
    frame = tc.lr_schedule_frame(64, 50, 500, points=30)
    fig = tc.lr_schedule_chart(frame, warmup_steps=50)
    assert isinstance(fig, go.Figure)
    assert list(fig.data[0].x) == list(frame["step"])
    assert fig.layout.xaxis.title.text == "training step"
    assert any(shape.x0 == 50 for shape in fig.layout.shapes)


# --- training: label smoothing -------------------------------------------------------


def test_label_smoothing_frame_matches_torch_convention():
    vocab = ["<pad>", "<unk>", "<s>", "</s>", "a", "b", "c", "d"]
    frame = tc.label_smoothing_frame(vocab, target=5, epsilon=0.1)
    assert list(frame["token"]) == vocab
    assert frame["probability"].sum() == pytest.approx(1.0)
    assert frame.loc[5, "probability"] == pytest.approx(0.9 + 0.1 / 8)
    assert frame.loc[0, "probability"] == pytest.approx(0.1 / 8)
    assert frame["target"].tolist() == [i == 5 for i in range(8)]
    fig = tc.label_smoothing_chart(frame, epsilon=0.1)
    assert list(fig.layout.xaxis.ticktext)[:4] == ["&lt;pad&gt;", "&lt;unk&gt;", "&lt;s&gt;", "&lt;/s&gt;"]  # not HTML
    # the same target torch builds inside cross_entropy(label_smoothing=0.1)
    import torch
    import torch.nn.functional as F

    logits = torch.randn(1, 8, dtype=torch.float64)
    ours = -(torch.tensor(frame["probability"].to_numpy()) * F.log_softmax(logits, -1)).sum()
    theirs = F.cross_entropy(logits, torch.tensor([5]), label_smoothing=0.1)
    assert float(ours) == pytest.approx(float(theirs), rel=1e-12)


def test_label_smoothing_zero_is_one_hot_and_bad_input_raises():
    frame = tc.label_smoothing_frame(["x", "y", "z"], target=0, epsilon=0.0)
    assert frame["probability"].tolist() == [1.0, 0.0, 0.0]
    fig = tc.label_smoothing_chart(frame, epsilon=0.0)
    assert list(fig.layout.xaxis.ticktext) == ["x", "y", "z"]
    for bad in (dict(target=3, epsilon=0.1), dict(target=0, epsilon=1.0)):
        with pytest.raises(ValueError):
            tc.label_smoothing_frame(["x", "y", "z"], **bad)


# --- training: curves ----------------------------------------------------------------


def test_progress_frame_accepts_dicts_dataclasses_and_nested_metrics():
    from dataclasses import dataclass

    @dataclass
    class Progress:
        step: int
        loss: float
        lr: float

    records = [
        {"step": 20, "loss": 2.0, "lr": 1e-3, "metrics": {"val_loss": 2.5, "bleu": 10.0, "exact_match": 0.25}},
        Progress(step=10, loss=3.0, lr=5e-4),
        {"step": 20, "loss": None, "phase": "done", "metrics": {"bleu": 99.0}},  # test metrics, left out
    ]
    frame = tc.progress_frame(records)
    assert frame["step"].tolist() == [10, 20]  # sorted
    assert frame.loc[1, "bleu"] == 10.0 and math.isnan(frame.loc[0, "bleu"])
    fig = tc.training_curves_chart(frame)
    names = {trace.name for trace in fig.data}
    assert {"train loss", "validation loss", "BLEU", "exact match"} <= names
    exact = next(t for t in fig.data if t.name == "exact match")
    assert list(exact.y) == [25.0]  # a fraction is drawn as a percentage
    assert tc.training_curves_chart(tc.progress_frame([])).data == ()


# --- training: attention snapshots ---------------------------------------------------


def test_attention_frame_and_heatmap_keep_token_labels():
    weights = np.array([[0.7, 0.3], [0.1, 0.9], [0.5, 0.5]])
    frame = tc.attention_frame(weights, ["a", "a"], ["x", "y", "</s>"])
    assert frame.shape == (3, 2)
    assert list(frame.columns) == ["0:a", "1:a"] and list(frame.index) == ["0:x", "1:y", "2:</s>"]
    fig = tc.attention_heatmap(weights, ["a", "a"], ["x", "y", "</s>"], title="step 100")
    np.testing.assert_array_equal(np.asarray(fig.data[0].z), weights)
    assert fig.layout.title.text == "step 100"
    assert list(fig.layout.xaxis.ticktext) == ["a", "a"]
    assert "0:a" in frame.to_csv()
    with pytest.raises(ValueError):
        tc.attention_frame(weights, ["a"], ["x", "y", "z"])


def test_attention_entropy_is_zero_for_one_hot_and_log_n_for_uniform():
    assert tc.attention_entropy(np.eye(3)) == pytest.approx(0.0)
    assert tc.attention_entropy(np.full((2, 4), 0.25)) == pytest.approx(math.log(4))
    fig = tc.attention_entropy_chart([0, 10, 20], [1.0, 0.5, 0.1], current=10)
    assert list(fig.data[0].x) == [0, 10, 20]
    assert isinstance(tc.progress_frame([{"step": 1}]), pd.DataFrame)


# --- decoding ------------------------------------------------------------------------

VOCAB = ["<pad>", "<unk>", "<s>", "</s>", "a", "b", "c", "d", "e", "f"]


def piece(i: int) -> str:
    return VOCAB[i]


@pytest.fixture(scope="module")
def tiny_model():
    import torch

    from transformer import Transformer, TransformerConfig

    torch.manual_seed(0)
    model = Transformer(TransformerConfig(len(VOCAB), len(VOCAB), d_model=16, n_heads=2, n_layers=2, d_ff=32,
                                          max_len=16, dropout=0.0)).eval()
    with torch.no_grad():
        model.generator.bias[3] += 1.5  # make EOS likely enough that some hypotheses finish
    return model


@pytest.fixture(scope="module")
def src():
    import torch

    return torch.tensor([[4, 5, 6, 7]])


def test_top_k_frame_and_chart(tiny_model, src):
    from transformer.decoding import greedy_decode
    from ui.charts import decoding as dc

    step = greedy_decode(tiny_model, src, max_len=6, record=True, record_top_k=4).steps[0]
    frame = dc.top_k_frame(step.top_ids[0], step.top_probs[0], piece, chosen=int(step.token[0]))
    assert list(frame.columns) == ["rank", "id", "token", "probability", "chosen"]
    assert frame["rank"].tolist() == [1, 2, 3, 4]
    assert frame["probability"].is_monotonic_decreasing
    assert frame["chosen"].tolist() == [True, False, False, False]  # greedy takes the most likely
    assert frame["token"].tolist() == [VOCAB[i] for i in frame["id"]]
    fig = dc.top_k_chart(frame)
    assert len(fig.data[0].x) == 4
    assert list(fig.data[0].marker.color) == [dc.CHOSEN_COLOR] + [dc.OTHER_COLOR] * 3


def test_step_attention_rows_are_layers_or_heads(tiny_model, src):
    from transformer.decoding import greedy_decode
    from ui.charts import decoding as dc

    steps = greedy_decode(tiny_model, src, max_len=6, stop_at_eos=False, record=True).steps  # six steps, no EOS
    attn = steps[1].cross_attention[0]  # (L, H, S)
    tokens = ["a", "b", "c", "d"]
    matrix, rows = dc.step_attention(attn)
    assert matrix.shape == (2, 4) and rows == ["layer 0", "layer 1"]
    np.testing.assert_allclose(matrix.sum(axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(matrix[1], attn[1].double().mean(0).numpy())
    heads = dc.step_attention_frame(attn, tokens, layer=1)
    assert list(heads.index) == ["head 0", "head 1"] and list(heads.columns) == ["0:a", "1:b", "2:c", "3:d"]
    np.testing.assert_allclose(heads.to_numpy(), attn[1].double().numpy())
    fig = dc.step_attention_heatmap(attn, tokens, layer=0)
    assert list(fig.layout.xaxis.ticktext) == tokens and list(fig.layout.yaxis.ticktext) == ["head 0", "head 1"]
    with pytest.raises(ValueError):
        dc.step_attention(attn, layer=2)
    with pytest.raises(ValueError):
        dc.step_attention_frame(attn, tokens[:3])
    overall = dc.output_attention([s.cross_attention[0] for s in steps])
    assert overall.shape == (len(steps), 4)
    labels = [str(i) for i in range(len(steps))]
    fig = dc.output_attention_heatmap([s.cross_attention[0] for s in steps], tokens, labels)
    assert np.asarray(fig.data[0].z).shape == (len(steps), 4)


def test_steps_frame_follows_the_greedy_output(tiny_model, src):
    from transformer.decoding import greedy_decode
    from ui.charts import decoding as dc

    result = greedy_decode(tiny_model, src, max_len=8, record=True)
    views = dc.decode_step_views(result)
    assert [v.prefix_ids for v in views] == [[2, *result.tokens[0][:t]] for t in range(len(views))]
    frame = dc.steps_frame(views, piece)
    expected = [piece(t) for t in result.tokens[0]] + (["</s>"] if result.finished[0] else [])
    assert frame["token"].tolist() == expected
    assert frame["step"].tolist() == list(range(1, len(expected) + 1))
    assert ((frame["probability"] > 0) & (frame["probability"] <= 1)).all()
    fig = dc.confidence_chart(frame, current=1)
    assert len(fig.data[0].y) == len(frame) and fig.data[0].marker.color[0] == dc.CHOSEN_COLOR


def test_beam_tree_has_one_node_per_hypothesis(tiny_model, src):
    from transformer.decoding import beam_search
    from ui.charts import decoding as dc

    result = beam_search(tiny_model, src, beam_size=3, max_len=6, early_stopping=False, record=True)[0]
    frame = dc.beam_tree_frame(result.history, piece, best=result.best.tokens)
    assert list(frame.columns) == dc.TREE_COLUMNS
    assert (frame["outcome"] == "root").sum() == 1
    # every live hypothesis of every step is one "kept" node one level deeper than its step
    for t, step in enumerate(result.history[1:], start=1):
        kept = frame[(frame["depth"] == t) & (frame["outcome"] == "kept")]
        assert len(kept) == len(step.beams)
        assert kept["text"].tolist() == [" ".join(piece(i) for i in b.tokens) for b in step.beams]
        np.testing.assert_allclose(kept["log_prob"], [b.log_prob for b in step.beams], rtol=1e-6)
    finished = frame[frame["outcome"] == "finished"]
    assert len(finished) == sum(h.finished for h in result.hypotheses) > 0
    # the best hypothesis's path runs from the root, one node per step
    path = frame[frame["best"]].sort_values("depth")
    assert path["depth"].tolist() == list(range(len(path)))
    assert path["parent"].tolist()[1:] == path["node"].tolist()[:-1]
    assert len(path) == 1 + result.best.length
    with_pruned = dc.beam_tree_frame(result.history, piece, include_pruned=True)
    assert len(with_pruned) == 1 + sum(len(s.candidates) for s in result.history)
    fig = dc.beam_tree_chart(frame)
    markers = sum(len(tr.x) for tr in fig.data if tr.mode == "markers+text")
    assert markers == len(frame)
    # stepping along the best hypothesis: one view per token, EOS last when it finished
    views = dc.beam_step_views(result, bos_id=2, eos_id=3)
    assert [v.chosen for v in views] == list(result.best.tokens) + ([3] if result.best.finished else [])
    assert views[-1].prefix_ids == [2, *result.best.tokens[: len(views) - 1]]
    assert all(0 < v.chosen_prob <= 1 and v.cross_attention.shape == (2, 2, 4) for v in views)
    hyps = dc.hypotheses_frame(result.hypotheses, piece)
    assert hyps["score"].is_monotonic_decreasing and hyps["rank"].iloc[0] == 1


def _label_boxes(fig: go.Figure) -> tuple[list[tuple[float, float, float, float]], list[tuple[float, float]]]:
    """Every shown label's pixel box (left, right, top, bottom) and every marker's centre, from the figure."""
    from ui.charts import decoding as dc

    n_rows = fig.layout.yaxis.range[0] + 0.5
    n_columns = int(fig.layout.xaxis.range[1])  # the x axis spans [-1, n_columns]: half a column beyond each end
    assert fig.layout.xaxis.range[0] == -1
    geometry = dc.tree_geometry(n_rows, n_columns)
    font, half_marker = dc.TREE_FONT_PX, dc.MARKER_PX / 2
    assert fig.layout.height == int(geometry["height"])
    column, row = geometry["column_px"], geometry["row_px"]
    boxes, centres = [], []
    for trace in fig.data:
        if trace.mode != "markers+text":
            continue
        for x, y, text, position in zip(trace.x, trace.y, trace.text, trace.textposition, strict=True):
            cx, cy = x * column, y * row
            centres.append((cx, cy))
            if not text:
                continue
            lines = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").split("<br>")
            width = max(map(len, lines)) * 0.62 * font  # the chart's own (generous) glyph width
            height = len(lines) * font
            top = cy - half_marker - height if position == "top center" else cy + half_marker
            box = (cx - width / 2, cx + width / 2, top, top + height)
            # inside the plot, where Plotly does not cut text (issue 45: the top node's label was cut)
            assert -column <= box[0] and box[1] <= n_columns * column, text
            assert -0.5 * row <= box[2] and box[3] <= (n_rows - 0.5) * row, text
            boxes.append(box)
    return boxes, centres


@pytest.mark.parametrize("beam_size", [4, 8])
def test_beam_tree_labels_never_overlap_on_a_long_date(beam_size):
    """The smear of issue 11 ("-4.20-4.28-4.37…" at beam 4 on a date): no label touches another or a node."""
    from transformer.decoding import beam_search
    from transformer.pipeline import PRETRAINED_DIR, load_pretrained
    from ui.charts import decoding as dc

    pipe = load_pretrained(PRETRAINED_DIR / "dates-de")
    src = pipe.encode_source(["2026-11-21"])
    result = beam_search(pipe.model, src, beam_size=beam_size, max_len=24, early_stopping=False, record=True)[0]
    for pruned in (False, True):
        frame = dc.beam_tree_frame(result.history, pipe.tgt_tokenizer.id_to_piece, best=result.best.tokens,
                                   include_pruned=pruned)
        fig = dc.beam_tree_chart(frame)
        boxes, centres = _label_boxes(fig)
        assert len(centres) == len(frame) and len(boxes) >= result.best.length  # labels are thinned, not gone
        for i, (l1, r1, t1, b1) in enumerate(boxes):
            for l2, r2, t2, b2 in boxes[i + 1:]:
                assert min(r1, r2) - max(l1, l2) <= 0.5 or min(b1, b2) - max(t1, t2) <= 0.5
            for cx, cy in centres:  # no label covers a marker (its own sits just beside it)
                overlap_x = min(r1, cx + dc.MARKER_PX / 2) - max(l1, cx - dc.MARKER_PX / 2)
                overlap_y = min(b1, cy + dc.MARKER_PX / 2) - max(t1, cy - dc.MARKER_PX / 2)
                assert overlap_x <= 0.5 or overlap_y <= 0.5
        if not pruned:  # with room to spare, the best hypothesis's path is labelled whole
            text = {int(n): t for tr in fig.data if tr.mode == "markers+text"
                    for n, t in zip(frame[frame["outcome"] == tr.name]["node"], tr.text, strict=True)}
            assert all(text[int(n)] for n in frame[frame["best"]]["node"])
            # the caption's promise: a node's label carries the log P of its prefix, where a column has room
            geometry = dc.tree_geometry(fig.layout.yaxis.range[0] + 0.5, int(fig.layout.xaxis.range[1] + 0.5))
            room = int(geometry["column_px"] / (0.62 * dc.TREE_FONT_PX))
            for n in frame[frame["best"] & (frame["outcome"] != "root")]["node"]:
                log_p = f'{float(frame.set_index("node").loc[n, "log_prob"]):.1f}'
                assert text[int(n)].endswith(f"<br>{log_p}") or len(log_p) > room, (text[int(n)], room)
            short = dc.beam_tree_chart(frame[frame["depth"] <= 3])  # few steps: room for every log P
            assert all("<br>" in t for tr in short.data if tr.mode == "markers+text" and tr.name != "root"
                       for t in tr.text if t)


# --- every chart that shows tokens escapes them for Plotly --------------------------

SPECIALS = ("<pad>", "<unk>", "<s>", "</s>")


def _strings(value: object) -> list[str]:
    """Every string of a figure's JSON: titles, tick labels, bar names, marker text, hover data."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list | tuple | np.ndarray):
        return [s for item in value for s in _strings(item)]
    return []


def assert_escaped(fig: go.Figure) -> None:
    shown = _strings(fig.to_plotly_json())
    raw = [s for s in shown if any(token in s for token in SPECIALS)]
    assert not raw, raw  # Plotly reads text as HTML: a raw "<s>" starts a strike-through
    assert any("&lt;" in s for s in shown), "the special tokens are there, escaped"


def test_token_charts_escape_special_tokens(tiny_model, src):
    from transformer.decoding import beam_search
    from ui.charts import attention as ac
    from ui.charts import decoding as dc

    top = dc.top_k_frame([2, 3, 1, 4], [0.4, 0.3, 0.2, 0.1], piece, chosen=3)
    assert_escaped(dc.top_k_chart(top))
    steps = pd.DataFrame({"step": [1, 2], "token": ["a", "</s>"], "probability": [0.5, 0.9]})
    assert_escaped(dc.confidence_chart(steps, current=2))
    result = beam_search(tiny_model, src, beam_size=3, max_len=6, early_stopping=False, record=True)[0]
    tree = dc.beam_tree_frame(result.history, piece, best=result.best.tokens, include_pruned=True)
    assert_escaped(dc.beam_tree_chart(tree))
    tokens = ["<s>", "a", "</s>"]
    assert_escaped(ac.query_row_chart(np.full((3, 3), 1 / 3), 0, tokens, tokens))
    assert_escaped(tc.label_smoothing_chart(tc.label_smoothing_frame(VOCAB, 4, 0.1), epsilon=0.1))


def test_beam_tree_of_a_long_sentence_writes_whole_tokens_inside_the_plot():
    """Issue 45: on a long sentence (24 steps: columns of 27 px) every label became "▁…", and the top node's label
    was cut at the plot's edge. Now a label may be wider than its column where its neighbours leave room: the
    best path's tokens are written whole, and no label leaves the plot."""
    from transformer.decoding import beam_search
    from transformer.pipeline import PRETRAINED_DIR, load_pretrained
    from ui.charts import decoding as dc

    pipe = load_pretrained(PRETRAINED_DIR / "sentences-en-de")
    src = pipe.encode_source(["the old dog sleeps because the young man sees the green cat"])
    result = beam_search(pipe.model, src, beam_size=4, max_len=40, early_stopping=False, record=True)[0]
    frame = dc.beam_tree_frame(result.history, pipe.tgt_tokenizer.id_to_piece, best=result.best.tokens)
    assert frame["depth"].max() >= 15  # a long tree: the case of the issue
    fig = dc.beam_tree_chart(frame)
    boxes, centres = _label_boxes(fig)  # every label inside the plot
    for i, (l1, r1, t1, b1) in enumerate(boxes):
        for l2, r2, t2, b2 in boxes[i + 1:]:
            assert min(r1, r2) - max(l1, l2) <= 0.5 or min(b1, b2) - max(t1, t2) <= 0.5
    text = {int(n): t for tr in fig.data if tr.mode == "markers+text"
            for n, t in zip(frame[frame["outcome"] == tr.name]["node"], tr.text, strict=True)}
    tokens = dict(zip(frame["node"], frame["token"], strict=True))
    best = [int(n) for n in frame[frame["best"]]["node"]]
    written = [n for n in best if text[n].split("<br>")[0] == dc.label(tokens[n])]
    assert len(written) == len(best), [(tokens[n], text[n]) for n in best]
    assert not any(t.split("<br>")[0].endswith("…") for t in text.values() if t)  # no token here is that long


def test_beam_steps_end_on_the_end_id_that_finished_the_best_hypothesis():
    """A model may list several end ids (a generation_config's eos_token_id list): the last step of the best
    hypothesis shows the one that finished it, with its own probability, not the first end id's (which finished
    a worse hypothesis from the same beam here) nor a NaN where the first end id was no candidate."""
    from transformer.decoding.records import BeamCandidate, BeamResult, BeamState, BeamStep, Hypothesis
    from ui.charts import decoding as dc

    def step(beams, candidates):  # top-2 ids and probabilities per beam, cross-attention (n, L=1, H=1, S=2)
        n = len(beams)
        return BeamStep(beams, candidates, top_ids=torch.tensor([[5, 7]] * n), top_probs=torch.tensor([[.6, .3]] * n),
                        cross_attention=torch.full((n, 1, 1, 2), .5))

    first = math.log(.6)
    history = [
        step([BeamState((), 0.0, None)], [BeamCandidate(0, 5, first, first, "kept")]),
        step([BeamState((5,), first, 0)], [BeamCandidate(0, 7, math.log(.3), first + math.log(.3), "finished"),
                                           BeamCandidate(0, 3, math.log(.2), first + math.log(.2), "finished")]),
    ]
    best = Hypothesis((5,), first + math.log(.3), first + math.log(.3), True)
    worse = Hypothesis((5,), first + math.log(.2), first + math.log(.2), True)
    result = BeamResult([best, worse], history)
    views = dc.beam_step_views(result, bos_id=2, eos_id=[3, 7])
    assert [v.chosen for v in views] == [5, 7]
    assert views[-1].chosen_prob == pytest.approx(.3, rel=1e-12)  # exp(log 0.3): float64 round trip
    only_first = dc.beam_step_views(BeamResult([best], history[:2]), bos_id=2, eos_id=[9, 7])
    assert only_first[-1].chosen == 7 and not math.isnan(only_first[-1].chosen_prob)
