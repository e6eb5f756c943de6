"""Pages 6 (decoding) and 7 (training) under streamlit.testing's AppTest, on the tiny checkpoints of
conftest.py, and the background training job they use.

Pages are opened as a user does: app.py first (it routes to the first page), then ``switch_page``;
every page draws the shared sidebar itself (see ui/sections/sidebar.py).
"""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import app_helpers
import pytest
from app_helpers import assert_clean
from streamlit.testing.v1 import AppTest

from ui.models import runs, training_job
from ui.state import settings

APP = str(Path(__file__).resolve().parent.parent / "app.py")
TIMEOUT = 60


@pytest.fixture
def models_dir(tiny_models_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(tiny_models_dir))
    monkeypatch.setenv(settings.RUNS_DIR_ENV, str(tmp_path / "runs"))
    return tiny_models_dir


def open_page(page: str, *, model: str = "tiny-reverse", text: str | None = "abc12") -> AppTest:
    return app_helpers.open_page(page, text, model)


def chart_count(at: AppTest) -> int:
    return len(at.get("plotly_chart"))


# --- page 6: decoding --------------------------------------------------------------------------------


def test_decoding_page_steps_through_the_output(models_dir: Path, tiny_pipeline) -> None:
    at = open_page("9_decoding")
    assert_clean(at)
    assert at.title[0].value == "Decoding"
    assert len(at.main.code) == 3  # the outputs of greedy, beam search and sampling, side by side
    assert at.main.code[0].value == (tiny_pipeline.translate("abc12") or "(empty)")
    assert at.main.code[1].value == (tiny_pipeline.translate("abc12", beam_size=4) or "(empty)")
    assert chart_count(at) >= 4  # top-k, step attention, whole output (x2), beam tree
    step = at.slider(key="dec_step")
    assert step.value == 1
    at.button(key="dec_next").click().run()
    assert at.slider(key="dec_step").value == 2
    at.button(key="dec_next").click().run()
    at.button(key="dec_prev").click().run()
    assert at.slider(key="dec_step").value == 2
    at.slider(key="dec_step").set_value(4).run()
    assert_clean(at)
    assert "step 4" in " ".join(m.value for m in at.markdown)
    at.selectbox(key="dec_attn_rows").set_value(1).run()  # the heads of layer 1
    assert_clean(at)


@pytest.mark.parametrize("method", ["Beam search", "Sampling", "Greedy"])
def test_decoding_page_switches_method(models_dir: Path, method: str) -> None:
    at = open_page("9_decoding", model="tiny-numbers", text="seven")
    at.slider(key="dec_step").set_value(3).run()
    at.radio(key="dec_method").set_value(method).run()
    assert_clean(at)
    top_k = json.loads(at.get("plotly_chart")[0].proto.spec)  # the step's next-token bars come first
    assert len(top_k["data"][0]["y"]) == settings.RECORD_TOP_K  # the same number of candidates for every method
    at.slider(key="dec_beam_size").set_value(2).run()
    at.slider(key="dec_temperature").set_value(0.5).run()
    at.slider(key="dec_top_k").set_value(3).run()
    at.checkbox(key="dec_pruned").check().run()
    assert_clean(at)
    assert 1 <= at.slider(key="dec_step").value <= at.slider(key="dec_step").max


