"""Temporary folders that belong to one browser session: removed when replaced or when the session ends.

An uploaded checkpoint is unpacked, and an uploaded pairs file written, into a temporary folder
the server reads later. Such a folder is held in the session's ``st.session_state`` under a slot
name ("the pairs file", "the upload called my-model"); putting a new folder into the slot
removes the previous one at once, and when Streamlit drops a session's state (the browser tab
closed, its session expired) the garbage collector runs each folder's ``weakref.finalize``,
which removes it; so do the remaining ones when the server exits. The session-state object is
all the bookkeeping there is: nothing global, nothing shared between sessions.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import streamlit as st

TEMPDIRS = "_session_tempdirs"  # session_state: slot -> _Owned


class _Owned:
    """A folder that is removed when this object is released (or ``release()``d)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(path), True)

    def release(self) -> None:
        self._finalizer()


def session_tempdir(slot: str, prefix: str, state: MutableMapping[str, Any] | None = None) -> Path:
    """A new empty folder held in this session's ``slot``; the folder the slot held before is removed."""
    owned = (st.session_state if state is None else state).setdefault(TEMPDIRS, {})
    previous = owned.pop(slot, None)
    if previous is not None:
        previous.release()
    folder = _Owned(Path(tempfile.mkdtemp(prefix=prefix)))
    owned[slot] = folder
    return folder.path


def release(slot: str, state: MutableMapping[str, Any] | None = None) -> None:
    """Remove the folder held in ``slot`` now (nothing if there is none)."""
    owned = (st.session_state if state is None else state).get(TEMPDIRS, {})
    previous = owned.pop(slot, None)
    if previous is not None:
        previous.release()
