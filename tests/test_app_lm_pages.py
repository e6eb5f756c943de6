"""The app on decoder-only folders (issue 41 item 7): GPT-2, Qwen3 (a chat template), Llama-3 (the llama3 RoPE
scaling), Mistral (a sliding window) and Gemma-3 (two rotary bases, window layers) as ``save_pretrained`` writes
them (``lm_folders``), in the app's models folder. Checked: the sidebar (family, a prompt, no language menus, why
there is no expected output, the chat switch and its link), and the Model, Tokenization, Embeddings and Masks pages:
each renders and shows the decoder-only content, its charts' data read from the model.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import math
from pathlib import Path

import app_helpers
import numpy as np
import plotly.io
import pytest
from app_helpers import assert_clean
from streamlit.testing.v1 import AppTest

from transformer import load_pretrained
from ui.sections import architecture
from ui.state import settings

FOLDERS = ("gpt2", "qwen3", "llama3", "mistral", "gemma3_text")
PROMPT = "The cat sat on the mat."
SHORT = "Hi there"


def open_page(page: str, model: str, text: str = PROMPT, **state) -> AppTest:
    return app_helpers.open_page(page, text, model, **state)


def keyed_figure(at: AppTest, key: str):  # noqa: ANN201  (a plotly figure)
    return plotly.io.from_json(next(c for c in at.get("plotly_chart") if c.key == key).proto.spec)


def values(data) -> np.ndarray:  # noqa: ANN001
    """A trace's array as the page sent it: a list, or Plotly's typed array {"dtype", "bdata"} (base64)."""
    if isinstance(data, dict):
        return np.frombuffer(base64.b64decode(data["bdata"]), dtype=data["dtype"]).astype(float)
    return np.asarray(data, dtype=float)


def texts(at: AppTest) -> str:
    return " ".join(e.value for kind in ("markdown", "caption", "subheader", "info") for e in at.get(kind))


# --- the sidebar -----------------------------------------------------------------------------------------------


def test_the_sidebar_takes_a_prompt_names_the_family_and_has_no_language_menus(lm_app_models_dir: Path) -> None:
    at = open_page("2_tokenization", "qwen3")
    assert_clean(at)
    assert "qwen3 · Qwen3" in at.sidebar.selectbox(key=settings.MODEL_WIDGET).options
    assert at.sidebar.text_input(key=settings.TEXT_WIDGET).label == "Prompt"
    assert not [box for box in at.sidebar.selectbox if "lang" in (box.key or "")]
    captions = " ".join(c.value for c in at.sidebar.caption)
    assert "No expected output: a language model continues the prompt" in captions
    assert "Hugging Face Qwen3 model qwen3" in captions
    assert at.sidebar.toggle(key=settings.CHAT_WIDGET).value is False  # a chat template: the switch, off
    assert "src_lang" not in at.query_params and settings.CHAT not in at.query_params
    gpt2 = open_page("2_tokenization", "gpt2")
    assert_clean(gpt2)
    assert not [t for t in gpt2.sidebar.toggle if t.key == settings.CHAT_WIDGET]  # no template, no switch


def test_the_chat_switch_puts_the_prompt_through_the_template_and_links_carry_it(lm_app_models_dir: Path) -> None:
    pipe = load_pretrained(lm_app_models_dir / "qwen3")
    plain, chat = pipe.prompt_ids(PROMPT), pipe.prompt_ids(PROMPT, chat=True)
    assert plain != chat
    at = open_page("2_tokenization", "qwen3")
    table = at.expander[0].dataframe[0].value
    assert table[table["part"] == "prompt"]["id"].tolist() == plain
    at.sidebar.toggle(key=settings.CHAT_WIDGET).set_value(True).run()
    assert_clean(at)
    table = at.expander[0].dataframe[0].value
    assert table[table["part"] == "prompt"]["id"].tolist() == chat  # the page's tokens are the template's
    rendered = pipe.tokenizer.render_chat([{"role": "user", "content": PROMPT}])
    assert [c.value for c in at.code if c.value == rendered.strip()]  # the rendered prompt (st.code strips it)
    assert at.query_params[settings.CHAT] == "1"
    linked = AppTest.from_file(app_helpers.APP, default_timeout=app_helpers.TIMEOUT)
    linked.query_params.update({"model": "qwen3", "text": PROMPT, settings.CHAT: "1"})
    linked.switch_page("pages/2_tokenization.py")
    linked.run()
    assert_clean(linked)
    assert linked.sidebar.toggle(key=settings.CHAT_WIDGET).value is True
    table = linked.expander[0].dataframe[0].value
    assert table[table["part"] == "prompt"]["id"].tolist() == chat


# --- the Model page ---------------------------------------------------------------------------------------------


def test_the_model_page_draws_one_stack_with_its_key_value_heads(lm_app_models_dir: Path) -> None:
    at = open_page("1_model", "qwen3")
    assert_clean(at)
    pipe = load_pretrained(lm_app_models_dir / "qwen3")
    c = pipe.config
    svg = next(m.value for m in at.markdown if "<svg" in m.value)
    assert "One stack: no encoder, no cross-attention" in svg and "Cross-attention" not in svg
    attention = architecture.decoder_only_stack(c)[2][0]  # the attention box's text, wrapped into the SVG's lines
    assert f"{c.n_heads}\u00a0query heads share {c.kv_heads}\u00a0key/value heads (GQA" in attention
    assert "RoPE turns q and k" in attention and "q/k RMSNorm" in attention
    assert all(html.escape(line) in svg for line in architecture.wrap(attention, architecture.FONT_PX,
                                                                      architecture.SINGLE_BOX_WIDTH - 16))
    sizes = at.table[0].value
    assert str(sizes.loc["h_kv", "value"]) == str(c.kv_heads) and "N (encoder)" not in sizes.index
    assert any("no encoder and no source sentence" in m.value for m in at.markdown)
    assert any("test_decoder_network.py" in i.value for i in at.info)  # checked against transformers instead
    parameters = at.table[1].value
    assert parameters.loc["total", "parameters"] == parameters.loc["total", "formula gives"]
    gpt2 = open_page("1_model", "gpt2")
    assert_clean(gpt2)
    attention = architecture.decoder_only_stack(gpt2_config := load_pretrained(lm_app_models_dir / "gpt2").config)[2][0]
    assert attention.startswith(f"Masked self-attention: {gpt2_config.n_heads}\u00a0heads,")  # one k/v head each
    assert "RoPE" not in attention and "learned positions" in architecture.decoder_only_stack(gpt2_config)[1][0]


@pytest.mark.parametrize("name", FOLDERS)
def test_the_parameter_formulas_count_every_decoder_family(lm_app_models_dir: Path, name: str) -> None:
    from transformer.network.model import count_parameters
    from ui.charts.model import expected_parameters

    pipe = load_pretrained(lm_app_models_dir / name)
    assert expected_parameters(pipe.config) == count_parameters(pipe.model)


def test_the_score_formula_follows_the_switches(lm_app_models_dir: Path) -> None:
    from ui.charts import formulas

    gemma = load_pretrained(lm_app_models_dir / "gemma3_text").config
    assert formulas.config_score(gemma) == f"RoPE(Q)RoPE(K)ᵀ / √{gemma.query_pre_attn_scalar:g}"
    assert r"KW_{g(i)}^K" in formulas.attention_latex(gemma)
    assert formulas.config_score(load_pretrained(lm_app_models_dir / "gpt2").config) == "QKᵀ / √d_k"
    capped = formulas.config_score(dataclasses.replace(gemma, attn_softcap=50.0, query_pre_attn_scalar=None))
    assert capped == "50·tanh(RoPE(Q)RoPE(K)ᵀ / √d_k / 50)"


# --- the Tokenization page --------------------------------------------------------------------------------------


def test_the_tokenization_page_shows_readable_pieces_and_the_bos(lm_app_models_dir: Path) -> None:
    text = "Hello  world\nagain"
    at = open_page("2_tokenization", "mistral", text)
    assert_clean(at)
    pipe = load_pretrained(lm_app_models_dir / "mistral")
    ids = pipe.prompt_ids(text)
    table = at.expander[0].dataframe[0].value
    prompt = table[table["part"] == "prompt"]
    assert prompt["id"].tolist() == ids
    assert prompt["piece"].tolist() == pipe.tokenizer.display_pieces(ids)
    assert any("␣" in p for p in prompt["piece"]) and any("↵" in p for p in prompt["piece"])
    assert not any("▁" in p for p in prompt["piece"]) and any("▁" in p for p in prompt["stored as"])
    assert bool(prompt["special"].iloc[0]) and ids[0] == pipe.tokenizer.bos_id
    assert "is the BOS (beginning of sequence)" in texts(at)
    gpt2 = open_page("2_tokenization", "gpt2", text)
    assert_clean(gpt2)
    assert "adds no BOS" in texts(gpt2) and "encoder" not in texts(gpt2)


# --- the Embeddings page ----------------------------------------------------------------------------------------


def wavelength_traces(at: AppTest) -> dict[str, np.ndarray]:
    return {trace.name: values(trace.y) for trace in keyed_figure(at, "rope_wavelengths").data}


def test_the_rope_section_draws_the_models_own_frequencies(lm_app_models_dir: Path) -> None:
    from transformer.network.rotary import inverse_frequencies

    at = open_page("3_embeddings", "llama3")
    assert_clean(at)
    assert "Rotary positions: each pair of dimensions turns at its own speed" in texts(at)
    pipe = load_pretrained(lm_app_models_dir / "llama3")
    c, rotary = pipe.config, pipe.model.decoder.rotary
    drawn = wavelength_traces(at)
    # the page's wavelengths are 2 pi / the model's own inv_freq (float32, as the model holds it) in float64
    expected = 2 * math.pi / rotary["full"].inv_freq.double().numpy()
    np.testing.assert_allclose(drawn["this model's θ_i"], expected, rtol=1e-15)
    unscaled = 2 * math.pi / inverse_frequencies(c.d_k, c.rope_theta).double().numpy()
    np.testing.assert_allclose(drawn["unscaled θ_i"], unscaled, rtol=1e-15)
    assert drawn["this model's θ_i"][-1] > drawn["unscaled θ_i"][-1]  # llama3: the slow pairs slowed further
    assert drawn["this model's θ_i"][0] == drawn["unscaled θ_i"][0]  # the fastest kept

    gemma = open_page("3_embeddings", "gemma3_text")
    assert_clean(gemma)
    rotary = load_pretrained(lm_app_models_dir / "gemma3_text").model.decoder.rotary
    drawn = wavelength_traces(gemma)
    np.testing.assert_allclose(drawn["window layers' θ_i (own base)"],
                               2 * math.pi / rotary["sliding"].inv_freq.double().numpy(), rtol=1e-15)
    assert "two sets of wavelengths" in texts(gemma)


def test_only_the_offset_matters_in_the_rope_scores(lm_app_models_dir: Path) -> None:
    from ui.charts import rope
    from ui.compute import positions

    pipe = load_pretrained(lm_app_models_dir / "qwen3")
    count, d_k = 64, pipe.config.d_k
    data = positions.rotary_curves("qwen3-test", pipe, count)
    np.testing.assert_allclose(np.linalg.norm(data.rotated, axis=1), math.sqrt(d_k), rtol=1e-6)  # turns keep length
    # The angles m theta_i are float32 (as the model computes them): each is off by at most half an ulp of a number
    # below count, count * 2^-24 radians; a score sums d_k products of unit terms, so it moves by at most
    # d_k * 2 * count * 2^-24 between two query positions.
    assert rope.offset_spread(data.scores, [count - 1, count // 2, 5]) <= d_k * 2 * count * 2**-24
    at = open_page("3_embeddings", "qwen3")
    curves = keyed_figure(at, "rope_scores").data
    assert len([t for t in curves if t.name and t.name.startswith("query at position")]) == 3


def test_gpt2_draws_its_learned_table_and_no_rope(lm_app_models_dir: Path) -> None:
    at = open_page("3_embeddings", "gpt2")
    assert_clean(at)
    assert "Rotary positions" not in texts(at)
    assert "The learned position vectors" in texts(at) and "GPT-2's wpe" in texts(at)
    assert not [r for r in at.radio if r.key in ("emb_table_side", "emb_side")]  # one stack: no side to choose
    qwen = open_page("3_embeddings", "qwen3")
    assert "The learned position vectors" not in texts(qwen) and "nothing added" in texts(qwen)


# --- the Masks page --------------------------------------------------------------------------------------------


def test_the_masks_page_shows_causal_left_padding_and_the_sliding_window(lm_app_models_dir: Path) -> None:
    from ui.compute import masks

    pipe = load_pretrained(lm_app_models_dir / "mistral")
    batch = masks.lm_batch("mistral-test", "cpu", pipe, [PROMPT, SHORT])
    lengths = [len(pipe.prompt_ids(t)) for t in (PROMPT, SHORT)]
    width, window = max(lengths), pipe.config.sliding_window
    assert batch.attention_mask.sum(axis=1).tolist() == lengths and not batch.attention_mask[1, 0]  # left padding
    assert batch.positions[1, -1] == lengths[1] - 1  # counted from the prompt's own first token
    i, j = np.arange(width)[:, None], np.arange(width)[None, :]
    real = batch.attention_mask[1][None, :]
    expected = (j <= i) & (i - j < window) & real | (i == j) & ~batch.attention_mask[1][:, None]
    np.testing.assert_array_equal(batch.masks["sliding"][1, 0], expected)
    at = open_page("8_masks", "mistral", **{"lm_mask_batch": f"{PROMPT}\n{SHORT}"})
    assert_clean(at)
    titles = str(keyed_figure(at, "lm_mask_panels").layout.annotations)
    assert "Causal mask" in titles and f"Sliding window of {window}" in titles
    assert "sliding window of 5 keys on every layer" in texts(at)
    gpt2 = open_page("8_masks", "gpt2", **{"lm_mask_batch": f"{PROMPT}\n{SHORT}"})
    assert_clean(gpt2)
    titles = str(keyed_figure(gpt2, "lm_mask_panels").layout.annotations)
    assert "Sliding window" not in titles and "Attention mask: padding keys" in titles
    gemma = open_page("8_masks", "gemma3_text")
    assert_clean(gemma)
    assert "layers 0-4" in texts(gemma)  # Gemma-3: five window layers, then a full one