def test_a_large_models_costly_decoding_charts_wait_for_their_toggles(models_dir: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """At opus-mt size the beam tree and the whole output's two charts are drawn when asked for (a folded
    expander still draws them on every visit); a small model shows all five at once."""
    import ui.compute.model_size

    at = open_page("9_decoding")

    def titles() -> list[str]:
        return [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]

    small = titles()
    assert len(small) == 5 and not {"dec_tree_on", "dec_whole_on"} & {t.key for t in at.toggle}
    monkeypatch.setattr(ui.compute.model_size, "LARGE_MODEL", 0)  # every model is large
    at.run()
    assert_clean(at)
    assert titles() == small[:2]  # the step's two charts
    at.toggle(key="dec_whole_on").set_value(True).run()
    assert_clean(at)
    assert titles() == small[:4]
    at.button(key="dec_run_beam").click().run()  # on a large model beam search itself waits for its button
    at.toggle(key="dec_tree_on").set_value(True).run()
    assert_clean(at)
    assert titles() == small
    at.checkbox(key="dec_pruned").check().run()  # the tree's own option, under its toggle
    assert_clean(at)
    assert len(titles()) == 5


def test_decoding_page_bad_input_is_a_message(models_dir: Path) -> None:
    at = open_page("9_decoding", text="   ")
    assert not at.exception
    assert at.warning and "empty" in at.warning[0].value


# --- page 7: training --------------------------------------------------------------------------------


def test_training_page_renders_schedule_and_smoothing(models_dir: Path) -> None:
    at = open_page("10_training")
    assert_clean(at)
    assert at.title[0].value == "Training"
    assert chart_count(at) == 2  # learning rate and label smoothing; the tiny models have no snapshots
    at.number_input(key="train_warmup").set_value(400).run()
    at.slider(key="train_smoothing").set_value(0.2).run()
    assert_clean(at)
    at.select_slider(key="train_heads").set_value(8).run()
    at.select_slider(key="train_d_model").set_value(16).run()  # 16 % 8 == 0: fine
    assert_clean(at)


def test_training_page_offers_the_sentences_task(models_dir: Path) -> None:
    at = open_page("10_training")
    at.selectbox(key="train_task").set_value("sentences").run()
    assert_clean(at)
    at.slider(key="train_max_clauses").set_value(2).run()
    assert_clean(at)
    assert any(c.value.startswith("Example:") for c in at.caption)  # a pair of the grammar is shown


def test_training_page_defaults_follow_the_task_and_promise_only_what_was_measured(models_dir: Path) -> None:
    from ui.models import training_defaults

    at = open_page("10_training")  # reverse: the string recipe (pre-LN, d_model 64)
    assert at.select_slider(key="train_d_model").value == training_defaults.page_choices("reverse")["d_model"]
    at.select_slider(key="train_d_model").set_value(32).run()
    at.selectbox(key="train_task").set_value("copy").run()  # same defaults: the user's choice stays
    assert at.select_slider(key="train_d_model").value == 32
    at.selectbox(key="train_task").set_value("numbers").run()  # other defaults: they follow
    assert at.select_slider(key="train_d_model").value == training_defaults.page_choices("numbers")["d_model"]
    assert_clean(at)
    at.radio(key="train_source").set_value("My own pairs (TSV/CSV)").run()
    assert not any("With this page's defaults" in i.value for i in at.info)  # nothing is known of a user's file


def test_training_page_works_without_any_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(tmp_path))  # a fresh clone: nothing shipped, nothing trained
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.switch_page("pages/10_training.py").run()
    assert_clean(at)
    assert chart_count(at) == 2
    assert not at.button(key="train_start").disabled


def test_training_page_needs_an_upload_before_training(models_dir: Path) -> None:
    at = open_page("10_training")
    at.radio(key="train_source").set_value("My own pairs (TSV/CSV)").run()
    assert not at.exception
    assert_clean(at)
    assert any("Upload a file of pairs first" in i.value for i in at.info)
    assert at.button(key="train_start").disabled


def test_training_page_bad_tsv_upload_shows_the_line(models_dir: Path) -> None:
    at = open_page("10_training")
    at.radio(key="train_source").set_value("My own pairs (TSV/CSV)").run()
    bad = b"one\teins\ntwo\tzwei\tdrei\n"
    at.file_uploader(key="train_upload").set_value(("pairs.tsv", bad, "text/tab-separated-values")).run()
    assert not at.exception
    messages = " ".join(e.value for e in at.error)
    assert "line 2" in messages and "columns" in messages
    good = b"".join(f"{i}\t{i * 2}\n".encode() for i in range(20))
    at.file_uploader(key="train_upload").set_value(("pairs.tsv", good, "text/tab-separated-values")).run()
    assert_clean(at)
    assert "20 pairs" in at.success[0].value
    assert not at.button(key="train_start").disabled


