"""The app on the families of issue 32: a tiny NLLB (m2m_100) and a tiny T5 folder in a models folder, real
folders as ``transformers``' ``save_pretrained`` writes them (``family_folders``), opened through the real network
mappings. Checked: the language menus of a multilingual model, their link, that one session's pair is never
another's (the loaded pipeline is shared), that the cached computations are keyed by the pair, the family in the
model menu, the compare menu and the headings, the Masks page's start and padding, and the teacher-forced targets of
the compute layer (``test_app_family_pages.py`` opens every page on every family).
"""

from __future__ import annotations

from pathlib import Path

import app_helpers
import pytest
from app_helpers import assert_clean
from family_app_folders import build_family_folder
from streamlit.testing.v1 import AppTest

from transformer.pipeline import load_pretrained
from ui.sections import languages
from ui.state import settings

NLLB, T5 = "tiny-nllb", "tiny-t5"
TEXT = "the house is small."


@pytest.fixture(scope="module")
def family_models_dir(family_tokenizers: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("family-models")
    for layout, name in (("nllb", NLLB), ("t5", T5)):
        build_family_folder(root, layout, family_tokenizers[layout], name=name)
    return root


@pytest.fixture
def models_dir(family_models_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(family_models_dir))
    return family_models_dir


@pytest.fixture
def nllb(models_dir: Path):
    return load_pretrained(models_dir / NLLB)


def open_page(page: str | None, model: str = NLLB, text: str | None = TEXT, **state) -> AppTest:
    return app_helpers.open_page(page, text, model, **state)


def decoder_input(at: AppTest) -> list[str]:
    """The Masks page's first decoder row: "piece (id)" per position."""
    return [str(cell) for cell in at.dataframe[1].value.iloc[0]]


def code_cell(pipe, code: str) -> str:
    return f"{code} ({pipe.tgt_tokenizer.lang_code_ids[code]})"


def test_the_language_menus_choose_the_forced_first_token_and_links_carry_them(nllb) -> None:
    at = open_page("8_masks")
    assert_clean(at)
    source, target = at.sidebar.selectbox(key=languages.SRC_LANG_WIDGET), at.sidebar.selectbox(
        key=languages.TGT_LANG_WIDGET)
    assert (source.value, target.value) == ("eng_Latn", "deu_Latn")  # the tokenizer's default, else English->German
    assert "deu_Latn (German)" in target.options and len(target.options) == len(nllb.language_codes)
    assert decoder_input(at)[:2] == ["</s> (2)", code_cell(nllb, "deu_Latn")]
    assert (at.query_params["src_lang"], at.query_params["tgt_lang"]) == ("eng_Latn", "deu_Latn")
    at.sidebar.selectbox(key=languages.TGT_LANG_WIDGET).select("fra_Latn").run()
    assert_clean(at)
    assert decoder_input(at)[:2] == ["</s> (2)", code_cell(nllb, "fra_Latn")]  # the translation is now French
    assert at.query_params["tgt_lang"] == "fra_Latn"
    caption = " ".join(c.value for c in at.caption)
    assert "The decoder starts with `</s>` (id 2), then the target language's code `fra_Latn`" in caption
    assert "padding is `<pad>` (id 1)" in caption
    other = open_page("8_masks")  # another browser session: its own pair, the shared pipeline untouched
    assert other.sidebar.selectbox(key=languages.TGT_LANG_WIDGET).value == "deu_Latn"
    assert decoder_input(other)[1] == code_cell(nllb, "deu_Latn")
    assert (nllb.src_lang, nllb.tgt_lang) == ("eng_Latn", "deu_Latn")


def test_a_link_restores_the_pair_and_a_bad_code_gets_a_notice(nllb) -> None:
    at = AppTest.from_file(app_helpers.APP, default_timeout=app_helpers.TIMEOUT)
    at.query_params.update({"model": NLLB, "text": TEXT, "src_lang": "fra_Latn", "tgt_lang": "spa_Latn"})
    at.switch_page("pages/8_masks.py")
    at.run()
    assert_clean(at)
    assert at.sidebar.selectbox(key=languages.SRC_LANG_WIDGET).value == "fra_Latn"
    assert decoder_input(at)[1] == code_cell(nllb, "spa_Latn")
    src = [str(cell) for cell in at.dataframe[0].value.iloc[0]]
    assert src[0] == code_cell(nllb, "fra_Latn")  # the source starts with its language's code
    at = AppTest.from_file(app_helpers.APP, default_timeout=app_helpers.TIMEOUT)
    at.query_params.update({"model": NLLB, "text": TEXT, "tgt_lang": "klingon"})
    at.run()
    assert not at.exception
    assert at.sidebar.selectbox(key=languages.TGT_LANG_WIDGET).value == "deu_Latn"
    assert any("not a language code of this model" in info.value for info in at.sidebar.info)


def test_the_model_menu_names_the_family_and_a_t5_model_has_no_language_menu(models_dir) -> None:
    at = open_page("8_masks", model=T5)
    assert_clean(at)
    menu = at.sidebar.selectbox(key=settings.MODEL_WIDGET)
    assert set(menu.options) == {f"{NLLB} · NLLB (m2m_100)", f"{T5} · T5"} and menu.value == T5
    assert not [box for box in at.sidebar.selectbox if box.key in (languages.SRC_LANG_WIDGET,
                                                                   languages.TGT_LANG_WIDGET)]
    assert "src_lang" not in at.query_params and at.query_params["model"] == T5  # links carry the label
    caption = " ".join(c.value for c in at.caption)
    assert "The decoder starts with `<pad>` (id 0)" in caption and "forced" not in caption



def test_the_compare_menu_and_every_heading_name_the_family_as_the_model_menu_does(models_dir) -> None:
    """The "Compare with" menu, the second model's heading, the sidebar's caption and the Model page name a Hugging
    Face model with its family, in the model menu's words (``menu_text``); links carry the label alone."""
    from ui.sections import compare

    at = open_page("4_attention", model=T5, **{compare.COMPARE: NLLB})
    assert_clean(at)
    named = f"{NLLB} · NLLB (m2m_100)"
    menu = at.sidebar.selectbox(key=compare.COMPARE_WIDGET)
    assert menu.options == [compare.NONE, named] and menu.value == NLLB
    assert named in at.sidebar.selectbox(key=settings.MODEL_WIDGET).options  # the same words in both menus
    assert any(f"Beside it: {named}" in m.value for m in at.markdown)
    assert at.query_params["compare"] == NLLB and at.query_params["model"] == T5
    assert f"Hugging Face T5 model {T5}" in " ".join(c.value for c in at.sidebar.caption)
    model_page = open_page("1_model", model=T5)
    assert_clean(model_page)
    assert any(f"Being the Hugging Face T5 model {T5}" in i.value for i in model_page.info)

def test_two_language_pairs_are_two_cached_analyses(nllb) -> None:
    from ui.compute import analysis
    from ui.models.menu import cache_key

    codes = nllb.tgt_tokenizer.lang_code_ids
    first = [analysis.analyse(cache_key("nllb-test", view), "cpu", view, TEXT).result.output_ids[0]
             for view in (nllb.with_languages(tgt_lang="fra_Latn"), nllb.with_languages(tgt_lang="spa_Latn"))]
    assert first == [codes["fra_Latn"], codes["spa_Latn"]]
    assert cache_key("k", nllb) == "k|eng_Latn>deu_Latn"


def test_the_compute_layer_teacher_forces_what_generate_writes(nllb) -> None:
    """Sources with their language code and references as ``target_ids`` writes them, in the Heads page's user
    sentences and the Explain page's gold links (whose word counts leave the codes out)."""
    from ui.compute import explain_alignment, user_sentences

    view = nllb.with_languages("eng_Latn", "fra_Latn")
    codes = nllb.tgt_tokenizer.lang_code_ids
    sentences = user_sentences.check_sentences(view, "the house is small\nhello world", "la maison\nbonjour monde")
    gold = explain_alignment.uploaded_gold(view, sentences, "0-0 1-1\n0-0 1-1")
    for src, tgt in zip(gold.src_ids, gold.tgt_ids, strict=True):
        assert src[0] == codes["eng_Latn"] and tgt[:2] == (2, codes["fra_Latn"]) and tgt[-1] == 2
    assert gold.tgt_words[0][0] == -1 and max(gold.tgt_words[0]) == 1  # the code is no word; two words follow
    assert gold.tgt_ids[0] == tuple(view.target_ids("la maison"))


def test_byte_level_pieces_start_words() -> None:
    from transformer.explain.word_alignment import word_ids

    assert word_ids(["<s>", "The", "Ġhouse", "Ġis", "Ġsm", "all", "</s>"]) == [-1, 0, 1, 2, 3, 3, -1]
    assert word_ids(["deu_Latn", "▁das", "▁Haus"], special=["deu_Latn"]) == [-1, 0, 1]


def test_every_decoding_of_the_pages_forces_the_target_code(nllb) -> None:
    """The Decoding page's beam search and sampling, and the Heads page's own translations, apply the model's
    decoding rules, as ``translate`` does: the first token is the chosen target's code."""
    from ui.compute import analysis, decoding, heads
    from ui.models.menu import cache_key

    view = nllb.with_languages(tgt_lang="spa_Latn")
    code, key = nllb.tgt_tokenizer.lang_code_ids["spa_Latn"], cache_key("nllb-rules", view)
    result = analysis.analyse(key, "cpu", view, TEXT)
    beam = decoding.beam(key, "cpu", view, result, 2, 0.6, False)
    assert {hypothesis.tokens[0] for hypothesis in beam.hypotheses} == {code}
    assert decoding.sampled(key, "cpu", view, result, 1.0, None, None, 0).tokens[0][0] == code
    rows, _ = heads._greedy_rows(view, view.encode_source([TEXT, "hello world"], warn=False))
    assert [row[:2] for row in rows] == [[2, code], [2, code]]
    assert analysis.batch(key, "cpu", view, [TEXT]).tgt_ids[0, :2].tolist() == [2, code]


@pytest.mark.parametrize("page", ["1_model", "2_tokenization", "3_embeddings", "4_attention", "5_explain", "6_heads",
                                  "7_patching", "9_decoding"])
def test_every_page_opens_on_a_multilingual_model(nllb, page) -> None:
    at = open_page(page)
    assert_clean(at)
    assert at.sidebar.selectbox(key=languages.TGT_LANG_WIDGET).value == "deu_Latn"


def test_every_language_code_of_nllb_and_mbart50_is_named_and_fits_its_menu() -> None:
    """Issue 45: the sidebar's menus showed "eng_Latn (" and "fr_XX (Fren", and et_EE or gu_IN without a name.
    Every code of NLLB-200 and mBART-50 (transformers' lists, a test-only reference) now has its language's name,
    and its label fits a menu the sidebar's width (``MENU_TEXT_PX`` at the menus' font); a label is cut only at a
    word, and says so."""
    pytest.importorskip("transformers")
    from transformers.models.mbart50.tokenization_mbart50 import FAIRSEQ_LANGUAGE_CODES as MBART50
    from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES as NLLB200

    from transformer.hub.languages import language_name
    from ui.figures.text_size import text_width

    codes = list(NLLB200) + list(MBART50)
    assert not [code for code in codes if not language_name(code)]
    assert [languages.language_label(c) for c in ("et_EE", "gu_IN", "eng_Latn", "fr_XX", "zho_Hant")] == [
        "et_EE (Estonian)", "gu_IN (Gujarati)", "eng_Latn (English)", "fr_XX (French)", "zho_Hant (Chinese)"]
    for code in codes:
        label = languages.language_label(code)
        assert text_width(label, languages.MENU_FONT_PX) <= languages.MENU_TEXT_PX, label
        assert label.startswith(f"{code} (") and label.endswith(")")
        shown = label[len(code) + 2:-1]
        assert shown == language_name(code) or (shown.endswith("…") and language_name(code).startswith(shown[:-1]))
    assert languages.language_label("xx_YY") == "xx_YY"  # a code nobody names, as it is
