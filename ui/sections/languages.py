"""The sidebar's language pair of a multilingual model (mBART-50, NLLB): two menus, the choice kept per session.

The loaded ``Pipeline`` is cached once per model and shared by every browser session (``ui.models.menu``), so a
session never sets ``src_lang`` / ``tgt_lang`` on it: ``language_menu`` returns this session's view,
``pipeline.with_languages(src, tgt)``, which shares the model and costs nothing. The pair lives in plain
``session_state`` keys (``SRC_LANG``, ``TGT_LANG``), the widgets re-seeded from them on every run like the model's,
and in the page's link (``src_lang``, ``tgt_lang``: ``ui/state/links.py``). A code the model does not know (another
model's, a link's typo) gives the model's default: tokenizer_config.json's pair, else English -> German.
The caches of ``ui.compute`` see the pair through the key (``ui.models.menu.cache_key``).
"""

from __future__ import annotations

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from transformer.hub.languages import language_name
from transformer.pipeline import Pipeline
from ui.figures.text_size import text_width
from ui.state import links

SRC_LANG, TGT_LANG = "src_lang", "tgt_lang"  # session_state: the chosen codes (also the links' parameter names)
SRC_LANG_WIDGET, TGT_LANG_WIDGET = "src_lang_widget", "tgt_lang_widget"

MENU_TEXT_PX = 190  # a sidebar menu's room for its text at 1280 px: 240 px less its padding and arrow (chromium)
MENU_FONT_PX = 14  # the menus' font


def fits_menu(text: str) -> bool:
    """Whether ``text`` fits a sidebar menu without being cut (``MENU_TEXT_PX`` at ``MENU_FONT_PX``)."""
    return text_width(text, MENU_FONT_PX) <= MENU_TEXT_PX


def language_label(code: str) -> str:
    """A code as the menus show it: "deu_Latn (German)", "et_EE (Estonian)" (names: ``transformer.hub.languages``);
    a name that would not fit the menu is cut at a word, with "…" ("tzm_Tfng (Central Atlas…)"); a code without a
    name as it is."""
    name = language_name(code)
    if not name:
        return code
    words = name.split(" ")
    for n in range(len(words), 0, -1):
        label = f"{code} ({' '.join(words[:n])}{'' if n == len(words) else '…'})"
        if fits_menu(label):
            return label
    return label


def _choice(key: str, codes: list[str], default: str | None) -> str | None:
    """The session's code for ``key``, the link's where it brings a valid one (a notice for an invalid one);
    the model's default where the session's is not one of this model's codes."""
    linked = links.incoming(key)
    if linked is not None:
        if linked in codes:
            st.session_state[key] = linked
        else:
            links.notice(f"{key}={linked[:40]!r} is not a language code of this model; showing {default}")
    if st.session_state.get(key) not in codes:
        st.session_state[key] = default
    return st.session_state[key]


def _on_change(key: str, widget_key: str) -> None:
    st.session_state[key] = st.session_state[widget_key]


def language_menu(box: DeltaGenerator, pipeline: Pipeline | None) -> Pipeline | None:
    """For a multilingual model: the source and target menus in ``box`` and this session's view of ``pipeline``
    with the chosen pair; any other pipeline (or None) as it is, with no menu."""
    codes = getattr(pipeline, "language_codes", None) or []  # a decoder-only model has none
    if pipeline is None or not codes:
        return pipeline
    src = _choice(SRC_LANG, codes, pipeline.src_lang)
    tgt = _choice(TGT_LANG, codes, pipeline.tgt_lang)
    # One under the other: side by side (two columns of 115 px) the menus cut "eng_Latn (English)" to "eng_Latn (",
    # and "Source language" broke onto two lines while "Target language" did not.
    for title, key, widget_key, value, side in (
            ("Source language", SRC_LANG, SRC_LANG_WIDGET, src, "read before the source's tokens"),
            ("Target language", TGT_LANG, TGT_LANG_WIDGET, tgt, "forced as the first generated token")):
        st.session_state[widget_key] = value  # seeded from the plain key, as the sidebar's other widgets
        name = language_name(value or "")
        box.selectbox(title, codes, key=widget_key, format_func=language_label, on_change=_on_change,
                      args=(key, widget_key),
                      help=f"The language's code, {side}." + (f" {value}: {name}." if name else ""))
    return pipeline.with_languages(src, tgt)


def pair_for(pipeline: Pipeline, view: Pipeline | None) -> Pipeline:
    """``pipeline`` (a second model to compare with) with the first model's pair where it knows both codes (two
    NLLB models), else as it is."""
    if view is None or view.src_lang is None or not {view.src_lang, view.tgt_lang} <= set(pipeline.language_codes):
        return pipeline
    return pipeline.with_languages(view.src_lang, view.tgt_lang)
