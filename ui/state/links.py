"""Links that restore a view: the model, the input and each page's choices live in the URL's query.

Opening ``…/attention?model=reverse&text=hello42&kind=cross&layer=1&head=2`` shows exactly that view.

- The session's first script run keeps the query it was opened with (``take_incoming``); a later run
  whose query differs from the one the app last wrote (Back, Forward) keeps what differs. The sidebar
  takes ``model`` and ``text`` from it; each page calls ``restore(param, widget_key, choices)`` before
  drawing a widget, which seeds the widget from the link once.
- Every run then writes what the page shows back into the URL (``publish``), so the address bar, a
  bookmark or the sidebar's "Link to this view" box always names the current view.
- A value the model or page does not have (an unknown model, head 9 of 4, a word for a number) gets
  a short notice and the default: never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any
from urllib.parse import urlencode

import streamlit as st

INCOMING = "link_incoming"  # session_state: the opening query, each parameter removed once used
SHARE_BOX = "link_share_box"  # session_state: this run's sidebar placeholder for the link
LAST_WRITTEN = "link_last_written"  # session_state: the query as this app last left it
MAX_PARAM_CHARS = 2000  # a longer value is not read at all (the input itself is cut to its own limit)


def take_incoming(off_when_absent: Mapping[str, str] | None = None) -> None:
    """Keep the query the session was opened with; on later runs, what differs from the query this app
    last wrote (the browser's Back and Forward buttons, or a hand-edited address): that is followed too.

    ``off_when_absent`` names switches a link carries only while they are on (``present=1``), with their "off"
    value: going Back to an address without one turns it off, where a parameter that merely disappeared
    (another page's) is left alone."""
    current = _query()
    last = st.session_state.get(LAST_WRITTEN)
    if INCOMING not in st.session_state:
        st.session_state[INCOMING] = current
    elif last is not None and current != last:
        changed = {key: value for key, value in current.items() if last.get(key) != value}
        for key, off in (off_when_absent or {}).items():
            if key in last and key not in current:
                changed[key] = off
        st.session_state[INCOMING] = changed
    st.session_state[LAST_WRITTEN] = current


def incoming(param: str) -> str | None:
    """The opening link's value of ``param``, once (None when it had none or it was used already)."""
    value = st.session_state.get(INCOMING, {}).pop(param, None)
    if value is not None and len(value) > MAX_PARAM_CHARS:
        notice(f"the link's {param} is {len(value):,} characters long; it was ignored")
        return None
    return value


def notice(message: str) -> None:
    """Say once, in the sidebar, that part of a link could not be followed."""
    st.sidebar.info(f"Link: {message}.", icon=":material/link_off:")


def parse_int(raw: str) -> int:
    return int(raw.strip())


def parse_float(raw: str) -> float:
    value = float(raw.strip())
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(raw)
    return value


def restore(param: str, widget_key: str, choices: Collection[Any] | Callable[[Any], bool],
            parse: Callable[[str], Any] = str) -> None:
    """Before ``widget_key``'s widget is drawn: give it the link's ``param`` if the link has a valid one.

    ``choices`` is the collection of allowed values, or a test of one; ``parse`` turns the text of
    the link into a value (a ValueError means a bad value). A bad value leaves the widget as it is.
    """
    raw = incoming(param)
    if raw is None:
        return
    try:
        value = parse(raw)
        valid = choices(value) if callable(choices) else value in choices
    except (ValueError, TypeError):
        valid = False
    if not valid:
        notice(f"{param}={raw[:40]!r} is not available here; showing the default")
        return
    st.session_state[widget_key] = value


def start(view: dict[str, Any]) -> None:
    """Write the shared part of the view (model, text, compare) into the URL and reserve the sidebar's
    link box; a page adds its own choices with ``publish``."""
    _write({k: (None if v in (None, "") else v) for k, v in view.items()})
    st.session_state[SHARE_BOX] = st.sidebar.expander("Link to this view", icon=":material/link:").empty()
    _show_link()


def publish(**params: Any) -> None:
    """Write a page's choices into the URL (and the sidebar's link box); None removes a parameter."""
    _write(params)
    _show_link()


def _write(params: dict[str, Any]) -> None:
    """Change only what differs, in one update: every write of ``st.query_params`` sends the browser a message
    and adds an entry to its history (six per rerun made the Back button useless), so a rerun that changes
    nothing writes nothing, and one that changes several parameters writes them at once (``from_dict``; a write
    per parameter sent up to nine messages a run, each through the server's event loop)."""
    current = _query()
    wanted = {key: value for key, value in current.items() if params.get(key, value) is not None}
    wanted.update({key: str(value) for key, value in params.items() if value is not None})
    if wanted != current:
        st.query_params.from_dict(wanted)
    st.session_state[LAST_WRITTEN] = wanted


def view_url() -> str:
    """The address of the current page with the current view's query."""
    base = st.context.url or ""
    query = urlencode(_query())
    return f"{base}?{query}" if query else base


def _query() -> dict[str, str]:
    """The URL's query as a plain dict (the last value of a repeated key)."""
    return {key: st.query_params[key] for key in st.query_params}


def _show_link() -> None:
    box = st.session_state.get(SHARE_BOX)
    if box is None:
        return
    with box.container():
        st.code(view_url(), language=None, wrap_lines=True)  # st.code has a copy button
        st.caption("Copy it with the button at its right: it opens this page with this model, input and "
                   "these choices.")
