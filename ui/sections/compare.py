"""A second model beside the first on the Attention, Explain and Decoding pages: another model of the
menu, or a training snapshot of the same model ("reverse at step 50"), run on the same input.

The choice is a plain ``session_state`` key like the model's (see ui/sections/sidebar.py); the sidebar shows
its menu only on the pages that draw the second model. A page asks ``app.second_app()`` (ui/sections/app_context.py)
for the same choices with the second model, whose analysis is cached like the first's, and draws its
charts on the same scales as the first's.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from transformer.checkpoints.checkpoint import list_snapshots
from transformer.pipeline import Pipeline, load_pretrained
from ui.models.menu import LOAD_ERRORS, ModelEntry, folder_stamp, load_error_text, load_pipeline, menu_text
from ui.state import links

COMPARE, COMPARE_WIDGET = "compare_model", "compare_model_widget"
NONE = "(none)"


@dataclass(frozen=True)
class Second:
    """The second model: its menu label (what links carry), its cache key, its loaded pipeline, and its name as the
    page says it (``menu_text``: the label with a Hugging Face model's family) and its family."""

    label: str
    key: str
    pipeline: Pipeline
    name: str
    family: str  # a Hugging Face folder's model_type, "" for ours (``ModelEntry.family``)


def choices(entries: dict[str, ModelEntry], current: ModelEntry | None) -> dict[str, tuple[ModelEntry, int | None]]:
    """The compare menu: the current model's training snapshots first, then every other model."""
    options: dict[str, tuple[ModelEntry, int | None]] = {}
    if current is not None and current.folder is not None:
        for step in list_snapshots(current.folder):
            options[f"{current.label} at step {step:,}"] = (current, step)
    for label, entry in entries.items():
        if current is None or label != current.label:
            options[label] = (entry, None)
    return options


def shown(entry: ModelEntry, step: int | None = None) -> str:
    """A choice of the compare menu as the page says it: the model as the model menu names it, and the step of a
    snapshot ("reverse at step 50")."""
    return menu_text(entry) if step is None else f"{menu_text(entry)} at step {step:,}"


@st.cache_resource(max_entries=8, show_spinner="Loading the snapshot...")
def _load_snapshot(folder: str, stamp: str, step: int, device: str) -> Pipeline:
    """One snapshot's pipeline per (folder, version, step, device), shared by every session."""
    return load_pretrained(folder, step=step, device=device)


def compare_widget(entries: dict[str, ModelEntry], current: ModelEntry | None, device: str) -> Second | None:
    """The sidebar's "Compare with" menu; returns the loaded second model, or None (a notice if it fails)."""
    options = choices(entries, current)
    linked = links.incoming("compare")
    if linked is not None:
        if linked in options:
            st.session_state[COMPARE] = linked
        else:
            links.notice(f"there is nothing called {linked[:60]!r} to compare with")
    if st.session_state.get(COMPARE) not in options:
        st.session_state[COMPARE] = NONE
    st.session_state[COMPARE_WIDGET] = st.session_state[COMPARE]
    st.sidebar.selectbox("Compare with", [NONE, *options], key=COMPARE_WIDGET, on_change=_on_change,
                         format_func=lambda choice: choice if choice == NONE else shown(*options[choice]),
                         help="A second model, or a training snapshot of this one, drawn beside the first "
                              "on this page (Attention, Explain, Decoding).")
    choice = st.session_state[COMPARE]
    if choice == NONE:
        return None
    entry, step = options[choice]
    name = shown(entry, step)  # the family beside the name, as the model menu says it
    try:
        if step is None:
            pipeline, key = load_pipeline(entry, device), entry.key
        else:
            assert entry.folder is not None
            pipeline = _load_snapshot(str(entry.folder), folder_stamp(entry.folder), step, device)
            key = f"{entry.key}@step{step}"
    except LOAD_ERRORS as error:  # a message, never a traceback (ui/models/menu.py)
        st.sidebar.error(f"Cannot load {name}: {load_error_text(error)[:300]}")
        return None
    return Second(choice, key, pipeline, name, entry.family)


def _on_change() -> None:
    st.session_state[COMPARE] = st.session_state[COMPARE_WIDGET]


def same_shape_note(second: Second, kind: str, layer: int, head: int | None) -> str | None:
    """Why the second model has no (kind, layer, head) to show, or None when it has."""
    config = second.pipeline.config
    if config.decoder_only and kind != "decoder":  # one stack: no encoder, no cross-attention
        return f"{second.name} is a decoder-only model: it has no {'encoder' if kind == 'encoder' else kind} attention."
    n_layers = config.n_encoder_layers if kind == "encoder" else config.n_decoder_layers
    if layer >= n_layers:
        stack = "encoder" if kind == "encoder" else "decoder"
        return f"{second.name} has {n_layers} {stack} layers, no layer {layer}."
    if head is not None and head >= config.n_heads:
        return f"{second.name} has {config.n_heads} heads, no head {head}."
    return None
