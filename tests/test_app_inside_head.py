"""The Attention page's step-by-step section and its code expanders (ui/sections/inside_head.py)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from transformer.network.attention import scaled_dot_product_attention
from ui.state import settings

APP = str(Path(__file__).resolve().parent.parent / "app.py")


@pytest.fixture
def at(tiny_models_dir: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(tiny_models_dir))
    app = AppTest.from_file(APP, default_timeout=60)
    app.query_params.update({"model": "tiny-numbers", "text": "forty-two", "kind": "cross", "layer": "1",
                             "head": "3", "query": "2", "steps": "1"})
    app.switch_page("pages/4_attention.py")
    return app.run()


def test_the_step_by_step_section_shows_the_head_and_its_code(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert at.toggle(key="attn_steps").value is True
    keys = [chart.proto.id for chart in at.get("plotly_chart")]
    assert len(keys) == 6  # weights, lines, the grid, and the section's three
    table = next(df.value for df in at.dataframe if "softmax weight" in df.value.columns)
    assert table["softmax weight"].sum() == pytest.approx(1.0)
    codes = [c.value.strip() for c in at.main.code]
    assert inspect.getsource(scaled_dot_product_attention).strip() in codes  # the package's own source
    assert any("def _project" in c for c in codes) and any("def forward" in c for c in codes)
    assert at.query_params["steps"] == "1"


def test_the_average_of_heads_has_no_single_computation(at: AppTest) -> None:
    at.selectbox(key="attn_head").set_value("average").run()
    assert not at.exception
    assert any("Pick one head" in i.value for i in at.info)
    at.toggle(key="attn_steps").set_value(False).run()
    assert "steps" not in at.query_params
