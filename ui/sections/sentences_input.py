"""The widgets where a user gives sentences to measure on: source lines with optional references (the Heads page,
the Explain page's word alignment), and gold alignment links in Pharaoh format. Each draws its text boxes and
uploads, checks what they hold with ``ui.compute.user_sentences`` / ``ui.compute.explain_alignment``, and returns
the checked value or None after a message on the page."""

from __future__ import annotations

import streamlit as st

from transformer.pipeline import Pipeline
from ui.compute.explain_alignment import GoldSet, task_gold, uploaded_gold
from ui.compute.user_sentences import (
    MAX_FILE_BYTES,
    MAX_FILE_MB,
    MAX_SENTENCES,
    Sentences,
    check_sentences,
    check_text_size,
    read_upload,
)
from ui.state import settings


def sentences_input(pipeline: Pipeline, key: str, examples: list[str] | None = None) -> Sentences | None:
    """Two text boxes (source lines; optional references), each with a .txt upload that replaces its box (not in
    public mode unless uploads are allowed: ``settings.uploads_allowed``); the source box starts with ``examples``
    (the model's example sentences) the first time it is drawn.
    Returns the checked sentences, or None after a warning on the page (nothing given yet: an info)."""
    if examples:
        st.session_state.setdefault(f"{key}_sources", "\n".join(examples[:MAX_SENTENCES]))
    left, right = st.columns(2)
    source_text = left.text_area("Source sentences, one per line", key=f"{key}_sources", height=180,
                                 max_chars=MAX_FILE_BYTES,
                                 help=f"Up to {MAX_SENTENCES} lines, each within the model's "
                                      f"{pipeline.config.max_len} positions.")
    uploads = settings.uploads_allowed()
    source_file = left.file_uploader("... or a .txt file of them", type=["txt"], key=f"{key}_sources_file",
                                     max_upload_size=MAX_FILE_MB) if uploads else None
    reference_text = right.text_area("References (optional): one translation per source line", height=180,
                                     key=f"{key}_references", max_chars=MAX_FILE_BYTES,
                                     help="Leave empty to use the model's own greedy translations.")
    reference_file = right.file_uploader("... or a .txt file of them", type=["txt"], key=f"{key}_references_file",
                                        max_upload_size=MAX_FILE_MB) if uploads else None
    try:
        source_text = read_upload(source_file) if source_file is not None else \
            check_text_size(source_text or "", "Source sentences")
        reference_text = read_upload(reference_file) if reference_file is not None else \
            check_text_size(reference_text or "", "References")
        if not (source_text or "").strip():
            st.info("Give the sentences to measure the heads on: type them above, one per line"
                    + (", or upload a .txt file." if uploads else "."))
            return None
        return check_sentences(pipeline, source_text, reference_text)
    except ValueError as error:
        st.warning(f"Cannot use these sentences: {error}")
        return None


TASK, UPLOAD = "The task's sentences (true alignment)", "My sentences and a Pharaoh file of gold links"


def gold_input(model_key: str, pipeline: Pipeline, examples: list[str]) -> GoldSet | None:
    """The sentences to score: the task's (where it has a true alignment; a radio offers the user's too) or the
    user's with their references and a Pharaoh file. None after a message on the page."""
    task = task_gold(model_key, pipeline)
    if isinstance(task, GoldSet) and st.radio("Sentences", [TASK, UPLOAD], horizontal=True,
                                              key="explain_aer_source") == TASK:
        return task
    if isinstance(task, str):
        st.caption(f"No task sentences: {task}.")
    sentences = sentences_input(pipeline, key="explain_aer", examples=examples)
    pharaoh = st.text_area("Gold links, one line per sentence (Pharaoh: 0-0 1-2 2?1 ...)", key="explain_aer_gold",
                           height=120, max_chars=MAX_FILE_BYTES,
                           help="i-j a sure link, i?j or ipj a possible one; source word first, from 0.")
    upload = st.file_uploader("... or a Pharaoh file of them", key="explain_aer_gold_file",
                              max_upload_size=MAX_FILE_MB) if settings.uploads_allowed() else None
    try:
        pharaoh = read_upload(upload) if upload is not None else check_text_size(pharaoh or "", "Gold links")
        if sentences is None:
            return None
        if not (pharaoh or "").strip():
            st.info("Give the gold links: one line of Pharaoh links per sentence.")
            return None
        return uploaded_gold(pipeline, sentences, pharaoh)
    except ValueError as error:
        st.warning(f"Cannot use these gold links: {error}")
        return None
