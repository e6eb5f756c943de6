"""Small helpers the pages share: an error box instead of a traceback, a CSV download button, and a button that
starts costly work (remembered per input, so that reruns keep showing its result)."""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from typing import Any

import streamlit as st

from transformer.checkpoints.checkpoint import CheckpointError


@contextmanager
def guard(what: str) -> Iterator[None]:
    """Show an error on the page instead of a traceback when ``what`` fails."""
    try:
        yield
    except (ValueError, KeyError, IndexError, RuntimeError, OSError, CheckpointError) as error:
        st.error(f"{what} failed: {error}")


def csv_button(frame: Any, file_name: str, label: str = "Download CSV", *, key: str | None = None) -> None:
    """A download button for the numbers behind a chart. The CSV is written when the button is clicked (a
    deferred download), not on every rerun: at opus-mt size writing the Masks page's CSV took 0.35 s a run."""
    st.download_button(label, lambda: frame.to_csv().encode("utf-8"), file_name=file_name, mime="text/csv",
                       key=key or f"csv-{file_name}", on_click="ignore")


ASKED = "_asked"  # session_state: the keys (work and its inputs) whose costly work the user started
ASKED_KEPT = 32


def was_asked(key: Hashable) -> bool:
    """Whether ``asked``'s button was pressed for ``key`` in this browser session (draws nothing)."""
    return key in st.session_state.get(ASKED, [])


def asked(key: Hashable, label: str, *, button_key: str, help: str | None = None, pressed: bool = False) -> bool:
    """A button that starts costly work for ``key`` (e.g. ("heads", model, device, sentences)): True once it
    was pressed for this key in this browser session, so that a rerun (a click elsewhere on the page) shows the
    result again without a new click; False, with the button drawn, before. Opening a page never starts it,
    unless ``pressed``: the user asked for the work another way (a link naming it), which counts as a click."""
    done: list = st.session_state.setdefault(ASKED, [])
    if key in done:
        return True
    if pressed or st.button(label, key=button_key, type="primary", help=help):
        done.append(key)
        del done[:-ASKED_KEPT]
        return True
    return False
