"""The Explain page's faithfulness section (ui/sections/faithfulness.py, ui/compute/faithfulness.py) and its charts
(ui/charts/faithfulness.py): every map's comprehensiveness and sufficiency beside a random ranking, with intervals,
a map that does not beat random marked; on a large model only at a button."""

from __future__ import annotations

import base64
from pathlib import Path

import app_helpers
import numpy as np
import pandas as pd
import plotly.io
import pytest
import torch
from app_helpers import assert_clean

from ui.charts.faithfulness import faithfulness_chart, faithfulness_table, verdict
from ui.state import settings


def values(data) -> np.ndarray:  # noqa: ANN001
    if isinstance(data, dict):  # Plotly's typed array
        return np.frombuffer(base64.b64decode(data["bdata"]), dtype=data["dtype"]).astype(float)
    return np.asarray(data, dtype=float)


def frame(beats: dict[str, object]) -> pd.DataFrame:
    """measures()' frame for maps whose two hard measures beat random or not (True, False or NaN)."""
    rows = []
    for i, (key, call) in enumerate(beats.items()):
        for measure in ("comprehensiveness", "sufficiency", "soft comprehensiveness", "soft sufficiency"):
            rows.append({"key": key, "map": key, "removal": "unk", "measure": measure, "method": 0.3 - 0.1 * i,
                         "low": 0.2 - 0.1 * i, "high": 0.4 - 0.1 * i, "random": 0.1, "beats_random": call,
                         "rows": 5, "undefined": 0})
    return pd.DataFrame(rows)


def test_the_chart_marks_a_map_that_does_not_beat_random():
    data = frame({"occlusion": True, "attention": False, "norm": float("nan")})
    fig = faithfulness_chart(data)
    points = [t for t in fig.data if t.name == "comprehensiveness"][0]
    assert list(points.marker.color) == ["#636efa", "#ef553b", "#ef553b"]
    assert [c[2] for c in points.customdata] == ["beats random", "does NOT beat random", "cannot tell"]
    randoms = [t for t in fig.data if t.name == "random ranking"]
    assert len(randoms) == 2 and list(randoms[0].x) == [0.1, 0.1, 0.1]
    assert list(points.error_x.array) == pytest.approx([0.1] * 3) and list(points.error_x.arrayminus) == \
        pytest.approx([0.1] * 3)
    assert verdict(data, "attention") == "does not beat random on comprehensiveness and sufficiency"
    table = faithfulness_table(data)
    assert list(table.verdict) == ["beats random", "does not beat random on comprehensiveness and sufficiency",
                                   "cannot tell (fewer than two output tokens measured)"]
    assert table.loc[0, "comprehensiveness"] == "0.3000 [0.2000, 0.4000]"


def test_special_positions_are_the_prefix_and_eos():
    from ui.compute.faithfulness import special_positions

    class Pipe:  # what special_positions reads of a Pipeline
        class config:  # noqa: N801
            eos_id = 3

        @staticmethod
        def source_prefix() -> list[int]:
            return [250004]

    src = torch.tensor([[250004, 7, 8, 3]])
    assert special_positions(Pipe, src).tolist() == [[True, False, False, True]]


@pytest.fixture
def shipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(settings.MODELS_DIR_ENV, raising=False)  # pretrained/: the shipped models


def test_the_section_on_a_shipped_model(shipped: None) -> None:
    at = app_helpers.open_page("5_explain", "abc123", "reverse")
    at.get("button_group")[-1].set_value("faithfulness").run()
    assert_clean(at)
    assert at.query_params["more"] == "faithfulness"
    fig = plotly.io.from_json(next(c for c in at.get("plotly_chart") if c.key == "explain_faithfulness").proto.spec)
    table = at.dataframe[-1].value
    n_maps = len(at.selectbox(key="explain_csv_method").options)
    assert len(table) == n_maps and len(fig.data) == 4  # each panel: the maps' points, the random ranking's
    rows = table.set_index("map")
    # The trained reverse model reads the mirrored character: removing attention's top token costs p, and the
    # mirrored character alone keeps it
    assert rows.loc["attention", "verdict"] == "beats random"
    assert set(rows["removed"]) == {"unk", "zero"}  # input × gradient and integrated gradients' zero baseline: zero
    assert rows.loc["integrated gradients", "removed"] == "zero"
    comprehensiveness = values(fig.data[0].x)
    defined = comprehensiveness[~np.isnan(comprehensiveness)]
    assert np.all(np.diff(defined) <= 0) and np.isnan(comprehensiveness[len(defined):]).all()  # best first
    # reverse's ALTI+ is undefined on every row of this input (docs/explain.md): said, never drawn as 0
    assert rows.loc["ALTI+", "verdict"] == "undefined on every output token"


def test_a_large_model_waits_for_the_button(tiny_models_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ui.compute.model_size

    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(tiny_models_dir))
    monkeypatch.setattr(ui.compute.model_size, "LARGE_MODEL", 0)  # every model is large
    at = app_helpers.open_page("5_explain", "abc12", "tiny-reverse")
    at.get("button_group")[-1].set_value("faithfulness").run()
    assert_clean(at)
    assert not [c for c in at.get("plotly_chart") if c.key == "explain_faithfulness"]
    at.button(key="explain_faithfulness_run").click().run()
    assert_clean(at)
    assert [c for c in at.get("plotly_chart") if c.key == "explain_faithfulness"]
