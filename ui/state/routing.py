"""The app's pages, and the guard that routes a fresh server's first deep link through app.py.

Streamlit decides once per server whether an app is a "pages/ directory" app (``pages/`` exists) and keeps
treating it as one until a script run calls ``st.navigation``. app.py calls it, but a link to a page
(``/attention?head=2``) opened before anyone has opened ``/`` runs ``pages/4_attention.py`` directly, never
app.py: that browser, and every other until someone opens ``/``, got Streamlit's file-based navigation (the
file names, app.py listed as "app", no icons) and not app.py's page settings (Streamlit 1.67). Every page calls
``route_through_app`` first: a page that app.py did not route registers the app's navigation (which ends the
pages/ mode for the server) and reruns, so the same page, with the same query, runs through app.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import streamlit as st
from streamlit.navigation.page import StreamlitPage

PAGES_DIR = Path(__file__).resolve().parents[2] / "pages"
PAGES = [  # file, title, icon
    ("1_model.py", "Model", ":material/account_tree:"),
    ("2_tokenization.py", "Tokenization", ":material/text_fields:"),
    ("3_embeddings.py", "Embeddings and positions", ":material/grid_on:"),
    ("4_attention.py", "Attention", ":material/visibility:"),
    ("5_explain.py", "Explain", ":material/psychology_alt:"),
    ("6_heads.py", "Heads", ":material/hub:"),
    ("7_patching.py", "Patching", ":material/swap_horiz:"),
    ("8_masks.py", "Masks", ":material/filter_alt:"),
    ("9_decoding.py", "Decoding", ":material/route:"),
    ("10_training.py", "Training", ":material/model_training:"),
]

_ROUTED: ContextVar[bool] = ContextVar("routed_by_app", default=False)  # this script run went through app.py
REROUTED = "_rerouted_through_app"  # session_state: this session reran once already (a script not routed by
# app.py after that, such as a test's own script calling the sidebar, is left alone rather than rerun forever)


def navigation() -> StreamlitPage:
    """The app's navigation: one page per file of ``PAGES`` that exists, the first the default."""
    return st.navigation([st.Page(PAGES_DIR / file, title=title, icon=icon, default=(i == 0))
                          for i, (file, title, icon) in enumerate(PAGES) if (PAGES_DIR / file).is_file()])


@contextmanager
def routed() -> Iterator[None]:
    """app.py runs the chosen page inside this block: pages run in it know that app.py routed them."""
    token = _ROUTED.set(True)
    try:
        yield
    finally:
        _ROUTED.reset(token)


def route_through_app() -> None:
    """Rerun through app.py when this page was run directly (module docstring), once per session; nothing when
    app.py routed it."""
    if not _ROUTED.get() and not st.session_state.get(REROUTED):
        st.session_state[REROUTED] = True
        navigation()  # ends Streamlit's pages/ mode: from now on every run starts at app.py
        st.rerun()
