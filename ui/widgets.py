"""Small helpers the pages share: an error box instead of a traceback, and a CSV download button."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import streamlit as st

from transformer.checkpoint import CheckpointError


@contextmanager
def guard(what: str) -> Iterator[None]:
    """Show an error on the page instead of a traceback when ``what`` fails."""
    try:
        yield
    except (ValueError, KeyError, IndexError, RuntimeError, OSError, CheckpointError) as error:
        st.error(f"{what} failed: {error}")


def csv_button(frame: Any, file_name: str, label: str = "Download CSV", *, key: str | None = None) -> None:
    """A download button for the numbers behind a chart."""
    st.download_button(label, frame.to_csv().encode("utf-8"), file_name=file_name, mime="text/csv",
                       key=key or f"csv-{file_name}")
