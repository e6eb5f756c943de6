"""On a large model (``ui.compute.model_size``, the threshold where the Explain page's costly methods wait) the
Decoding page shows greedy (the shared translation) at once, and beam search and sampling wait for a button each
(``ui/sections/decoding.py`` ``runs``); a link's ``method``, or choosing the method under "Step by step", runs it as
if pressed; a small model runs both at once, as before. The "Compare with" model follows the rule for its own size.
The tiny checkpoints of conftest.py are made "large" by lowering the threshold."""

from __future__ import annotations

from pathlib import Path

import app_helpers
import pytest
from app_helpers import assert_clean
from streamlit.testing.v1 import AppTest

import ui.compute.decoding
import ui.compute.model_size
from transformer.pipeline import load_pretrained
from ui.sections import compare
from ui.state import settings


@pytest.fixture
def models_dir(tiny_models_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(tiny_models_dir))
    return tiny_models_dir


@pytest.fixture
def sizes(models_dir: Path) -> dict[int, str]:
    """Each tiny model's name by its parameter count (tiny-numbers is the larger)."""
    found = {load_pretrained(models_dir / name).model.num_parameters(): name
             for name in ("tiny-reverse", "tiny-numbers")}
    assert len(found) == 2
    return found


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch, sizes: dict[int, str]) -> list[tuple[str, str]]:
    """(method, model name) of every beam search and sample the page runs (their caches emptied first)."""
    found: list[tuple[str, str]] = []
    real = {"beam": ui.compute.decoding.beam_search, "sample": ui.compute.decoding.sample}

    def spy(method: str):  # noqa: ANN202
        def run(model, source, **options):  # noqa: ANN001, ANN202
            found.append((method, sizes[model.num_parameters()]))
            return real[method](model, source, **options)
        return run

    for cache in (ui.compute.decoding._beam, ui.compute.decoding._sample):
        cache.clear()
    monkeypatch.setattr(ui.compute.decoding, "beam_search", spy("beam"))
    monkeypatch.setattr(ui.compute.decoding, "sample", spy("sample"))
    yield found
    forget(found)


def forget(calls: list) -> None:
    """Empty the searches' caches and the record of calls (a new visit computes again)."""
    for cache in (ui.compute.decoding._beam, ui.compute.decoding._sample):
        cache.clear()
    calls.clear()


def large(monkeypatch: pytest.MonkeyPatch, above: int = 0) -> None:
    monkeypatch.setattr(ui.compute.model_size, "LARGE_MODEL", above)  # 0: every model is large


def run_buttons(at: AppTest) -> set[str]:
    return {b.key for b in at.button if b.key and b.key.startswith("dec_run_")}


def test_a_small_model_runs_both_at_once(models_dir: Path, calls: list) -> None:
    at = app_helpers.open_page("9_decoding", "abc12")
    assert_clean(at)
    assert calls == [("beam", "tiny-reverse"), ("sample", "tiny-reverse")]
    assert not run_buttons(at)


def test_a_large_model_waits_for_each_button(models_dir: Path, calls: list, monkeypatch: pytest.MonkeyPatch) -> None:
    large(monkeypatch)
    at = app_helpers.open_page("9_decoding", "abc12")
    assert_clean(at)
    assert calls == []  # greedy only: the shared translation
    assert run_buttons(at) == {"dec_run_beam", "dec_run_sampling"}
    said = " ".join(c.value for c in at.caption)
    assert "beam search waits for the button" in said and "up to 4 × the work of the greedy translation" in said
    assert "sampling waits for the button" in said
    assert [c.value for c in at.code][:1] and at.radio(key="dec_method").value == "Greedy"
    at.button(key="dec_run_beam").click().run()
    assert_clean(at)
    assert calls == [("beam", "tiny-reverse")]
    at.slider(key="dec_temperature").set_value(0.5).run()  # a click elsewhere: the search stays, from the cache
    assert calls == [("beam", "tiny-reverse")]
    assert run_buttons(at) == {"dec_run_sampling"}  # the pressed button is gone from the next run on
    at.slider(key="dec_beam_size").set_value(2).run()  # asked for this input: new settings search at once
    assert calls == [("beam", "tiny-reverse")] * 2
    at.button(key="dec_run_sampling").click().run()
    assert_clean(at)
    assert calls[2:] == [("sample", "tiny-reverse")]
    at.radio(key="dec_method").set_value("Sampling").run()
    assert_clean(at)
    assert calls[3:] == [] and not run_buttons(at)
    assert not [i for i in at.info if "no steps" in i.value]


@pytest.mark.parametrize(("link", "method", "runs"),
                         [("beam", "Beam search", "beam"), ("sampling", "Sampling", "sample")])
def test_a_link_that_asks_for_a_method_runs_it(models_dir: Path, calls: list, monkeypatch: pytest.MonkeyPatch,
                                               link: str, method: str, runs: str) -> None:
    large(monkeypatch)
    at = AppTest.from_file(app_helpers.APP, default_timeout=app_helpers.TIMEOUT)
    at.query_params.update(model="tiny-reverse", text="abc12", method=link)
    at.switch_page("pages/9_decoding.py").run()
    assert_clean(at)
    assert calls == [(runs, "tiny-reverse")]  # the other method still waits
    assert at.radio(key="dec_method").value == method
    assert not [i for i in at.info if "no steps" in i.value]  # its steps are shown


def test_choosing_a_method_under_step_by_step_runs_it(models_dir: Path, calls: list,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    large(monkeypatch)
    at = app_helpers.open_page("9_decoding", "abc12")
    at.radio(key="dec_method").set_value("Beam search").run()
    assert_clean(at)
    assert calls == [("beam", "tiny-reverse")]
    assert not [i for i in at.info if "no steps" in i.value]


def test_the_compared_model_follows_the_rule_for_its_own_size(models_dir: Path, calls: list, sizes: dict[int, str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    small_size = min(sizes)
    beside = {compare.COMPARE: "tiny-numbers"}
    large(monkeypatch, small_size)  # only tiny-numbers is large: the compared one waits for its own button
    at = app_helpers.open_page("9_decoding", "12", "tiny-reverse", **beside)
    assert_clean(at)
    assert calls == [("beam", "tiny-reverse"), ("sample", "tiny-reverse")]
    assert run_buttons(at) == {"dec_run_beam_2", "dec_run_sampling_2"}
    at.button(key="dec_run_beam_2").click().run()
    assert_clean(at)
    assert calls[2:] == [("beam", "tiny-numbers")]
    forget(calls)
    at = app_helpers.open_page("9_decoding", "12", "tiny-numbers", **{compare.COMPARE: "tiny-reverse"})
    assert_clean(at)  # the first model large, the compared one small: that one at once
    assert calls == [("beam", "tiny-reverse"), ("sample", "tiny-reverse")]
    forget(calls)
    large(monkeypatch)  # both large: one press runs both models' search
    at = app_helpers.open_page("9_decoding", "12", "tiny-reverse", **beside)
    assert_clean(at)
    assert calls == [] and run_buttons(at) == {"dec_run_beam", "dec_run_sampling"}
    at.button(key="dec_run_beam").click().run()
    assert_clean(at)
    assert sorted(calls) == [("beam", "tiny-numbers"), ("beam", "tiny-reverse")]
