"""Links that restore a view (ui/state/links.py): the query of the URL opens a model, an input and a page's
choices; every run writes the view back; a bad value gets a notice and the default."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from ui.state import settings

APP = str(Path(__file__).resolve().parent.parent / "app.py")
TIMEOUT = 60


@pytest.fixture(autouse=True)
def models_dir(tiny_models_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(tiny_models_dir))
    return tiny_models_dir


def open_link(page: str, **query: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update(query)
    at.switch_page(f"pages/{page}.py")
    return at.run()


def link_notices(at: AppTest) -> list[str]:
    return [box.value for box in at.sidebar.info if str(box.value).startswith("Link:")]


def test_an_attention_link_opens_exactly_that_view() -> None:
    at = open_link("4_attention", model="tiny-numbers", text="forty-two", kind="cross", layer="1", head="2",
                   query="1")
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state[settings.MODEL] == "tiny-numbers"
    assert at.session_state[settings.TEXT] == "forty-two"
    assert at.radio(key="attn_kind").value == "cross"
    assert at.selectbox(key="attn_layer").value == 1
    assert at.selectbox(key="attn_head").value == 2
    assert at.selectbox(key="attn_query").value == 1
    assert not link_notices(at)
    # the URL says the same, and the sidebar's box holds the link
    assert {k: at.query_params[k] for k in ("model", "text", "kind", "layer", "head", "query")} == {
        "model": "tiny-numbers", "text": "forty-two", "kind": "cross", "layer": "1", "head": "2", "query": "1"}
    link = at.sidebar.code[0].value
    assert "model=tiny-numbers" in link and "kind=cross" in link and "head=2" in link


def test_changing_a_widget_updates_the_url_and_the_link_is_read_once() -> None:
    at = open_link("4_attention", model="tiny-reverse", kind="decoder", head="1")
    at.selectbox(key="attn_head").set_value("average").run()
    assert at.query_params["head"] == "average"
    assert at.selectbox(key="attn_head").value == "average"  # the opening link does not come back
    at.radio(key="attn_kind").set_value("encoder").run()
    assert at.query_params["kind"] == "encoder"


def test_bad_values_get_a_notice_and_the_default() -> None:
    at = open_link("4_attention", model="no-such-model", kind="sideways", layer="9", head="x", query="-1",
                   text="abc")
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state[settings.MODEL] == "tiny-numbers"  # the menu's first model
    assert at.session_state[settings.TEXT] == "abc"
    assert at.radio(key="attn_kind").value == "encoder"
    assert at.selectbox(key="attn_layer").value == 0
    notices = link_notices(at)
    assert len(notices) == 5, notices
    assert any("no-such-model" in n for n in notices)
    assert at.query_params["model"] == "tiny-numbers"  # the URL now names what is shown


def test_a_huge_text_in_a_link_is_cut_with_the_inputs_notice() -> None:
    at = open_link("2_tokenization", model="tiny-reverse", text="ab" * 600)
    assert not at.exception
    assert at.session_state[settings.TEXT] == ("ab" * 600)[: settings.MAX_INPUT_CHARS]
    assert any("cut" in str(w.value) for w in at.sidebar.warning)


def test_decoding_and_explain_links() -> None:
    at = open_link("9_decoding", model="tiny-reverse", text="abcd", method="beam", beam="2", temperature="0.7",
                   seed="5", step="2")
    assert not at.exception, [e.value for e in at.exception]
    assert at.radio(key="dec_method").value == "Beam search"
    assert at.slider(key="dec_beam_size").value == 2
    assert at.slider(key="dec_temperature").value == pytest.approx(0.7)
    assert at.number_input(key="dec_seed").value == 5
    assert at.slider(key="dec_step").value == 2
    assert (at.query_params["method"], at.query_params["beam"], at.query_params["step"]) == ("beam", "2", "2")
    assert not link_notices(at)
    at = open_link("5_explain", model="tiny-reverse", text="abcd", token="1", method="occlusion")
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["explain_row"] == 1
    assert at.selectbox(key="explain_csv_method").value == "occlusion"
    assert (at.query_params["token"], at.query_params["method"]) == ("1", "occlusion")


def test_a_token_from_a_link_raises_no_session_state_warning(models_dir, monkeypatch, caplog) -> None:
    """The Explain page's token pills get no default when the link (or a click elsewhere) set their value:
    Streamlit logs a warning with a stack trace for a widget that has both."""
    import logging

    from streamlit.elements.lib import policies

    monkeypatch.setattr(policies, "_shown_default_value_warning", False)
    policies._LOGGER.addHandler(caplog.handler)  # Streamlit's loggers do not propagate to the root
    try:
        at = open_link("5_explain", model="tiny-reverse", text="abcd", token="1")
    finally:
        policies._LOGGER.removeHandler(caplog.handler)
    assert not at.exception and at.session_state["explain_row"] == 1
    assert not [r for r in caplog.records if "explain_row" in r.getMessage() and r.levelno >= logging.WARNING]


def _three_writes() -> None:
    from ui.state import links

    links._write({"model": "m", "text": "t", "kind": "cross"})  # three parameters at once
    links._write({"model": "m", "text": "t", "kind": "cross"})  # nothing changes
    links._write({"kind": None, "head": "2"})  # one removed, one added


def test_a_write_of_several_parameters_is_one_update_and_no_change_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each update of the URL is a message to the browser (through the server's event loop) and an entry in its
    history: a write sends one for all its parameters, and none when nothing changes."""
    from streamlit.runtime.state.query_params import QueryParams

    sent: list[str] = []
    send = QueryParams._send_query_param_msg

    def counted(self: QueryParams) -> None:
        sent.append(str(self))
        send(self)

    monkeypatch.setattr(QueryParams, "_send_query_param_msg", counted)
    at = AppTest.from_function(_three_writes, default_timeout=TIMEOUT).run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(sent) == 2, sent
    assert {k: at.query_params[k] for k in at.query_params} == {"model": "m", "text": "t", "head": "2"}


@pytest.mark.parametrize(("page", "query"), [
    ("9_decoding", {"method": "sampling", "temperature": "0.7", "seed": "3", "step": "2", "beam": "3",
                    "alpha": "0.6", "early": "true"}),
    ("4_attention", {"kind": "cross", "layer": "1", "head": "1", "query": "1", "view": "scores", "steps": "1"}),
    ("5_explain", {"token": "1", "more": "lens", "baseline": "pad"}),
])
def test_a_link_seeds_its_widgets_without_streamlits_warning(page: str, query: dict[str, str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 45: every visit to the Decoding page by a link logged Streamlit's "The widget with key
    "dec_temperature" was created with a default value but also had its value set via the Session State API"
    in the terminal. A widget a link restores is seeded in session_state, never also given a default.
    Streamlit checks only where a runtime exists and says it once per process: both are set up here."""
    import logging

    from streamlit.elements.lib import policies

    monkeypatch.setattr(policies.runtime, "exists", lambda: True)
    monkeypatch.setattr(policies, "_shown_default_value_warning", False)
    said: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    policies._LOGGER.addHandler(handler)
    try:
        at = open_link(page, model="tiny-reverse", text="abc12", **query)
    finally:
        policies._LOGGER.removeHandler(handler)
    assert not at.exception, [e.value for e in at.exception]
    assert not link_notices(at), link_notices(at)  # every value was taken
    assert not [s for s in said if "default value" in s], said
