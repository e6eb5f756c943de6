"""The Heads and Patching pages' navigation: which sentences the statistics use, a clicked head opened on the
Attention page, and the clean/corrupted pair of Patching kept in session state (a suggested pair used, the
corrupted twin seeded when the clean input changes, the explained position following a new pair, and on a large
model the corrupted input's run waiting for the page's button)."""

from __future__ import annotations

import html

import streamlit as st

from transformer.pipeline import Pipeline
from ui.charts.text_diff import compared_html
from ui.compute.analysis import Analysis, builtin_task
from ui.compute.heads import runs_by_itself
from ui.compute.model_size import is_large
from ui.compute.patching import default_corruption, first_difference, grammatical_corruption, suggested_pairs
from ui.sections.app_context import AppContext
from ui.state import settings
from ui.state.widgets import asked, was_asked

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


def patching_key(app: AppContext, clean: Analysis, corrupt_text: str) -> tuple:
    """What the "Run activation patching" button is remembered for: the model, the device and the pair."""
    return "patching", app.model_key, app.device, clean.text, corrupt_text


def corrupted_run_waits(app: AppContext, clean: Analysis, corrupt_text: str) -> bool:
    """On a large model (``ui.compute.model_size``, the notion the Explain page's costly methods use), True until
    the button was pressed for this pair: the pair and the clean translation (the one every page shares) are shown,
    a pair of unequal token counts is named (tokenizing only), and nothing is translated. At NLLB size translating
    the corrupted input alone took 10 s of a first visit (docs/benchmarks.md). False at once on a small model, or
    once pressed: the page then runs as it always did."""
    pipe = app.pipeline
    key = patching_key(app, clean, corrupt_text)
    if not is_large(pipe) or was_asked(key):
        return False
    try:
        corrupt, ids, _, _ = pipe.source_ids(corrupt_text, warn=False)  # tokenizing only: no model run
    except ValueError as error:
        st.warning(f"Cannot run the corrupted input: {error}")
        return True
    st.markdown(compared_html("Clean input", clean.text, "Corrupted input", corrupt)
                + f"<b>Clean translation</b><br>{html.escape(clean.output_text)}", unsafe_allow_html=True)
    if len(ids) != len(clean.src_tokens):
        st.warning(f"The corrupted input has {len(ids)} source tokens, the clean one {len(clean.src_tokens)}: "
                   "patching pairs positions one to one, so it needs as many.")
        return True
    if asked(key, "Run activation patching", button_key="patch_run",
             help="Translates the corrupted input, then runs the model once per activation and position."):
        return False
    st.caption(f"This model has {pipe.model.num_parameters():,} parameters: at this size translating the corrupted "
               "input takes seconds a token, so it waits for the button, with the patching. Until then the page "
               "shows only the clean translation, which every page shares; then the explained output token starts "
               "where the two translations differ.")
    return True
