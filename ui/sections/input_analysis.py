"""The sidebar's input through the chosen model, with what is wrong with it said on the page.

Every page that shows one input begins with

    app = sidebar()                  # ui/sections/sidebar.py: the shared sidebar, its choices
    result = require_analysis(app)   # the input's tokens, translation and Trace (or a notice and stop)

The analysis itself is ``ui.compute.analysis.analyse`` (cached, shared by every session); this module adds the
notices a reader needs beside it: no model, an empty input, characters the tokenizer never saw, a cut input, a
translation stopped at its time limit.
"""

from __future__ import annotations

import streamlit as st

from transformer.output_bounds import DECODE_SECONDS, timeout_message
from ui.charts.tokens import unknown_notice
from ui.compute import analysis
from ui.compute.analysis import Ablation, Analysis
from ui.models.menu import is_huggingface
from ui.sections.app_context import AppContext


def analyse_input(app: AppContext, ablate: Ablation | None = None) -> Analysis | None:
    """``app.text`` through ``app.pipeline`` (cached), or None with a message on the page for bad input. With
    ``ablate`` the given heads are switched off, and the notices on the input (said once, without) are not
    repeated."""
    if app.pipeline is None:
        st.warning("No model is loaded: choose or upload one in the sidebar.")
        return None
    if not app.text.strip():
        st.warning("The input sentence is empty: type one in the sidebar or pick an example.")
        return None
    try:
        result = analysis.analyse(app.model_key, app.device, app.pipeline, app.text, ablate, chat=app.chat)
    except ValueError as error:  # empty after cleaning, nothing tokenized, a bad ablation
        st.warning(f"Cannot run this input: {error}")
        return None
    # byte-level BPE and byte fallback have no unknown token; a decoder-only model of ours has our vocabulary's
    if not ablate and not (app.decoder_only and is_huggingface(app.pipeline)):
        unk = app.pipeline.config.unk_id
        if notice := unknown_notice(result.result.src_ids, unk, app.pipeline.src_tokenizer.id_to_piece(unk),
                                    result.result.unknown_chars):
            st.warning(notice)
        if result.result.truncated:
            st.warning(f"The input is longer than the model's {app.pipeline.config.max_len} positions "
                       "and was cut.")
    if result.result.timed_out:
        doing = "Continuing the prompt" if app.decoder_only else "Translating"
        st.warning(f"{doing} stopped at its time limit: {timeout_message(DECODE_SECONDS)}.")
    return result


def require_analysis(app: AppContext, ablate: Ablation | None = None) -> Analysis:
    """``analyse_input``, or stop the page after its message."""
    result = analyse_input(app, ablate)
    if result is None:
        st.stop()
    return result
