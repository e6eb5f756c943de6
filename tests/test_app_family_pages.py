"""Every page of the app on every family of issue 32: tiny real T5, BART, mBART-50 and NLLB folders (written by
``transformers``' ``save_pretrained``, ``family_folders``), opened through the real network mappings.

Each page opens without an exception or an error message; the pages that show a family's own parts say so: the
Embeddings page draws the model's own positions (T5's buckets and head biases, BART's learned table, NLLB's
fairseq sinusoid), the Attention page's head shows T5's score as q·k + bias without 1/√d_k, and the Model page's
parameter count equals the model's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import app_helpers
import numpy as np
import pytest
from app_helpers import assert_clean
from family_app_folders import FAMILY_FOLDERS, build_family_folder

from transformer.pipeline import load_pretrained
from ui.state import settings

TEXT = "the house is small."
PAGES = ["1_model", "2_tokenization", "3_embeddings", "4_attention", "5_explain", "6_heads", "7_patching", "8_masks",
         "9_decoding", "10_training"]


@pytest.fixture(scope="module")
def family_folders(family_tokenizers: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("family-folders")
    for layout in FAMILY_FOLDERS:
        build_family_folder(root, layout, family_tokenizers[layout], name=f"tiny-{layout}")
    return root


@pytest.fixture
def models_dir(family_folders: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(family_folders))
    return family_folders


def charts(at) -> list[dict]:  # noqa: ANN001
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


@pytest.mark.parametrize("layout", list(FAMILY_FOLDERS))
def test_every_page_opens_on_every_family(models_dir: Path, layout: str) -> None:
    for page in PAGES:
        at = app_helpers.open_page(page, TEXT, f"tiny-{layout}")
        assert_clean(at)
        assert at.title, page


def test_t5_embeddings_page_draws_buckets_and_each_heads_bias(models_dir: Path) -> None:
    model = load_pretrained(models_dir / "tiny-t5").model
    at = app_helpers.open_page("3_embeddings", TEXT, "tiny-t5", emb_reach=20)
    assert_clean(at)
    latex = " ".join(m.value for m in at.latex)
    assert "bucket" in latex and "no } PE" in latex and "\\sqrt" not in latex
    assert any("Raffel et al. 2020" in c.value for c in at.caption)
    buckets, head_bias, input_bias = charts(at)[:3]
    assert [t["name"] for t in buckets["data"]] == ["encoder (bidirectional)", "decoder (causal)"]
    x = np.asarray(buckets["data"][0]["x"])
    assert x[0] == -20 and x[-1] == 20
    lines = [t for t in head_bias["data"] if t["name"].startswith("head")]
    assert len(lines) == 2 * model.config.n_heads  # one per head, encoder and decoder
    table = model.encoder.relative_bias.table.weight.detach().numpy()  # (buckets, H)
    encoder_buckets = np.asarray(buckets["data"][0]["y"], dtype=int)
    np.testing.assert_allclose(np.asarray(lines[1]["y"], dtype=float), table[encoder_buckets, 1], rtol=1e-6)
    assert input_bias["data"][0]["type"] == "heatmap"


@pytest.mark.parametrize(("layout", "title"), [("bart", "Learned position vectors"),
                                               ("nllb", "Sinusoidal positional encoding")])
def test_embeddings_page_draws_the_models_own_table(models_dir: Path, layout: str, title: str) -> None:
    model = load_pretrained(models_dir / f"tiny-{layout}").model
    at = app_helpers.open_page("3_embeddings", TEXT, f"tiny-{layout}", emb_positions=12)
    assert_clean(at)
    table = charts(at)[0]
    assert table["layout"]["annotations"][0]["text"].startswith(title) or title in json.dumps(table["layout"])
    shown = np.asarray(table["data"][0]["z"], dtype=float)
    np.testing.assert_allclose(shown, model.positional.table(12, 0, "src").detach().numpy(), rtol=1e-6)
    latex = " ".join(m.value for m in at.latex)
    assert ("P_{\\,pos + 2}" in latex and "LayerNorm" in latex) if layout == "bart" else "pad} + 1" in latex


def test_t5_attention_head_shows_its_score_as_qk_plus_bias(models_dir: Path) -> None:
    at = app_helpers.open_page("4_attention", TEXT, "tiny-t5", attn_steps=True)
    assert_clean(at)
    text = " ".join(m.value for m in at.markdown)
    assert "b_{h}(j - i)" in text and "does not divide by" in text
    table = next(df.value for df in at.dataframe if "softmax weight" in df.value.columns)
    assert "+ position bias" in table.columns and not any(c.startswith("÷") for c in table.columns)


@pytest.mark.parametrize("layout", list(FAMILY_FOLDERS))
def test_a_piece_that_becomes_unk_is_named_with_its_id_on_every_family(models_dir: Path, layout: str) -> None:
    """Issue 45: the warning about <unk> came only where single characters could be blamed (mBART-50 stayed silent
    while NLLB warned) and never named the id; it follows the ids themselves now, for every family."""
    pipe = load_pretrained(models_dir / f"tiny-{layout}")
    text = "the høuse is small."
    unk = pipe.config.unk_id
    at = app_helpers.open_page("2_tokenization", text, f"tiny-{layout}")
    assert_clean(at)
    warned = [w.value for w in at.warning if "unknown token" in w.value]
    ids = pipe.source_ids(text, warn=False)[1]
    if unk in ids:
        assert len(warned) == 1 and f"(id {unk})" in warned[0] and "'ø'" in warned[0], warned
    else:  # BART's byte-level BPE has a piece for every byte: nothing becomes <unk>
        assert not warned and layout == "bart"


@pytest.mark.parametrize("layout", ["nllb", "mbart50", "bart"])
def test_the_explain_page_starts_past_a_forced_language_code(models_dir: Path, layout: str) -> None:
    """Issue 45: on NLLB the explained token was the forced target language code at first (and a warning followed
    "Run"): the page starts on the first token the model chose itself (BART forces <s> there, the same way)."""
    pipe = load_pretrained(models_dir / f"tiny-{layout}")
    at = app_helpers.open_page("5_explain", TEXT, f"tiny-{layout}")
    assert_clean(at)
    first = pipe.trace(TEXT, warn=False).output_pieces[0]
    rules = pipe.generation_rules
    forced = rules is not None and rules.forced_bos_id is not None  # NLLB, mBART-50: the code; BART: <s>
    assert forced and first == pipe.tgt_tokenizer.id_to_piece(rules.forced_bos_id), (layout, first)
    assert layout == "bart" or first in pipe.tgt_tokenizer.language_codes
    assert at.session_state["explain_row"] == (1 if forced else 0)


def test_t5s_corrupted_twin_keeps_its_prefix_and_changes_one_token(models_dir: Path) -> None:
    """Issue 45: on T5 the corrupted box held a literal "German<unk>" and a second change: the twin was the pieces
    joined back, an <unk> included. It is the input with one token's text changed, as the reader typed the rest."""
    from ui.sections import heads_navigation as navigation

    pipe = load_pretrained(models_dir / "tiny-t5")
    text = "translate English to German: the house is small."  # the tiny vocabulary has no capitals: <unk>s
    at = app_helpers.open_page("7_patching", text, "tiny-t5")
    assert_clean(at)
    twin = at.text_input(key=navigation.CORRUPT).value
    assert twin.startswith("translate English to German: the house is ") and "<unk>" not in twin, twin
    ids, twin_ids = pipe.src_tokenizer.encode(text), pipe.src_tokenizer.encode(twin)
    assert len(ids) == len(twin_ids) and sum(a != b for a, b in zip(ids, twin_ids, strict=True)) == 1, twin


