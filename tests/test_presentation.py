"""Presentation mode (ui/state/presentation.py): the sidebar's switch, ``present=1`` in a link, the sidebar
collapsed once. How figures are restyled in the mode is tests/test_projector.py's."""

from __future__ import annotations

import json

from ui.figures import projector
from ui.state import presentation

# --- presentation mode in the link (AppTest) ---------------------------------------------------

def open_with(tiny_models_dir, monkeypatch, page: str = "8_masks", **query: str):
    """An AppTest of ``page`` opened by a link with ``query``, run once; records the sidebar state asked for."""
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    from ui.state import settings

    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(tiny_models_dir))
    asked: list[str | None] = []
    real = presentation.st.set_page_config

    def record(*args, **kwargs):
        asked.append(kwargs.get("initial_sidebar_state"))
        return real(*args, **kwargs)

    monkeypatch.setattr(presentation.st, "set_page_config", record)
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=60)
    at.query_params.update({"model": "tiny-reverse", "text": "abc12", **query})
    at.switch_page(f"pages/{page}.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    at.asked_sidebar = asked
    return at


def test_present_1_in_a_link_turns_presentation_on_collapses_the_sidebar_and_stays_in_the_link(
        tiny_models_dir, monkeypatch):
    at = open_with(tiny_models_dir, monkeypatch, present="1")
    assert at.session_state[presentation.PRESENTATION] is True
    assert at.sidebar.toggle(key=presentation.PRESENTATION_WIDGET).value is True
    assert at.asked_sidebar[-1] == "collapsed"
    shut = [e for e in at.sidebar.get("html") if "stSidebarCollapseButton" in e.proto.body]
    assert len(shut) == 1  # the sidebar's collapse button is clicked as the mode turns on ...
    at.run()
    assert not [e for e in at.sidebar.get("html") if "stSidebarCollapseButton" in e.proto.body]  # ... once
    assert at.query_params[presentation.LINK_PARAM] == "1"  # the URL of the view carries it
    assert "present=1" in at.sidebar.code[0].value  # and so does the sidebar's "Link to this view"
    charts = at.get("plotly_chart")
    assert charts and all(json.loads(c.proto.spec)["layout"]["font"]["size"] >= projector.MIN_FONT_PX
                          for c in charts)
    # turning it off removes it from the URL and the link, and gives the sidebar back
    at.sidebar.toggle(key=presentation.PRESENTATION_WIDGET).set_value(False).run()
    assert at.session_state[presentation.PRESENTATION] is False
    assert presentation.LINK_PARAM not in at.query_params
    assert "present=" not in at.sidebar.code[0].value
    assert at.asked_sidebar[-1] == "auto"
    # and on again by the switch: the link carries it again
    at.sidebar.toggle(key=presentation.PRESENTATION_WIDGET).set_value(True).run()
    assert at.query_params[presentation.LINK_PARAM] == "1" and "present=1" in at.sidebar.code[0].value


def test_a_link_without_present_or_with_a_bad_value_leaves_it_off(tiny_models_dir, monkeypatch):
    at = open_with(tiny_models_dir, monkeypatch)
    assert at.sidebar.toggle(key=presentation.PRESENTATION_WIDGET).value is False
    assert presentation.LINK_PARAM not in at.query_params and at.asked_sidebar[-1] == "auto"
    at = open_with(tiny_models_dir, monkeypatch, present="maybe")
    assert at.sidebar.toggle(key=presentation.PRESENTATION_WIDGET).value is False
    assert any("present='maybe'" in str(box.value) for box in at.sidebar.info)  # said, not a traceback
    at = open_with(tiny_models_dir, monkeypatch, present="0")
    assert at.sidebar.toggle(key=presentation.PRESENTATION_WIDGET).value is False


def test_back_to_an_address_without_present_turns_presentation_off(tiny_models_dir, monkeypatch):
    """The browser's Back from a view in presentation mode (its address carries present=1) to one opened before
    (without it) leaves presentation mode, as the address says; a parameter that merely went away is not read."""
    at = open_with(tiny_models_dir, monkeypatch)
    before = dict(at.query_params)
    assert presentation.LINK_PARAM not in before
    at.sidebar.toggle(key=presentation.PRESENTATION_WIDGET).set_value(True).run()
    assert at.query_params[presentation.LINK_PARAM] == "1"
    at.query_params.clear()
    at.query_params.update(before)  # Back: the earlier address, without present
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state[presentation.PRESENTATION] is False
    assert at.sidebar.toggle(key=presentation.PRESENTATION_WIDGET).value is False
    assert presentation.LINK_PARAM not in at.query_params
    at.query_params[presentation.LINK_PARAM] = "1"  # Forward again
    at.run()
    assert at.session_state[presentation.PRESENTATION] is True
