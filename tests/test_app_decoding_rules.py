"""The Decoding page's beam search follows the model (ui/sections/decoding.py ``beam_controls``): the formula it shows
is the rule the model's beam search ranks by (GNMT's for ours, ``transformers``' for a Hugging Face folder), its
controls start at the model's own settings (``ui.compute.decoding.beam_defaults``: a folder's ``num_beams``,
``length_penalty`` and ``early_stopping``, "never" included), a link overrides them, and the "Compare with" model
ranks by its own rule. On tiny real BART folders (``family_app_folders``) beside the tiny checkpoints of conftest.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import app_helpers
import pytest
from app_helpers import assert_clean
from family_app_folders import FAMILY_FOLDERS, build_family_folder
from streamlit.testing.v1 import AppTest

import ui.compute.decoding
from ui.sections import compare
from ui.state import settings

TEXT = "the house is small."
# a folder that records every beam setting: 12 beams (over the slider's 8), its own alpha, and "never"
NEVER = {**FAMILY_FOLDERS["bart"][2], "num_beams": 12, "length_penalty": 1.5, "early_stopping": "never"}
GNMT, HF = "((5 + |Y|)/6)", "|Y|^{\\alpha}"


@pytest.fixture(scope="module")
def folders(family_tokenizers: dict[str, Path], tiny_models_dir: Path,
            tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("decoding-rules")
    build_family_folder(root, "bart", family_tokenizers["bart"], name="tiny-bart")
    never = build_family_folder(root, "bart", family_tokenizers["bart"], name="tiny-never", seed=1)
    (never / "generation_config.json").write_text(json.dumps(NEVER), encoding="utf-8")
    shutil.copytree(tiny_models_dir / "tiny-reverse", root / "tiny-reverse")
    return root


@pytest.fixture
def models_dir(folders: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(folders))
    return folders


def controls(at: AppTest) -> tuple[int, float, object]:
    return at.slider(key="dec_beam_size").value, at.slider(key="dec_alpha").value, at.radio(key="dec_early").value


def formulas(at: AppTest) -> str:
    return " ".join(m.value for m in at.latex)


def test_a_folders_own_beam_settings_and_rule_are_where_the_page_starts(models_dir: Path) -> None:
    at = app_helpers.open_page("9_decoding", TEXT, "tiny-never")
    assert_clean(at)
    assert controls(at) == (8, 1.5, "never")  # num_beams 12 brought into the slider's 1..8
    assert len(at.radio(key="dec_early").options) == 3  # True, False and "never", shown
    assert HF in formulas(at) and GNMT not in formulas(at)
    assert (at.query_params["beam"], at.query_params["alpha"], at.query_params["early"]) == ("8", "1.5", "never")
    at = app_helpers.open_page("9_decoding", TEXT, "tiny-bart")  # no length_penalty, early_stopping: generate's
    assert controls(at) == (2, 1.0, False)


def test_our_model_keeps_gnmt_and_its_defaults(models_dir: Path) -> None:
    at = app_helpers.open_page("9_decoding", "abc", "tiny-reverse")
    assert_clean(at)
    assert controls(at) == (4, 0.6, False)
    assert len(at.radio(key="dec_early").options) == 2  # under GNMT's exact bound "never" is False
    assert GNMT in formulas(at) and HF not in formulas(at)


def test_the_controls_follow_a_change_of_model_and_keep_the_users_choice(models_dir: Path) -> None:
    at = app_helpers.open_page("9_decoding", TEXT, "tiny-never")
    at.slider(key="dec_alpha").set_value(0.7).run()
    at.slider(key="dec_beam_size").set_value(3).run()
    assert controls(at) == (3, 0.7, "never")  # the user's, kept across reruns
    at.session_state[settings.MODEL] = "tiny-reverse"
    at.run()
    assert_clean(at)
    assert controls(at) == (4, 0.6, False) and GNMT in formulas(at)


def test_a_link_overrides_the_folders_settings(models_dir: Path) -> None:
    at = AppTest.from_file(app_helpers.APP, default_timeout=app_helpers.TIMEOUT)
    at.query_params.update(model="tiny-never", text=TEXT, method="beam", beam="3", alpha="0.4", early="true")
    at.switch_page("pages/9_decoding.py").run()
    assert_clean(at)
    assert controls(at) == (3, 0.4, True)
    at = AppTest.from_file(app_helpers.APP, default_timeout=app_helpers.TIMEOUT)
    at.query_params.update(model="tiny-reverse", text="abc", early="never", alpha="x")  # not GNMT's, not a number
    at.switch_page("pages/9_decoding.py").run()
    assert controls(at) == (4, 0.6, False)
    assert len([box for box in at.sidebar.info if str(box.value).startswith("Link:")]) == 2


@pytest.fixture
def searches(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """The options of every beam search the page runs (its cache emptied first)."""
    found: list[dict] = []
    search = ui.compute.decoding.beam_search

    def spy(model, source, **options):  # noqa: ANN001, ANN202
        found.append({key: options[key] for key in ("beam_size", "length_penalty", "early_stopping", "length_norm")})
        return search(model, source, **options)

    ui.compute.decoding._beam.clear()
    monkeypatch.setattr(ui.compute.decoding, "beam_search", spy)
    yield found
    ui.compute.decoding._beam.clear()


def beside_caption(at: AppTest) -> str:
    return next(c.value for c in at.caption if c.value.startswith("k = "))


def test_the_compared_model_ranks_by_its_own_rule(models_dir: Path, searches: list[dict]) -> None:
    at = app_helpers.open_page("9_decoding", "abc", "tiny-reverse", **{compare.COMPARE: "tiny-never"})
    assert_clean(at)
    assert any("Beside it: tiny-never" in m.value for m in at.markdown)
    ours = {"beam_size": 4, "length_penalty": 0.6, "early_stopping": False, "length_norm": "gnmt"}
    theirs = {"beam_size": 4, "length_penalty": 1.5, "early_stopping": "never", "length_norm": "hf"}
    assert ours in searches and theirs in searches and len(searches) == 2
    assert "its own rule" in beside_caption(at) and "α = 1.5" in beside_caption(at)


def test_a_compared_model_of_the_same_rule_takes_the_same_settings(models_dir: Path, searches: list[dict]) -> None:
    at = app_helpers.open_page("9_decoding", TEXT, "tiny-never", **{compare.COMPARE: "tiny-bart"})
    assert_clean(at)
    assert searches == [{"beam_size": 8, "length_penalty": 1.5, "early_stopping": "never", "length_norm": "hf"}] * 2
    assert "the same rule and settings" in beside_caption(at)
