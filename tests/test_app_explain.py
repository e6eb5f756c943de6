"""The Explain page under AppTest: every method drawn, a chosen output token, bad input as messages."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from transformer.explain import METHODS
from ui import settings

APP = str(Path(__file__).resolve().parent.parent / "app.py")
PAGE = "pages/5_explain.py"


@pytest.fixture
def models_dir(tiny_models_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(tiny_models_dir))
    return tiny_models_dir


def open_explain(text: str, model: str = "tiny-reverse") -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state[settings.MODEL] = model
    at.session_state[settings.TEXT] = text
    at.switch_page(PAGE)
    return at.run()


def assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


@pytest.mark.parametrize("model", ["tiny-reverse", "tiny-numbers"])
def test_explain_page_draws_every_method(models_dir: Path, model: str) -> None:
    at = open_explain("abc12" if model == "tiny-reverse" else "seven", model)
    assert_clean(at)
    assert at.title[0].value == "Explain an output token"
    charts = at.get("plotly_chart")
    assert len(charts) == 3  # one token's row, small multiples, and one further section: the agreement
    assert at.get("download_button")
    assert not at.info, [i.value for i in at.info]  # every method ran on this model
    assert at.subheader[0].value.startswith("Which source tokens made")
    for section in ("lens", "residual"):  # the logit lens, the residual stream (two panels in one figure)
        at.get("button_group")[-1].set_value(section).run()
        assert_clean(at)
        assert len(at.get("plotly_chart")) == 3
        assert at.query_params["more"] == section


def test_choosing_another_output_token(models_dir: Path) -> None:
    at = open_explain("abc12")
    pills = at.get("button_group")[0]
    options = pills.proto.options
    assert len(options) >= 2
    pills.set_value(1).run()
    assert_clean(at)
    assert at.subheader[0].value.startswith("Which source tokens made")
    assert "1" in str(at.session_state["explain_row"])


def test_the_true_alignment_is_scored_for_a_generated_task(models_dir: Path) -> None:
    at = open_explain("abc12")  # reverse: output character k comes from source character n-1-k
    frames = [f.value for f in at.dataframe]
    accuracy = next(f for f in frames if "method" in f.columns)
    assert list(accuracy["method"]) == list(METHODS)
    values = accuracy.iloc[:, 1].to_numpy(dtype=float)
    assert np.all((values >= 0) & (values <= 1))


def test_numbers_has_no_true_alignment_and_says_why(models_dir: Path) -> None:
    at = open_explain("seven", "tiny-numbers")
    assert_clean(at)
    assert any("No accuracy against a true alignment" in c.value for c in at.caption)


def test_an_empty_input_is_a_message(models_dir: Path) -> None:
    at = open_explain("   ")
    assert_clean(at)
    assert at.warning and "empty" in at.warning[0].value