def test_t5s_formula_is_its_own_on_every_page(models_dir: Path) -> None:
    """Issue 45: the Attention page's equation read softmax(QK^T/sqrt(d_k)) on T5 while its step-by-step panel said
    T5 neither scales nor leaves out its position bias; the Masks page's did the same, and the Model page read
    "tied embeddings: True ... (the generator has its own)"."""
    at = app_helpers.open_page("4_attention", TEXT, "tiny-t5")
    assert_clean(at)
    equation = at.latex[0].value
    assert "\\sqrt" not in equation and "QK^{T} + B" in equation
    assert any("does not divide" in c.value for c in at.caption)
    at = app_helpers.open_page("8_masks", TEXT, "tiny-t5")
    assert_clean(at)
    assert "\\sqrt" not in at.latex[0].value and "QK^{T} + B + M" in at.latex[0].value
    at = app_helpers.open_page("1_model", TEXT, "tiny-t5")
    assert_clean(at)
    sizes = at.table[0].value["value"]
    assert sizes["scores"] == "QKᵀ + bias" and (sizes["shared embeddings"], sizes["generator"]) == (
        "yes", "its own matrix")


@pytest.mark.parametrize("layout", list(FAMILY_FOLDERS))
def test_model_page_counts_the_models_parameters(models_dir: Path, layout: str) -> None:
    pipe = load_pretrained(models_dir / f"tiny-{layout}")
    at = app_helpers.open_page("1_model", TEXT, f"tiny-{layout}")
    assert_clean(at)
    table = at.table[1].value  # parameters per part: a static table, whose long formulas wrap
    assert table["parameters"].iloc[-1] == pipe.model.num_parameters()
    assert (table["parameters"] == table["formula gives"]).all()
    sizes = dict(zip(at.table[0].value.index, at.table[0].value["value"], strict=True))
    assert ("RMSNorm" in sizes) == (layout == "t5") and ("LayerNorm" in sizes) != (layout == "t5")
    own = at.latex[-1].value  # this model's sub-layer, under its sizes
    assert ("\\mathrm{RMSNorm}" in own and "\\odot" in own) if layout == "t5" else "b_2" in own


