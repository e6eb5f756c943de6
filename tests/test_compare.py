"""A second model beside the first (ui/sections/compare.py) on Attention, Explain and Decoding."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from ui.models.menu import ModelEntry
from ui.sections import compare
from ui.state import settings

APP = str(Path(__file__).resolve().parent.parent / "app.py")


@pytest.fixture
def at(make_app) -> AppTest:
    return make_app("tiny-reverse", "abc12")


def charts(at: AppTest) -> list[str]:
    return [c.proto.id for c in at.get("plotly_chart")]


def test_the_menu_lists_snapshots_first_then_the_other_models(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    (folder / "snapshots").mkdir(parents=True)
    for step in (0, 50):
        (folder / "snapshots" / f"step_{step:07d}.safetensors").write_bytes(b"")
    current = ModelEntry("m", "k", "shipped", folder)
    other = ModelEntry("other", "k2", "shipped", None)
    options = compare.choices({"m": current, "other": other}, current)
    assert list(options) == ["m at step 0", "m at step 50", "other"]
    assert options["m at step 50"] == (current, 50) and options["other"] == (other, None)


def test_attention_draws_the_second_model_on_the_same_page(at: AppTest) -> None:
    at.session_state[compare.COMPARE] = "tiny-numbers"
    at.switch_page("pages/4_attention.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key=compare.COMPARE_WIDGET).value == "tiny-numbers"
    assert any("Beside it: tiny-numbers" in m.value for m in at.markdown)
    at.radio(key="attn_kind").set_value("cross").run()  # layer 0, head 0: tiny-numbers has both
    assert not at.exception
    assert len(at.get("plotly_chart")) == 5  # weights, lines, the second's weights and lines, grid
    at.radio(key="attn_view").set_value("row").run()
    assert not at.exception
    keys = [c.key for c in at.get("plotly_chart")]
    assert "attn_row" in keys and "attn_row_2" in keys  # both models' selected rows, side by side
    assert at.query_params["compare"] == "tiny-numbers"
    at.selectbox(key="attn_layer").set_value(1).run()
    at.radio(key="attn_kind").set_value("encoder").run()  # tiny-numbers has one encoder layer
    assert not at.exception
    assert any("no layer 1" in i.value for i in at.info) or at.selectbox(key="attn_layer").value == 0


def test_scores_of_both_models_share_one_colour_range(at: AppTest) -> None:
    at.session_state[compare.COMPARE] = "tiny-numbers"
    at.switch_page("pages/4_attention.py").run()
    at.radio(key="attn_kind").set_value("cross").run()
    at.radio(key="attn_view").set_value("scores").run()
    assert not at.exception, [e.value for e in at.exception]
    import json

    figures = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    ranges = [(f["data"][0].get("zmin"), f["data"][0].get("zmax")) for f in figures
              if f["data"][0].get("colorscale") and "core" in json.dumps(f.get("layout", {}).get("title", ""))]
    assert len(ranges) == 2 and ranges[0] == ranges[1] and ranges[0][0] == -ranges[0][1]


def test_explain_and_decoding_draw_the_second_model_and_none_removes_it(at: AppTest) -> None:
    at.session_state[compare.COMPARE] = "tiny-numbers"
    for page in ("pages/5_explain.py", "pages/9_decoding.py"):
        at.switch_page(page).run()
        assert not at.exception, (page, [e.value for e in at.exception])
        assert any("Beside it: tiny-numbers" in m.value for m in at.markdown), page
    at.selectbox(key=compare.COMPARE_WIDGET).set_value(compare.NONE).run()
    assert not any("Beside it" in m.value for m in at.markdown)
    assert "compare" not in at.query_params


def test_a_training_snapshot_of_the_same_model_beside_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run with snapshots offers "<model> at step N"; choosing one loads that snapshot beside the model."""
    from transformer.train import TrainConfig, train

    models = tmp_path / "models"
    train(TrainConfig(task="copy", task_options={"min_len": 2, "max_len": 6}, n_train=200, n_valid=20, n_test=20,
                      tokenizer="char", d_model=16, n_heads=2, n_layers=1, d_ff=32, max_steps=5, max_seconds=None,
                      eval_every=1e9, threads=1, out=str(models / "copy")))
    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(models))
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state[settings.MODEL] = "copy"
    at.session_state[settings.TEXT] = "abcd"
    at.query_params["compare"] = "copy at step 1"
    at.switch_page("pages/4_attention.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert "copy at step 2" in at.selectbox(key=compare.COMPARE_WIDGET).options
    assert any("Beside it: copy at step 1" in m.value for m in at.markdown)
    assert len(at.get("plotly_chart")) == 5  # the snapshot's weights and lines beside the model's, the grid
