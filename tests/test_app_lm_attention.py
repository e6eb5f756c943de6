"""The Attention page on decoder-only models (issue 41 item 7): whole Hugging Face folders of GPT-2, Qwen3, Mistral
(a sliding window on every layer) and Gemma-2 (soft-caps, query_pre_attn_scalar, a window on every other layer),
built by ``lm_folders``, opened by the app. Checked against the model's own trace: the causal heatmap (upper
triangle 0), the sliding window's zeros and its drawn edge, the key/value groups of grouped-query attention, and the
step-by-step panel's numbers and formula."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from app_helpers import assert_clean, chart_figure, open_page

from transformer import load_pretrained
from transformer.explain.inside_head import inside_head
from ui.state.settings import RECORD_TOP_K

MODELS = ("gpt2", "qwen3", "mistral", "gemma2")
TEXT = "the cat sat on the mat because"
F32 = 2**-23  # the grid and large heatmaps travel as float32 (ui.charts.heatmap_trace): weights <= 1 to this


def traced(folder: Path):
    """The model's own trace of the app's input, as the shared analysis computes it."""
    pipe = load_pretrained(folder)
    return pipe, pipe.trace(TEXT, record_top_k=RECORD_TOP_K, warn=False).trace


@pytest.mark.parametrize("name", MODELS)
def test_causal_self_attention_only_and_the_heatmap_is_the_traced_head(lm_app_models_dir: Path, name: str) -> None:
    at = open_page("4_attention", TEXT, name)
    assert_clean(at)
    kinds = at.radio(key="attn_kind")
    assert kinds.options == ["Causal self-attention"] and kinds.value == "decoder"
    captions = " ".join(c.value for c in at.caption)
    assert "no encoder" in captions and "no cross-attention" in captions
    pipe, trace = traced(lm_app_models_dir / name)
    z = np.asarray(chart_figure(at, "attn_weights").data[0].z, dtype=float)
    expected = trace.attention("decoder", 0)[0, 0].numpy()  # layer 0, head 0: the page's first choice
    np.testing.assert_allclose(z, expected, atol=F32, rtol=0)
    assert not np.triu(z, k=1).any()  # causal: no query reads a later token
    titles = [a.text for a in chart_figure(at, "attn_grid").layout.annotations]
    grouped = pipe.config.kv_heads != pipe.config.n_heads
    assert all(("· KV " in t) == grouped for t in titles if t.startswith("L"))


@pytest.mark.parametrize("name", ["qwen3", "mistral", "gemma2"])
def test_the_key_value_groups_are_marked(lm_app_models_dir: Path, name: str) -> None:
    at = open_page("4_attention", TEXT, name)
    assert_clean(at)
    config = load_pretrained(lm_app_models_dir / name).config
    size = config.n_heads // config.kv_heads
    groups = at.dataframe[0].value
    assert groups["heads in the group"].tolist() == [size] * config.kv_heads
    assert groups["query heads"].tolist() == [", ".join(str(g * size + i) for i in range(size))
                                              for g in range(config.kv_heads)]
    titles = [a.text for a in chart_figure(at, "attn_grid").layout.annotations if a.text.startswith("L")]
    assert titles[: config.n_heads] == [f"L0 H{h} · KV {h // size}" + (" · w5" if config.sliding_window and
                                                                       config.layer_type(0) == "sliding" else "")
                                        for h in range(config.n_heads)]


@pytest.mark.parametrize(("name", "layer", "sliding"), [("mistral", 0, True), ("gemma2", 0, True),
                                                       ("gemma2", 1, False)])
def test_the_sliding_window_is_visible_on_its_layers(lm_app_models_dir: Path, name: str, layer: int,
                                                     sliding: bool) -> None:
    at = open_page("4_attention", TEXT, name, attn_layer=layer, attn_head="average")
    assert_clean(at)
    window = load_pretrained(lm_app_models_dir / name).config.sliding_window
    fig = chart_figure(at, "attn_weights")
    z = np.asarray(fig.data[0].z, dtype=float)
    beyond = np.tril(np.ones_like(z, dtype=bool), k=-window)  # key j <= query i - window
    assert beyond.any()  # the test's input is longer than the window
    edges = [t for t in fig.data if t.type == "scatter" and "sliding window" in (t.name or "")]
    captions = " ".join(c.value for c in at.caption)
    if sliding:
        assert not z[beyond].any() and len(edges) == 1
        assert f"only its last {window} tokens" in captions
    else:  # a full layer reads beyond the window
        assert z[beyond].any() and not edges
        assert "is a full layer" in captions


@pytest.mark.parametrize("name", ["gemma2", "qwen3", "gpt2"])
def test_the_step_by_step_panel_follows_the_model(lm_app_models_dir: Path, name: str) -> None:
    at = open_page("4_attention", TEXT, name, attn_steps=True, attn_head=1, attn_query=9)
    assert_clean(at)
    pipe, trace = traced(lm_app_models_dir / name)
    steps = next(d.value for d in at.dataframe if "softmax weight" in d.value.columns)
    # the page's numbers are inside_head's on the same trace (equal to the model's own weights on every family:
    # test_lm_inside_head.py); the same float64 computation of the same inputs, so equal to float64 rounding
    expected = inside_head(pipe.model, trace, "decoder", 0, 1, 9).weights.numpy()
    np.testing.assert_allclose(steps["softmax weight"].to_numpy(), expected, atol=1e-15, rtol=0)
    text = " ".join(m.value for m in at.markdown)
    c = pipe.config
    assert ("RoPE" in text) == (c.positional == "rotary")
    if name == "gemma2":
        assert "3·tanh(· / 3)" in steps.columns and f"× {24 ** -0.5:.4g}" in steps.columns
        assert r"\tanh" in text and r"\sqrt{24}" in text
    else:
        assert f"÷ √{c.d_k}" in steps.columns
    kv_note = " ".join(c.value for c in at.caption)
    assert ("reads key/value head 0" in kv_note) == (c.kv_heads != c.n_heads)


def test_heads_switched_off_on_a_language_model(lm_app_models_dir: Path) -> None:
    at = open_page("4_attention", TEXT, "qwen3", attn_ablate=["decoder L0 H1", "decoder L1 H0"])
    assert_clean(at)
    labels = at.multiselect(key="attn_ablate").options
    assert labels and not [label for label in labels if label.startswith(("cross", "encoder"))]
    assert "Continuation with every head" in " ".join(m.value for m in at.markdown)


@pytest.mark.parametrize("kind", ["encoder", "cross"])
def test_a_decoder_only_second_model_has_no_encoder_or_cross_attention(lm_models_dir: Path, kind: str) -> None:
    from ui.sections import compare

    second = compare.Second("gpt2", "gpt2", load_pretrained(lm_models_dir / "gpt2"), "gpt2 · GPT-2", "gpt2")
    assert compare.same_shape_note(second, kind, 0, 0) == f"gpt2 · GPT-2 is a decoder-only model: it has no {kind} " \
        "attention."
    assert compare.same_shape_note(second, "decoder", 0, 0) is None
