"""The Heads and Patching pages' navigation: which sentences the statistics use, a clicked head opened on the
Attention page, and the clean/corrupted pair of Patching kept in session state (a suggested pair used, the
corrupted twin seeded when the clean input changes, the explained position following a new pair)."""

from __future__ import annotations

import streamlit as st

from transformer.pipeline import Pipeline
from ui.compute.analysis import Analysis, builtin_task
from ui.compute.heads import runs_by_itself
from ui.compute.patching import default_corruption, first_difference, grammatical_corruption, suggested_pairs
from ui.state import settings

TASK_SENTENCES, OWN_SENTENCES = "The task's generated sentences (with their true alignment)", "Sentences I give"
CORRUPT = "patch_corrupt"  # session_state key of the corrupted input
CORRUPT_FOR = "patch_corrupt_for"  # the clean input the corrupted one was made for
POSITION = "patch_position"  # session_state key of the explained output position
POSITION_FOR = "patch_position_for"  # the (clean, corrupted) pair the position was chosen for


def wants_own_sentences(pipeline: Pipeline) -> bool:
    """Whether the Heads page measures the user's sentences: always for a model without a built-in task, on
    request (a radio, the task's sentences by default) for one with."""
    if not runs_by_itself(pipeline):
        return True
    return st.radio("Sentences", [TASK_SENTENCES, OWN_SENTENCES], horizontal=True,
                    key="heads_sentences_source") == OWN_SENTENCES


def clicked_head(event) -> tuple[str, int, int] | None:
    """The (kind, layer, head) of a point clicked in the head grid (``st.plotly_chart(on_select="rerun")``)."""
    points = (event or {}).get("selection", {}).get("points", []) if isinstance(event, dict) else \
        getattr(getattr(event, "selection", None), "points", [])
    for point in points:
        data = point.get("customdata") if isinstance(point, dict) else None
        if data and len(data) >= 3:
            return str(data[0]), int(data[1]), int(data[2])
    return None


def open_on_attention_page(kind: str, layer: int, head: int) -> None:
    """Show this head on the Attention page: its widgets' keys get the head before the page draws them."""
    st.session_state["attn_kind"] = kind
    st.session_state["attn_layer"] = layer
    st.session_state["attn_head"] = head
    st.switch_page("pages/4_attention.py")


def use_pair(clean: str, corrupt: str) -> None:
    """Make a suggested pair the current input (shared with every page) and the corrupted input."""
    st.session_state[settings.TEXT] = clean
    st.session_state[CORRUPT] = corrupt
    st.session_state[CORRUPT_FOR] = clean


def follow_pair(clean: Analysis, corrupt: Analysis) -> None:
    """A new pair (used, typed, or a new clean input) starts the position picker at the first output
    token where the translations differ; a position the user picks for this pair stays."""
    pair = (clean.text, corrupt.text)
    if st.session_state.get(POSITION_FOR) != pair:
        st.session_state[POSITION] = min(first_difference(clean, corrupt), max(len(clean.output_tokens) - 1, 0))
        st.session_state[POSITION_FOR] = pair


def seed_corrupt_input(pipeline: Pipeline, clean_text: str) -> None:
    """Give the corrupted-input box a twin of the clean input whenever the clean input changes: the suggested
    pair's twin, else ``default_corruption``; what the user types stays until the clean input changes."""
    if st.session_state.get(CORRUPT_FOR) == clean_text and st.session_state.get(CORRUPT):
        return
    twins = dict(suggested_pairs(pipeline))
    grammatical = grammatical_corruption(pipeline, clean_text) if builtin_task(pipeline) == "sentences" else None
    st.session_state[CORRUPT] = (twins.get(clean_text) or grammatical or default_corruption(pipeline, clean_text)
                                 or clean_text)
    st.session_state[CORRUPT_FOR] = clean_text
