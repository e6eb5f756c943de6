"""The pages' pure parts on each family's switches: parameter formulas equal to the model's count, the diagram's
and the size table's words, the position charts (T5's buckets and head biases, learned and fairseq tables), and
the head view's score terms (q·k without 1/√d_k, plus T5's bias)."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import torch
from family_models import NAMES, build_pair

from transformer import Trace
from transformer.network.config import TransformerConfig
from transformer.network.model import count_parameters
from ui.charts import embeddings, positions
from ui.charts import inside_head as head_charts
from ui.charts import model as model_charts
from ui.sections import architecture as arch

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def pairs() -> dict:
    return {name: build_pair(name) for name in NAMES}


@pytest.mark.parametrize("name", NAMES)
def test_parameter_formulas_equal_the_models_count(pairs, name: str) -> None:
    model = pairs[name].ours
    counts = count_parameters(model)
    assert sum(counts.values()) == model.num_parameters()  # BART's learned tables counted too
    assert model_charts.expected_parameters(model.config) == counts
    table = model_charts.parameter_table(model.config, counts)
    assert (table["parameters"] == table["formula gives"]).all()
    assert ("positional" in counts) == (model.config.positional == "learned")


@pytest.mark.parametrize("name", NAMES)
def test_diagram_and_sizes_follow_the_switches(pairs, name: str) -> None:
    c = pairs[name].ours.config
    root = ET.fromstring(arch.architecture_svg(c))  # well-formed
    words = " ".join(" ".join(p.strip() for p in node.itertext())
                     for node in root.iter("{http://www.w3.org/2000/svg}text")).replace(arch.NBSP, " ")
    t5 = c.positional == "relative"
    assert ("RMSNorm" in words) == t5 and ("LayerNorm" in words) != t5
    assert ("relative position bias" in words) == t5 and (" + PE" in words) == (c.positional == "fairseq")
    assert ("learned positions" in words) == (c.positional == "learned")
    assert ("gated" in words) == c.gated_ff and ("no biases" in words) == (not c.bias)
    assert (f"h x d_k = {c.d_inner}" in words) == (c.d_inner != c.d_model)
    sizes = dict(zip(*model_charts.architecture_table(c)[["name", "value"]].T.values, strict=True))
    assert sizes["scores"] == ("QKᵀ + bias" if t5 else "QKᵀ / √d_k")
    assert sizes["shared embeddings"] == ("yes" if c.shared_embeddings else "no")
    assert sizes["generator"] == ("the target embedding" if c.generator_tied else "its own matrix")
    assert sizes["embedding norm"] == ("yes" if c.embedding_norm else "no")
    own = model_charts.sublayer_latex(c)
    assert ("RMSNorm" in own) == t5 and ("\\odot xW_3" in own) == c.gated_ff and ("b_1" in own) == c.bias
    assert own.startswith("x + ") == c.norm_first


def test_pe_formulas_of_every_layout() -> None:
    from transformer.network.config import POSITIONAL_LAYOUTS

    for layout in POSITIONAL_LAYOUTS:
        assert embeddings.pe_latex(layout, 2)
        assert layout in positions.CITATIONS and layout in positions.INTROS
    assert "P_{\\,pos + 2}" in embeddings.pe_latex("learned", 2)
    assert "PE" not in embeddings.input_latex(False, "relative")
    assert embeddings.input_latex(True, "learned", "layer").startswith(r"x_{pos} = \mathrm{LayerNorm}\left(")
    assert [embeddings.wave(d, 6, "fairseq") for d in (0, 2, 3, 5)] == ["sin, i=0", "sin, i=2", "cos, i=0",
                                                                       "cos, i=2"]
    assert embeddings.wave(6, 7, "fairseq") == "zero (odd d_model)"


def test_learned_table_heatmap_has_its_own_scale() -> None:
    table = np.array([[0.5, -3.0], [2.0, 0.1]])
    fig = embeddings.positional_heatmap(table, "learned")
    assert fig.data[0].zmax == 3.0 and fig.data[0].zmin == -3.0 and "Learned" in fig.layout.title.text
    assert embeddings.positional_curves(table, [0], "learned").layout.yaxis.range is None


def test_t5_bucket_and_bias_charts_read_the_models_table(pairs) -> None:
    from ui.compute.positions import relative_bias

    class View:  # what relative_bias reads of a pipeline
        model = pairs["t5"].ours
        config = model.config

    data = relative_bias("t5-charts", View, 12)
    assert list(data.distances) == list(range(-12, 13))
    decoder = data.buckets["decoder"]
    assert np.isnan(decoder[data.distances > 0]).all() and decoder[data.distances == 0] == 0
    trace = Trace()
    src = torch.tensor([[5, 6, 7, 8, 1]])
    with torch.no_grad():
        View.model(src, torch.tensor([[0, 5, 6]]), trace=trace)
    bias = trace["encoder.position_bias"][0]  # (H, 5, 5)
    for i in range(5):
        for j in range(5):
            column = list(data.distances).index(j - i)
            np.testing.assert_allclose(data.bias["encoder"][:, column], bias[:, i, j].numpy(), rtol=1e-12)
    fig = positions.bucket_map(data.distances, data.buckets)
    assert [t.name for t in fig.data] == ["encoder (bidirectional)", "decoder (causal)"]
    lines = positions.head_bias(data.distances, data.bias["decoder"], "decoder")
    assert len(lines.data) == View.config.n_heads
    shown = positions.input_bias(trace["decoder.position_bias"][0, 1], ["a", "b", "c"], ["a", "b", "c"], 1,
                                 "decoder")
    z = np.asarray(shown.data[0].z, dtype=float)
    assert np.isnan(z[0, 1]) and np.isfinite(z[1, 0])  # later keys masked, earlier ones drawn


def test_t5_position_charts_have_legends_that_stand_clear_of_their_axes() -> None:
    """Issue 45: the bucket chart's legend, hung at y = -0.25, covered its x title and left a blank gap under it;
    the two panels of each head's bias had no legend at all (a figure of panels drew none), and the same head
    had another colour in each panel. Now the legends stand right of the plots, one entry per head for both panels,
    a head one colour everywhere."""
    from ui.figures import side_by_side
    from ui.figures.margins import needed_margins

    distances = np.arange(-8, 9)
    buckets = {"encoder": np.abs(distances) % 4, "decoder": np.where(distances > 0, np.nan, -distances % 4)}
    fig = positions.bucket_map(distances, buckets)
    assert fig.layout.showlegend and fig.layout.legend.orientation != "h"
    assert needed_margins(fig)["r"] > 100  # the legend's room is kept right of the plot, none below
    bias = np.random.default_rng(0).normal(size=(3, distances.size))
    both = side_by_side([positions.head_bias(distances, bias, stack) for stack in ("encoder", "decoder")])
    assert both.layout.showlegend is True
    entries = [t.name for t in both.data if t.showlegend is not False]
    assert entries == ["head 0", "head 1", "head 2"]  # once each
    colours = {}
    for trace in both.data:
        assert colours.setdefault(trace.name, trace.line.color) == trace.line.color  # a head keeps its colour
    assert len(set(colours.values())) == 3


def test_head_view_shows_t5s_score_as_qk_plus_bias(pairs) -> None:
    """The frame's terms add up to the score q·k + b (no 1/√d_k) of a T5 head, and the bias is its own panel."""
    from dataclasses import replace

    from transformer.explain.inside_head import inside_head
    from ui.sections.inside_head import position_bias

    model = pairs["t5"].ours
    trace = Trace()
    with torch.no_grad():
        model(torch.tensor([[5, 6, 7, 1]]), torch.tensor([[0, 5, 6]]), trace=trace)
    steps = inside_head(model, trace, "encoder", 1, 2, 1)
    bias = position_bias(trace, "encoder", 2, 1)
    masked = (steps.dots + bias.double()).masked_fill(~steps.allowed, -math.inf)  # the model's scores
    steps = replace(steps, masked=masked, weights=torch.softmax(masked, -1))
    np.testing.assert_allclose(steps.masked.numpy(), trace.scores("encoder", 1)[0, 2, 1].double().numpy(),
                               rtol=1e-9)
    frame = head_charts.steps_frame(steps, list("abcd"), bias, scale=False)
    assert not any(c.startswith("÷") for c in frame.columns)
    np.testing.assert_allclose(frame["q·k"] + frame[head_charts.BIAS_COLUMN], frame["score"], rtol=1e-12)
    terms, scores, weights = head_charts.scores_to_weights_panels(steps, list("abcd"), bias, scale=False)
    assert [t.name for t in terms.data] == ["q·k", "position bias"] and scores.layout.title.text.startswith(
        "q·k + bias")
    assert position_bias(trace, "cross", 0, 0) is None
    plain = TransformerConfig(src_vocab_size=9, tgt_vocab_size=9, d_model=8, n_heads=2, n_layers=1, d_ff=8)
    assert plain.scale_attention and head_charts.score_formula(True) == "q·k / √d_k"