@pytest.mark.slow
def test_training_page_trains_and_registers_the_model(models_dir: Path) -> None:
    at = open_page("10_training")
    at.selectbox(key="train_task").set_value("copy")
    at.slider(key="train_max_chars").set_value(6)
    at.select_slider(key="train_n_train").set_value(200)
    at.select_slider(key="train_d_model").set_value(16)
    at.select_slider(key="train_heads").set_value(2)
    at.slider(key="train_layers").set_value(1)
    at.select_slider(key="train_d_ff").set_value(32)
    at.slider(key="train_seconds").set_value(3)
    at.run()
    assert_clean(at)
    at.button(key="train_start").click().run()
    assert_clean(at)
    job = at.session_state[training_job.JOB_KEY]
    assert job.running or job.done
    assert job.join(timeout=90), "training did not end"
    assert job.status == training_job.FINISHED, job.error
    at.run()  # the page notices the finished job, registers it and reruns the app
    assert_clean(at)
    label = runs.saved_runs()[0].label  # the run's stable name, as the kept list and links have it
    assert re.fullmatch(r"copy-\d{4}-\d{4}", label), label
    assert "copy" in at.sidebar.selectbox(key=settings.MODEL_WIDGET).options  # shown by its name
    assert at.session_state[settings.MODEL] == label
    assert any("“copy”" in s.value for s in at.success)
    assert at.selectbox(key="train_snapshot_model").value == label  # section 4 shows the new run
    assert any(len(job.records()) and r.step >= 1 for r in job.records())
    # the snapshots of the new run: the slider lists them and the heatmap follows it
    snapshots = next(s for s in at.select_slider if s.key.startswith("train_snapshot_"))
    assert snapshots.options[0] == "0" and len(snapshots.options) >= 3
    snapshots.set_value(0).run()
    assert_clean(at)
    assert any("step 0" in c.proto.spec for c in at.get("plotly_chart"))  # the heatmap shows the chosen snapshot
    last = snapshots.options[-1]
    next(s for s in at.select_slider if s.key.startswith("train_snapshot_")).set_value(last).run()
    assert_clean(at)
    titles = [c.proto.spec for c in at.get("plotly_chart")]
    assert any(f"step {int(last):,}" in t or f"step {last}" in t for t in titles)  # ... and follows the slider
    assert not any("step 0" in t for t in titles)
    # and the decoding page runs on it
    at.switch_page("pages/9_decoding.py").run()
    assert_clean(at)
    assert at.sidebar.selectbox(key=settings.MODEL_WIDGET).value == label
    # the sidebar offers examples of the task it learned, and Tokenization lists the new vocabulary's pieces
    examples = at.sidebar.selectbox(key=settings.EXAMPLE_WIDGET).options
    assert len(examples) >= 3 and all(e == e.strip() and e for e in examples)
    at.switch_page("pages/2_tokenization.py").run()
    assert_clean(at)
    vocab = next(d.value for d in at.dataframe if "piece" in d.value.columns and "position" not in d.value.columns)
    assert len(vocab) == runs_pipeline(label).src_tokenizer.vocab_size


def runs_pipeline(label: str):
    """The pipeline of the kept run called ``label``."""
    from transformer.pipeline import load_pretrained

    return load_pretrained(next(r.folder for r in runs.saved_runs() if r.label == label))


def ended_job(name: str, out: Path | None = None, error: str | None = None) -> training_job.TrainingJob:
    """A job that has already ended: its run wrote ``out`` (as transformer.train does), or raised ``error``."""

    def fake_train(config, *, callback, stop_event):
        if error:
            raise ValueError(error)
        return SimpleNamespace(out=str(out), metrics={}, step=3, elapsed=0.5, stop_reason="time limit")

    config = SimpleNamespace(max_seconds=1.0, data=None, task="copy", tokenizer="char", task_options={},
                             src_lang="en", tgt_lang="de")  # the fields the page reads
    job = training_job.TrainingJob(config, train_fn=fake_train, name=name).start()
    assert job.join(timeout=10)
    return job


def test_how_the_attention_formed_follows_the_sidebars_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    """Issue 45: section 4's model menu stayed on the shipped model while the sidebar had the new run selected
    (a widget's ``index`` counts only on its first run). It follows the sidebar's model whenever that changes; a
    choice made in the menu itself stands until then."""
    from ui.state.settings import models_dir

    runs_folder = tmp_path / "runs"
    shutil.copytree(models_dir() / "reverse", runs_folder / "reverse-20261127-181935-b374f155")  # with snapshots
    monkeypatch.setenv(settings.RUNS_DIR_ENV, str(runs_folder))
    run = runs.saved_runs()[0].label
    at = app_helpers.open_page("10_training", None, "reverse")
    assert_clean(at)
    assert at.selectbox(key="train_snapshot_model").value == "reverse"
    at.sidebar.selectbox(key=settings.MODEL_WIDGET).set_value(run).run()
    assert_clean(at)
    assert at.selectbox(key="train_snapshot_model").value == run
    assert at.selectbox(key="train_snapshot_model").options.count("reverse (reverse-1127-1819)") == 1  # its name
    at.selectbox(key="train_snapshot_model").set_value("dates-de").run()  # the reader's own choice stands
    at.run()
    assert at.selectbox(key="train_snapshot_model").value == "dates-de"


