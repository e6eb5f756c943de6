"""The app's chart functions, called directly: shapes, token labels, and values equal to the trace's tensors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from transformer.network.config import TransformerConfig
from transformer.network.model import count_parameters
from transformer.network.positional import sinusoidal_table
from ui.charts import attention as ac
from ui.charts import embeddings as ec
from ui.charts import heatmap, labels, matrix_frame
from ui.charts import masks as mc
from ui.charts import model as modelc
from ui.charts import tokens as tc
from ui.compute import masks as mask_compute


@pytest.fixture(scope="module")
def traced(tiny_pipeline):
    """The tiny model's translation of one input, with labels for both sides."""
    result = tiny_pipeline.trace("abc12", max_len=6)
    src = [tiny_pipeline.src_tokenizer.id_to_piece(i) for i in result.trace["src.ids"][0].tolist()]
    tgt = [tiny_pipeline.tgt_tokenizer.id_to_piece(i) for i in result.trace["tgt.ids"][0].tolist()]
    return result, src, tgt


def ticks(fig, axis: str = "xaxis") -> list[str]:
    """Tick labels as the user reads them (Plotly gets "<s>" escaped as "&lt;s&gt;")."""
    text = list(fig.layout[axis].ticktext)
    return [t.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&") for t in text]


# --- shared helpers ---------------------------------------------------------------------------


def test_heatmap_keeps_repeated_tokens_apart_and_shows_minus_inf() -> None:
    matrix = np.array([[0.5, -np.inf], [1.0, 2.0]])
    fig = heatmap(matrix, ["a", "a"], ["<s>", "</s>"])
    assert list(fig.layout.yaxis.ticktext) == labels(["<s>", "</s>"]) == ["&lt;s&gt;", "&lt;/s&gt;"]
    assert fig.data[0].customdata[1][0][0] == "&lt;/s&gt;"  # hover text is escaped too
    z = np.asarray(fig.data[0].z, dtype=float)
    assert z.shape == (2, 2) and np.isnan(z[0, 1]) and z[1, 1] == 2.0
    assert fig.data[0].text[0][1] == "-inf"
    assert ticks(fig) == ["a", "a"] and list(fig.layout.xaxis.tickvals) == [0, 1]  # two columns, not one
    causal = np.triu(np.full((60, 60), -np.inf), 1)  # 3,600 cells: no string per cell, masked cells blank
    big = heatmap(causal, [str(i) for i in range(60)], [str(i) for i in range(60)])
    assert big.data[0].text is None and big.data[0].customdata is None and np.isnan(big.data[0].z[0][1])
    with pytest.raises(ValueError):
        heatmap(matrix, ["a"], ["q", "q"])


def test_cell_numbers_are_readable_or_left_to_hover() -> None:
    from ui.charts import CELL_FONT_PX, MAX_CELLS_PER_SIDE_WITH_TEXT

    small = heatmap(np.full((3, 4), 0.123456), list("abcd"), list("xyz"))
    assert small.data[0].texttemplate == "%{text}" and small.data[0].textfont.size == CELL_FONT_PX >= 12
    assert small.data[0].text[0][0] == "0.12"  # two decimals fit a cell; the CSV has them all
    n = MAX_CELLS_PER_SIDE_WITH_TEXT + 1
    wide = heatmap(np.zeros((2, n)), [str(i) for i in range(n)], ["q", "r"])
    assert not wide.data[0].texttemplate  # too narrow for numbers: hover only, no 7-px text


def test_long_axes_write_every_kth_label_but_hover_names_every_cell() -> None:
    tokens = [f"t{i}" for i in range(100)]
    fig = heatmap(np.zeros((100, 3)), ["a", "b", "c"], tokens)
    assert len(fig.layout.yaxis.ticktext) <= 40 and fig.layout.yaxis.ticktext[1] == tokens[fig.layout.yaxis.tickvals[1]]
    assert [row[0][0] for row in fig.data[0].customdata] == tokens


def test_cells_named_by_their_numbers_or_too_many_to_name_send_no_names_and_float32() -> None:
    """A string per cell costs the server and the browser on every visit: none where the hover by position
    says the same (positions labelled 0..n-1) or where there are too many cells; their numbers go as float32."""
    values = np.random.default_rng(0).normal(size=(50, 50))
    numbered = heatmap(values, [str(i) for i in range(50)], [str(i) for i in range(50)], x_title="position",
                       y_title="position")
    trace = numbered.data[0]
    assert trace.customdata is None and trace.hovertemplate.startswith("position %{y}<br>position %{x}")
    assert np.asarray(trace.z).dtype == np.float32 and np.allclose(np.asarray(trace.z), values, atol=1e-6)
    tokens = [f"t{i}" for i in range(50)]
    named = heatmap(values, tokens, tokens).data[0]  # 2,500 cells of tokens: named, numbers exact
    assert named.customdata[3][7][1] == "t7" and np.asarray(named.z).dtype == np.float64
    large = heatmap(np.zeros((51, 50)), tokens, [*tokens, "t50"]).data[0]
    assert large.customdata is None and np.asarray(large.z).dtype == np.float32


def test_side_by_side_writes_shared_rows_once() -> None:
    """A panel whose rows are its left neighbour's (same labels, as many rows) shows no y labels of its own; one
    with other rows, or the first of a row of panels, keeps them."""
    from ui.figures import side_by_side

    words, other = ["a", "b", "c"], ["x", "y", "z"]
    panels = [heatmap(np.eye(3), words, words), heatmap(np.ones((3, 3)), words, words),
              heatmap(np.eye(3), words, other), heatmap(np.eye(3), words, other),
              heatmap(np.eye(2), words[:2], other[:2])]
    fig = side_by_side(panels, cols=2)
    shown = [fig.layout[f"yaxis{'' if i == 0 else i + 1}"].showticklabels is not False for i in range(5)]
    assert shown == [True, False, True, False, True]  # rows: (a b c | same), (x y z | same), (x y)
    assert side_by_side([panels[0], panels[2]], cols=2).layout.yaxis2.showticklabels is not False  # other rows
    assert side_by_side([panels[0], panels[4]], cols=2).layout.yaxis2.showticklabels is not False  # fewer rows


def test_matrix_frame_labels_rows_and_columns_by_position() -> None:
    frame = matrix_frame(np.eye(2), ["x", "x"], ["y", "z"])
    assert list(frame.index) == ["0:x", "1:x"] and list(frame.columns) == ["0:y", "1:z"]
    assert "0:x" in frame.to_csv()


# --- attention ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross"])
def test_attention_heatmap_is_the_traced_head(traced, kind: str) -> None:
    result, src, tgt = traced
    queries, keys = (src, src) if kind == "encoder" else (tgt, tgt) if kind == "decoder" else (tgt, src)
    expected = result.trace.attention(kind, 1)[0, 1].double().numpy()
    weights = ac.head_weights(result.trace, kind, 1, 1)
    np.testing.assert_array_equal(weights, expected)
    fig = ac.attention_heatmap(weights, queries, keys)
    np.testing.assert_array_equal(np.asarray(fig.data[0].z, dtype=float), expected)
    assert ticks(fig, "xaxis") == keys and ticks(fig, "yaxis") == queries
    assert np.asarray(fig.data[0].z).shape == (len(queries), len(keys))


def test_head_average_is_the_mean_over_heads(traced) -> None:
    result, _, _ = traced
    average = ac.head_weights(result.trace, "cross", 0, None)
    np.testing.assert_allclose(average, result.trace.attention("cross", 0)[0].double().mean(0).numpy())
    np.testing.assert_allclose(average.sum(-1), 1.0, atol=1e-6)


def test_scores_heatmap_leaves_masked_cells_blank(traced) -> None:
    result, _, tgt = traced
    scores = ac.head_scores(result.trace, "decoder", 0, 0)
    fig = ac.scores_heatmap(scores, tgt, tgt)
    z = np.asarray(fig.data[0].z, dtype=float)
    future = np.triu(np.ones_like(scores, dtype=bool), k=1)
    assert np.isneginf(scores[future]).all() and np.isnan(z[future]).all()
    np.testing.assert_array_equal(z[~future], result.trace.scores("decoder", 0)[0, 0].double().numpy()[~future])


def test_head_grid_has_every_layer_and_head(traced) -> None:
    result, _, _ = traced
    fig = ac.head_grid(result.trace, "encoder")
    n_heads = result.trace.attention("encoder", 0).size(1)
    assert len(fig.data) == 2 * n_heads
    np.testing.assert_array_equal(np.asarray(fig.data[n_heads + 1].z, dtype=float),
                                  result.trace.attention("encoder", 1)[0, 1].double().numpy())
    assert fig.layout.annotations[n_heads + 1].text == "L1 H1"
    assert not any(axis.showticklabels for axis in (fig.layout.xaxis, fig.layout.yaxis2))  # no tokens given
    # hover by position from the cell's own x and y: no string per cell (48 panels at opus-mt size)
    assert all(t.customdata is None and "%{y}" in t.hovertemplate for t in fig.data)


def test_head_grid_names_the_tokens_on_its_outer_axes(traced) -> None:
    result, _, _ = traced
    length = result.trace.attention("encoder", 0).size(-1)
    tokens = [f"t{i}" for i in range(length)]
    fig = ac.head_grid(result.trace, "encoder", query_tokens=tokens, key_tokens=tokens)
    n_heads = result.trace.attention("encoder", 0).size(1)
    axes = {name: fig.layout[name] for name in fig.layout if name.startswith(("xaxis", "yaxis"))}
    labelled = sorted(name for name, axis in axes.items() if axis.showticklabels)
    # the first column's y axes (panels 1 and n_heads + 1) and the bottom row's x axes
    expected = {"yaxis", f"yaxis{n_heads + 1}"} | {f"xaxis{n_heads + h + 1}" for h in range(n_heads)}
    assert set(labelled) == {name.replace("axis1", "axis") for name in expected}
    ticks = list(fig.layout.yaxis.ticktext)
    assert ticks[0] == "t0" and len(ticks) == min(length, len(range(0, length, -(-length // ac.GRID_TICKS))))


def test_query_row_chart_shows_one_row(traced) -> None:
    result, src, tgt = traced
    weights = ac.head_weights(result.trace, "cross", 0, 0)
    fig = ac.query_row_chart(weights, 2, tgt, src)
    np.testing.assert_array_equal(np.asarray(fig.data[0].y, dtype=float), weights[2])
    assert ticks(fig) == src


def test_head_labels_round_trip_to_an_ablation() -> None:
    labels = ac.head_labels(2, 3, 4)
    assert len(labels) == (2 + 3 + 3) * 4 and labels[0] == "encoder L0 H0" and labels[-1] == "cross L2 H3"
    assert ac.parse_heads(["cross L1 H2", "cross L1 H0", "encoder L0 H3"]) == {("cross", 1): [0, 2],
                                                                              ("encoder", 0): [3]}
    with pytest.raises(ValueError, match="not a head label"):
        ac.parse_heads(["cross 1 2"])


def test_logit_change_frame(traced, tiny_pipeline) -> None:
    result, _, tgt = traced
    logits = result.trace["logits"][0]
    vocab = [tiny_pipeline.tgt_tokenizer.id_to_piece(i) for i in range(logits.size(-1))]
    same = ac.logit_change_frame(tgt, logits, logits, vocab)
    assert len(same) == len(tgt) and (same["max |logit change|"] == 0).all() and not same["changed"].any()
    with torch.inference_mode():
        ablated = tiny_pipeline.model(result.trace["src.ids"], result.trace["tgt.ids"],
                                      ablate={("cross", 0): [0, 1], ("cross", 1): [0, 1]})[0]
    changed = ac.logit_change_frame(tgt, logits, ablated, vocab)
    assert (changed["max |logit change|"] > 0).all()


# --- masks --------------------------------------------------------------------------------------


def test_batch_masks_and_their_effect(tiny_pipeline) -> None:
    src = tiny_pipeline.encode_source(["abcdef", "ab"])  # (2, S), the second row padded
    s = src.size(1)
    assert (src[1] == 0).any()
    tgt = torch.tensor([[2, 5, 6, 7], [2, 5, 0, 0]])
    masks = mask_compute.batch_masks(src, tgt, 0)
    assert masks["source padding"].shape == (2, 1, 1, s) and masks["causal"].shape == (1, 1, 4, 4)
    assert masks["decoder (causal & padding)"].shape == (2, 1, 4, 4) and masks["memory"].shape == (2, 1, 1, s)
    decoder = mc.mask_matrix(masks["decoder (causal & padding)"], 1, 4, 4)
    np.testing.assert_array_equal(decoder, np.tril(np.ones((4, 4), bool)) & np.array([1, 1, 0, 0], bool))
    fig = mc.mask_heatmap(decoder, list("abcd"), list("wxyz"), title="decoder")
    np.testing.assert_array_equal(np.asarray(fig.data[0].z), decoder.astype(int))
    assert ticks(fig) == list("wxyz") and ticks(fig, "yaxis") == list("abcd")
    assert fig.data[0].customdata[1][2].tolist() == ["b", "y"] and fig.data[0].text[1][2] == "False"
    big = mc.mask_heatmap(np.tril(np.ones((60, 60), bool)), [f"q{i}" for i in range(60)],
                          [f"k{i}" for i in range(60)], title="decoder")  # 3,600 cells: positions, no text per cell
    assert big.data[0].customdata is None and big.data[0].text is None and "%{z}" in big.data[0].hovertemplate
    assert len(big.to_json()) < len(fig.to_json()) + 30_000  # the cells' numbers only

    from transformer.network.trace import Trace

    trace = Trace()
    with torch.inference_mode():
        tiny_pipeline.model(src, tgt, trace=trace)
    weights = trace.attention("decoder", 0)[1, 0].numpy()
    check = mc.masked_weight_check(weights, decoder)
    assert check["max weight on masked cells"] == 0.0 and check["masked cells"] == int((~decoder).sum())
    assert check["max |row sum - 1|"] < 1e-6
    memory = mc.mask_matrix(masks["memory"], 1, 4, s)
    assert not memory.all()
    assert mc.masked_weight_check(trace.attention("cross", 0)[1, 1].numpy(), memory)["max weight on masked cells"] == 0


def test_batch_frame_and_padding_overview() -> None:
    ids = torch.tensor([[5, 6, 7], [5, 0, 0]])
    pieces = [["a", "b", "c"], ["a"]]
    frame = mc.batch_frame(pieces, ids)
    assert frame.shape == (2, 3) and frame.iloc[1, 2] == "<pad> (0)"
    fig = mc.padding_overview(mask_compute.real_positions(ids, 0), pieces, title="padding")
    np.testing.assert_array_equal(mask_compute.real_positions(torch.tensor([[0, 5, 0]]), 0, decoder=True), [[1, 1, 0]])
    np.testing.assert_array_equal(np.asarray(fig.data[0].z), [[1, 1, 1], [1, 0, 0]])


# --- embeddings ---------------------------------------------------------------------------------


def test_positional_charts_show_the_table() -> None:
    table = sinusoidal_table(20, 8)
    fig = ec.positional_heatmap(table)
    np.testing.assert_allclose(np.asarray(fig.data[0].z, dtype=float), table.double().numpy())
    assert len(ticks(fig)) == 8 and len(ticks(fig, "yaxis")) == 20
    curves = ec.positional_curves(table, [0, 3])
    assert [t.name for t in curves.data] == ["dim 0 (sin, i=0)", "dim 3 (cos, i=1)"]
    np.testing.assert_allclose(np.asarray(curves.data[1].y, dtype=float), table[:, 3].double().numpy())
    similarity = ec.position_similarity(table)
    expected = table.double().numpy() @ table.double().numpy().T
    np.testing.assert_allclose(np.asarray(similarity.data[0].z, dtype=float), expected)
    assert ec.table_frame(table).shape == (20, 8)


@pytest.mark.parametrize("layout", ["interleaved", "marian"])
def test_each_dimension_is_the_wave_its_label_names(layout: str) -> None:
    """``wave`` names each column of the table in either layout: checked against sin / cos computed here."""
    d_model = 10
    table = sinusoidal_table(30, d_model, torch.float64, layout=layout).numpy()
    position = np.arange(30.0)
    for dim in range(d_model):
        kind, i = ec.wave(dim, d_model, layout).split(", i=")
        expected = getattr(np, kind)(position / 10000 ** (2 * int(i) / d_model))
        np.testing.assert_allclose(table[:, dim], expected, atol=1e-7)  # marian: rounded to float32
    assert ec.wave(d_model // 2, d_model, layout) == ("cos, i=0" if layout == "marian" else "cos, i=2")


def test_token_vectors_are_the_traced_embeddings(traced) -> None:
    result, src, _ = traced
    trace = result.trace
    parts = trace["src.embed"][0], trace["src.pos"], trace["src.input"][0]
    fig = ec.token_vectors(*parts, src)
    assert len(fig.data) == 3
    for data, part in zip(fig.data, parts, strict=True):
        np.testing.assert_array_equal(np.asarray(data.z, dtype=float), part.double().numpy())
    assert ticks(fig, "yaxis") == src
    np.testing.assert_allclose(parts[0] + parts[1], parts[2], atol=1e-6)  # dropout is off in eval mode
    frame = ec.vectors_frame(*parts, src)
    assert frame.shape == (3 * len(src), 2 + parts[0].size(1))
    # the positional panel has its own scale, fitted to its values, so it is not washed out
    assert [d.coloraxis for d in fig.data] == ["coloraxis", "coloraxis2", "coloraxis"]
    assert fig.layout.coloraxis2.cmax == pytest.approx(float(parts[1].abs().max()))
    assert fig.layout.coloraxis.cmax == pytest.approx(float(max(parts[0].abs().max(), parts[2].abs().max())))


# --- model --------------------------------------------------------------------------------------


def test_parameter_formulas_match_the_model(tiny_models_dir) -> None:
    from transformer.pipeline import load_pretrained

    for name in ("tiny-reverse", "tiny-numbers"):  # tied and untied embeddings
        pipe = load_pretrained(tiny_models_dir / name)
        counts = count_parameters(pipe.model)
        assert modelc.expected_parameters(pipe.config) == counts
        table = modelc.parameter_table(pipe.config, counts)
        assert table["parameters"].iloc[-1] == pipe.model.num_parameters()
        assert (table["parameters"] == table["formula gives"]).all()
        assert abs(table["share"].iloc[:-1].sum() - 1) < 1e-9


def test_architecture_table(tiny_pipeline) -> None:
    config = tiny_pipeline.config
    table = modelc.architecture_table(config)
    values = dict(zip(table["name"], table["value"], strict=True))
    assert values["d_model"] == str(config.d_model) and values["h"] == str(config.n_heads)
    assert len(modelc.parameter_chart(count_parameters(tiny_pipeline.model)).data[0].x) == 5


def test_the_attention_formula_follows_the_models_switches() -> None:
    """Issue 45: the Attention page showed softmax(QK^T/sqrt(d_k)) on T5, which neither scales nor leaves out its
    position bias. Every place that shows the formula writes it from the config (ui.charts.formulas)."""
    from dataclasses import replace

    from ui.charts import formulas
    from ui.charts import inside_head as head_charts

    paper = TransformerConfig(src_vocab_size=9, tgt_vocab_size=9, d_model=8, n_heads=2, n_layers=1, d_ff=8)
    t5 = replace(paper, scale_attention=False, positional="relative", d_head=3, bias=False)
    assert r"\frac{QK^{T}}{\sqrt{d_k}}" in formulas.attention_latex(paper) and not formulas.formula_note(paper)
    latex = formulas.attention_latex(t5)
    assert r"\sqrt" not in latex and r"\left(QK^{T} + B\right)" in latex
    assert formulas.attention_latex(t5, mask=True).endswith(r"\left(QK^{T} + B + M\right)")
    assert "does not divide" in formulas.formula_note(t5) and "cross-attention adds none" in formulas.formula_note(t5)
    assert [formulas.config_score(t5, kind) for kind in formulas.KINDS] == ["QKᵀ + bias", "QKᵀ + bias", "QKᵀ"]
    assert formulas.config_score(paper, "cross") == "QKᵀ / √d_k" == modelc.architecture_table(paper).set_index(
        "name").loc["scores", "value"]
    assert formulas.head_width_latex(paper) == "$d_k = d_{model}/h = 4$" and "= 3$" in formulas.head_width_latex(t5)
    assert head_charts.score_formula(False, True) == "q·k + bias"  # the step-by-step panel: the same writer
    with pytest.raises(ValueError, match="kind"):
        formulas.score_switches(paper, "self")


def test_architecture_table_says_what_the_generator_shares() -> None:
    """Issue 45: T5 v1.1 read "tied embeddings: True ... (the generator has its own)"; the sharing of the two
    embeddings and the generator's weight are two rows."""
    from dataclasses import replace

    paper = TransformerConfig(src_vocab_size=9, tgt_vocab_size=9, d_model=8, n_heads=2, n_layers=1, d_ff=8)
    cases = [(paper, "no", "its own matrix"), (replace(paper, tying="all"), "yes", "the target embedding"),
             (replace(paper, tying="embeddings"), "yes", "its own matrix"),
             (replace(paper, tying="generator"), "no", "the target embedding")]
    for config, shared, generator in cases:
        rows = modelc.architecture_table(config).set_index("name")["value"]
        assert (rows["shared embeddings"], rows["generator"]) == (shared, generator)
        assert "tied embeddings" not in rows.index


def test_parity_summary() -> None:
    a = torch.randn(1, 3, 5)
    assert modelc.parity_summary(a, a.clone())["max |difference|"] == 0.0
    summary = modelc.parity_summary(a, a + 1e-3)
    assert summary["max |difference|"] == pytest.approx(1e-3, rel=1e-3) and summary["same predicted tokens"]


# --- tokens -------------------------------------------------------------------------------------


def test_the_unknown_token_notice_counts_the_ids_and_names_the_id() -> None:
    """Issue 45: a piece can become <unk> in context although no single character does (a word the SentencePiece
    model has but the model's vocabulary lacks): the notice follows the ids, and names the id either way."""
    assert tc.unknown_notice([5, 6, 2], 3, "<unk>") == ""
    told = tc.unknown_notice([7, 3, 9, 3, 2], 3, "<unk>")
    assert told.startswith("2 source tokens became `<unk>`") and "(id 3)" in told and "no piece for" in told
    assert "'ø' '日'" in tc.unknown_notice([3, 3], 3, "<unk>", ["ø", "日"])


def test_chips_escape_html_and_show_ids() -> None:
    html = tc.chips_html(["<s>", "▁hun", "a b", " ", "▁"], [2, 17, 40, 41, 42])
    assert "&lt;s&gt;" in html and "<s>" not in html.replace("<span", "").replace("<small", "")
    assert html.count('class="token-chip"') == 5 and "<small>17</small>" in html and "a␣b" in html
    assert ">␣<br><small>41</small>" in html and ">␣<br><small>42</small>" in html  # the space piece is no blank chip
    assert tc.plural(1, "character") == "1 character" and tc.plural(2, "token") == "2 tokens"
    assert tc.chip_color(1, "<unk>") != tc.chip_color(5, "a") != tc.chip_color(0, "<pad>")
    with pytest.raises(ValueError):
        tc.chips_html(["a"], [1, 2])


def test_vocabulary_search_and_split_comparison(tiny_pipeline) -> None:
    vocab = tiny_pipeline.src_tokenizer.vocab()
    assert tc.search_vocab(vocab, "").equals(vocab)
    hits = tc.search_vocab(vocab, "a")
    assert set(hits["piece"]) >= {"a"} and all("a" in p.lower() for p in hits["piece"])
    digit = vocab.loc[vocab["piece"] == "3", "id"].item()  # the reverse task's strings hold digits
    assert list(tc.search_vocab(vocab, "3")["id"]) == [3, digit]  # id 3 (</s>) by number, the piece "3" by text
    frame = tc.split_comparison({"char": list("abc"), "bpe": ["▁ab", "c"]})
    assert isinstance(frame, pd.DataFrame) and list(frame["pieces"]) == [3, 2]
    table = tc.tokens_frame(["a", "b"], [5, 6])
    assert list(table.columns) == ["position", "piece", "id"]


def test_csv_frames_behind_the_grids(traced) -> None:
    result, src, tgt = traced
    frame = ac.grid_frame(result.trace, "cross", tgt, src)
    n_heads = result.trace.attention("cross", 0).size(1)
    assert len(frame) == 2 * n_heads * len(tgt) * len(src)
    row = frame[(frame["layer"] == 1) & (frame["head"] == 1) & (frame["query"] == 2) & (frame["key"] == 0)]
    assert row["weight"].item() == pytest.approx(result.trace.attention("cross", 1)[0, 1, 2, 0].item())
    assert row["query token"].item() == tgt[2] and row["key token"].item() == src[0]
    masks = mc.masks_frame([("causal", np.tril(np.ones((3, 3), bool)), list("abc"), list("abc"))])
    assert len(masks) == 9 and masks["may attend"].sum() == 6
    similarity = ec.similarity_frame(sinusoidal_table(5, 4))
    assert similarity.shape == (5, 5) and similarity.iloc[0, 0] == pytest.approx(2.0)  # sin^2 + cos^2 per pair


def test_visible_piece_shows_spaces() -> None:
    from ui.charts.tokens import visible_piece

    assert visible_piece(" ") == "␣"
    assert visible_piece("▁") == "␣"
    assert visible_piece("▁Hund") == "▁Hund"  # a word piece keeps SentencePiece's own mark
    assert visible_piece("a b") == "a␣b"


def test_a_default_mask_batch_has_sentences_of_different_lengths() -> None:
    assert mc.different_lengths(["abc", "a", "abcdef", "ab", "xyz"], 3) == ["abc", "a", "abcdef"]
    dates = ["2026-11-21", "2000-05-01", "1999-09-30"]
    outputs = {"2026-11-21": "21. November 2026", "2000-05-01": "1. Mai 2000", "1999-09-30": "30. September 1999"}
    chosen = mc.different_lengths(dates, 3, [len(d) + len(outputs[d]) for d in dates])
    assert chosen[0] == "2026-11-21" and len({len(outputs[d]) for d in chosen}) == 3
    assert mc.different_lengths(["same", "also"], 3) == ["same", "also"]  # nothing better: one length
    assert mc.different_lengths([], 3) == []


def test_word_diff_marks_exactly_the_differing_words_and_cuts_nothing():
    from ui.charts.text_diff import compared_html, word_diff

    left, right = word_diff("der Hund sieht die Katze", "der Hund sieht den Mann")
    assert [w for w, changed in left if changed] == ["die", "Katze"]
    assert [w for w, changed in right if changed] == ["den", "Mann"]
    assert word_diff("a b", "a b") == ([("a", False), ("b", False)], [("a", False), ("b", False)])
    long = " ".join(f"w{i}" for i in range(300))
    shown = compared_html("clean", long, "corrupted", long + " <script>")
    assert "w299" in shown and "&lt;script&gt;" in shown and "<script>" not in shown  # all of it, escaped
    assert shown.count("<span") == 1  # only the added word is marked
    assert "(empty)" in compared_html("a", "", "b", "x")
    left, right = word_diff("cba321", "cbx321")  # a character task: characters
    assert [c for c, changed in right if changed] == ["x"] and len(left) == 6
