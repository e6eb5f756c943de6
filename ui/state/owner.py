"""Who a browser session is, for public mode: a random token made once per session, recorded in the runs it
trains (``ui.models.runs``), and the link ids of the runs it was given a link to.

The token never leaves the server (it is not in any link or page); a run's link id is another random token
(``runs.new_link_id``), so knowing a run's name or link does not make one its owner.
"""

from __future__ import annotations

import secrets
from collections.abc import MutableMapping
from typing import Any

import streamlit as st

OWNER = "_session_owner"  # session_state: this session's token
LINKED = "_linked_runs"  # session_state: set of run link ids this session opened through a link


def session_id(state: MutableMapping[str, Any] | None = None) -> str:
    """This browser session's token (``secrets.token_urlsafe``), made on the first call and kept."""
    state = st.session_state if state is None else state
    if OWNER not in state:
        state[OWNER] = secrets.token_urlsafe(16)
    return state[OWNER]


def linked_runs(state: MutableMapping[str, Any] | None = None) -> set[str]:
    """The link ids of the runs this session opened through a link (public mode shows them, read-only)."""
    state = st.session_state if state is None else state
    return state.setdefault(LINKED, set())