def test_a_run_that_ended_joins_the_menu_on_any_page(models_dir: Path, tiny_checkpoint: Path, tmp_path: Path) -> None:
    at = open_page("4_attention")
    job = ended_job("my-run", shutil.copytree(tiny_checkpoint, tmp_path / "my-run"))
    at.session_state[training_job.JOB_KEY] = job  # it ended while the user was reading this page
    at.run()
    assert_clean(at)
    label = "my-run (trained here)"
    assert job.registered and job.registered_label == label
    assert label in at.sidebar.selectbox(key=settings.MODEL_WIDGET).options
    assert at.session_state[settings.MODEL] == "tiny-reverse"  # added to the menu, not switched to
    assert any(label in t.value for t in at.toast)
    at.run()
    assert not at.toast, "said once"
    at.sidebar.selectbox(key=settings.MODEL_WIDGET).set_value(label).run()
    assert_clean(at)
    assert at.title[0].value == "Attention"
    # on the Training page a run that ended becomes the current model
    at.session_state[training_job.JOB_KEY] = ended_job("other", shutil.copytree(tiny_checkpoint, tmp_path / "o"))
    at.switch_page("pages/10_training.py").run()
    assert_clean(at)
    assert at.session_state[settings.MODEL] == "other (trained here)"
    assert any("other (trained here)" in s.value for s in at.success)


def test_a_failed_or_unreadable_run_is_a_toast(models_dir: Path, tmp_path: Path) -> None:
    at = open_page("3_embeddings")
    at.session_state[training_job.JOB_KEY] = ended_job("broken", tmp_path / "nothing-here")
    at.run()
    assert not at.exception
    assert any("cannot be used" in t.value for t in at.toast)
    at.session_state[training_job.JOB_KEY] = ended_job("failing", error="line 3: the target is empty")
    at.run()
    assert any("line 3" in t.value for t in at.toast)
    assert at.sidebar.selectbox(key=settings.MODEL_WIDGET).options == ["tiny-numbers", "tiny-reverse"]


# --- the background job itself ------------------------------------------------------------------------


def test_training_job_collects_progress_and_stops_on_request() -> None:
    started = threading.Event()

    def fake_train(config, *, callback, stop_event):
        step = 0
        while not stop_event.is_set():
            step += 1
            callback({"step": step, "loss": 1.0 / step})
            started.set()
            time.sleep(0.01)
        return {"steps": step, "config": config}

    state_map: dict = {}
    job = training_job.start_session_job("cfg", train_fn=fake_train, name="fake", state=state_map)
    assert training_job.session_job(state_map) is job
    assert started.wait(5) and job.running
    job.stop()
    assert job.join(timeout=5)
    assert job.status == training_job.STOPPED
    records = job.records()
    assert records and records[0]["step"] == 1 and job.latest()["step"] == records[-1]["step"]
    assert job.result == {"steps": len(records), "config": "cfg"}
    with pytest.raises(RuntimeError):
        job.start()


def test_training_job_reports_a_failure_as_a_message() -> None:
    def failing_train(config, *, callback, stop_event):
        callback(step=1, loss=2.0)
        raise ValueError("line 3: the target is empty")

    job = training_job.TrainingJob(None, train_fn=failing_train).start()
    assert job.join(timeout=5)
    assert job.status == training_job.FAILED
    assert job.error == "line 3: the target is empty"
    assert "Traceback" in job.error_details
    assert job.records() == [{"step": 1, "loss": 2.0}]


def test_a_new_job_stops_the_running_one() -> None:
    def endless(config, *, callback, stop_event):
        stop_event.wait(10)

    state_map: dict = {}
    first = training_job.start_session_job(1, train_fn=endless, state=state_map)
    second = training_job.start_session_job(2, train_fn=endless, state=state_map)
    assert first.join(timeout=5) and first.status == training_job.STOPPED
    assert training_job.session_job(state_map) is second
    second.stop()
    assert second.join(timeout=5)