# Run in a fresh interpreter: the Model page's first run, up to its diagram (pages/1_model.py draws it from
# ``first_config`` before importing torch). Prints, per folder name, the diagram (or None) and then whether
# torch was imported.
EARLY_DIAGRAM = """
import json, sys
from transformer.hub.families import config_of
from ui.sections import architecture
svgs = {}
for name in sys.argv[1:]:
    architecture.st.query_params = {"model": name}
    config = architecture.first_config()
    svgs[name] = architecture.architecture_svg(config) if config is not None else None
print(json.dumps({"svgs": svgs, "torch": "torch" in sys.modules}))
"""


def test_model_pages_early_diagram_is_drawn_for_every_family_without_torch(models_dir: Path) -> None:
    """The Model page draws its diagram from config.json before torch and the model load, for a T5, BART, mBART or
    NLLB folder too (it waited for torch and the load: their config readers imported torch), and it is the diagram
    the loaded model draws, so nothing changes when the model arrives. Reading the config imports no torch
    (``transformer.hub.families``), checked in a fresh interpreter."""
    from ui.sections import architecture

    names = [f"tiny-{layout}" for layout in FAMILY_FOLDERS]
    env = {**os.environ, settings.MODELS_DIR_ENV: str(models_dir)}
    done = subprocess.run([sys.executable, "-c", EARLY_DIAGRAM, *names], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1], env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["torch"] is False, "reading a family's config.json imported torch"
    for name in names:
        svg = result["svgs"][name]
        assert svg is not None and "architecture-diagram" in svg, name
        assert svg == architecture.architecture_svg(load_pretrained(models_dir / name).config), name


def test_a_family_folder_starts_with_examples_it_can_read(models_dir: Path) -> None:
    """A Hugging Face folder ships no examples: the sidebar offers English sentences where the model reads English
    (T5 with its task prefix, Raffel et al. 2020), and none where the chosen source language is another."""
    from transformer.hub.families.t5 import TRANSLATE_PREFIX as T5_TRANSLATE_PREFIX
    from transformer.hub.family_config import ENGLISH_EXAMPLES
    from ui.compute.analysis import hub_examples

    at = app_helpers.open_page("2_tokenization", None, "tiny-t5")
    assert_clean(at)
    menu = at.selectbox(key=settings.EXAMPLE_WIDGET)
    assert list(menu.options) == [T5_TRANSLATE_PREFIX + text for text in ENGLISH_EXAMPLES]
    assert at.session_state[settings.TEXT].startswith(T5_TRANSLATE_PREFIX)  # not an empty input
    for layout in ("bart", "nllb"):
        at = app_helpers.open_page("2_tokenization", None, f"tiny-{layout}")
        assert_clean(at)
        assert list(at.selectbox(key=settings.EXAMPLE_WIDGET).options) == list(ENGLISH_EXAMPLES), layout
    assert hub_examples("m2m_100", "nllb", "fra_Latn") == [] and hub_examples("mbart", "m", "de_DE") == []
    assert hub_examples("mbart", "m", "en_XX") == list(ENGLISH_EXAMPLES)
    assert hub_examples("marian", "opus-mt-de-en", None) == [] and hub_examples("marian", "opus-mt-en-fr", None)


def test_the_explain_page_says_which_baseline_it_used_and_refuses_a_singular_one(models_dir: Path) -> None:
    """T5 adds no positions to its embeddings and normalises them first: the page's integrated gradients start
    from <pad>, its caption saying so and why; the zero baseline, on the norm's singular point, is refused with
    the reason, not drawn. NLLB adds positions: its default stays zero."""
    at = app_helpers.open_page("5_explain", TEXT, "tiny-t5")
    assert_clean(at)
    captions = " ".join(c.value for c in at.caption)
    assert "from the <pad> embedding baseline" in captions and "singular" in captions
    at = app_helpers.open_page("5_explain", TEXT, "tiny-t5", explain_ig_baseline="zero")
    assert_clean(at)
    assert any("sits on this model's singularity" in i.value for i in at.info)
    assert "<pad> embedding baseline" not in " ".join(c.value for c in at.caption)
    at = app_helpers.open_page("5_explain", TEXT, "tiny-nllb")
    assert_clean(at)
    assert "from the zero embedding baseline" in " ".join(c.value for c in at.caption)
