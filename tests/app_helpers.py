"""What every app test does: open a page of app.py on a model and an input (AppTest), and check it is clean; and
a stand-in for streamlit that records what a progress bar is told."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from streamlit.testing.v1 import AppTest

from ui.state import settings

APP = str(Path(__file__).resolve().parent.parent / "app.py")
TIMEOUT = 120  # seconds a script run may take on a loaded 2-core machine


def open_page(page: str | None = None, text: str | None = None, model: str = "tiny-reverse", *,
              timeout: float = TIMEOUT, **state: Any) -> AppTest:
    """The app on ``model`` with ``text`` as input, on ``pages/<page>.py`` (default: the first page), run once.
    The shared choices are plain session_state keys, so a test sets them as another page would; ``state``
    sets further keys."""
    at = AppTest.from_file(APP, default_timeout=timeout)
    at.session_state[settings.MODEL] = model
    if text is not None:
        at.session_state[settings.TEXT] = text
    for key, value in state.items():
        at.session_state[key] = value
    if page is not None:
        at.switch_page(f"pages/{page}.py")
    return at.run()


def assert_clean(at: AppTest) -> None:
    """No exception and no error message on the page."""
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


class RecordedBars:
    """Stands in for ``streamlit`` in ui.compute.shared_work: records what the progress bar is told."""

    def __init__(self) -> None:
        self.told: list[tuple[float, str]] = []
        self.emptied = 0

    def progress(self, value: float, text: str = "") -> RecordedBars:
        self.told.append((value, text))
        return self

    def empty(self) -> None:
        self.emptied += 1

    def __getattr__(self, name: str):
        import streamlit

        return getattr(streamlit, name)


class StoppedRun(Exception):
    """What ``WarnedBars.stop`` raises, in place of Streamlit's end of a script run."""


class WarnedBars(RecordedBars):
    """``RecordedBars`` that also records the warnings a page is shown and ends the run at ``st.stop()``."""

    def __init__(self) -> None:
        super().__init__()
        self.warned: list[str] = []

    def warning(self, text: str) -> None:
        self.warned.append(text)

    def stop(self):  # noqa: ANN201
        raise StoppedRun


def chart_figure(at: AppTest, key: str) -> Any:
    """The Plotly figure of the page's chart with widget key ``key`` (a plotly.graph_objects.Figure)."""
    import plotly.io

    return plotly.io.from_json(next(c for c in at.get("plotly_chart") if c.key == key).proto.spec)
