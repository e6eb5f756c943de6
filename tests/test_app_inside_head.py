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


def test_the_step_by_step_table_writes_numbers_a_reader_can_read(at: AppTest) -> None:
    """Issue 45: the softmax column printed a weight of about 1e-60 as sixty zeros and a one. The table shows
    four decimals, and scientific notation below 1e-4 (``ui.charts.readable_number``); the values underneath stay
    numbers, so a column still sorts by size."""
    import re

    from streamlit import dataframe_util

    from ui.charts import readable_number

    assert readable_number(1e-60) == "1.00e-60" and readable_number(0.123456) == "0.1235"
    assert readable_number(float("-inf")) == "-inf" and readable_number(0.0) == "0.0000"
    element = next(df for df in at.dataframe if "softmax weight" in df.value.columns)
    assert element.proto.arrow_data.HasField("styler"), "the table is shown as it is stored, every digit"
    shown = dataframe_util.convert_arrow_bytes_to_pandas_df(element.proto.arrow_data.styler.display_values)
    readable = re.compile(r"^(-?\d+\.\d{4}|-?\d\.\d\de[-+]\d+|-inf)$")
    for column in ("q·k", "score", "softmax weight"):
        assert all(readable.match(text) for text in shown[column]), shown[column].tolist()
    assert element.value["softmax weight"].dtype.kind == "f"
