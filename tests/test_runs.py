"""Models trained in the app are kept: listed after a reload, renamed, deleted, downloaded, bounded."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from transformer.pipeline import load_pretrained
from ui.models import runs, training, uploads
from ui.state import settings

APP = str(Path(__file__).resolve().parent.parent / "app.py")


@pytest.fixture
def runs_folder(tiny_models_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two finished runs as the Training page names them, the second one newer."""
    folder = tmp_path / "runs"
    folder.mkdir()
    for i, (source, name) in enumerate((("tiny-reverse", "reverse-20261122-101010-aaaa1111"),
                                        ("tiny-numbers", "numbers-en-de-20261122-111111-bbbb2222"))):
        shutil.copytree(tiny_models_dir / source, folder / name)
        stamp = time.time() - 100 + 10 * i
        os.utime(folder / name / "model.safetensors", (stamp, stamp))
    monkeypatch.setenv(settings.RUNS_DIR_ENV, str(folder))
    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(tiny_models_dir))
    return folder


def test_runs_are_listed_newest_first_with_the_page_names(runs_folder: Path) -> None:
    kept = runs.saved_runs()
    assert [r.name for r in kept] == ["numbers-en-de", "reverse"]
    assert all(r.megabytes > 0 and r.parameters > 0 for r in kept)
    (runs_folder / "half-written").mkdir()  # no model.safetensors yet: not listed
    (runs_folder / "half-written" / "config.json").write_text("{}")
    assert len(runs.saved_runs()) == 2


def test_a_run_has_a_stable_id_from_its_folder(runs_folder: Path) -> None:
    newest, oldest = runs.saved_runs()
    assert (newest.label, oldest.label) == ("numbers-en-de-1122-1111", "reverse-1122-1010")
    runs.rename_run(newest.folder, "my numbers")
    assert runs.saved_runs()[0].label == "numbers-en-de-1122-1111"  # renamed: the menu's value and links stay
    # two runs of one task started in the same minute: the later one gets its second
    shutil.copytree(oldest.folder, runs_folder / "reverse-20261122-101055-cccc3333")
    assert {r.label for r in runs.saved_runs()} >= {"reverse-1122-1010", "reverse-1122-101055"}


def test_a_link_to_a_run_restores_it_and_a_vanished_run_says_so(runs_folder: Path) -> None:
    from ui.models.menu import find_label, looks_like_run

    newest, _ = runs.saved_runs()
    runs.rename_run(newest.folder, "my numbers")
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["model"] = "numbers-en-de-1122-1111"  # the link made before the rename
    at.run()
    assert not at.exception
    assert at.session_state[settings.MODEL] == "numbers-en-de-1122-1111"
    assert at.sidebar.selectbox(key=settings.MODEL_WIDGET).value == "numbers-en-de-1122-1111"
    old = AppTest.from_file(APP, default_timeout=60)  # a link from before the menu showed names: "name (run id)"
    old.query_params["model"] = "my numbers (numbers-en-de-1122-1111)"
    old.run()
    assert old.session_state[settings.MODEL] == "numbers-en-de-1122-1111"
    assert find_label({"tiny-reverse": None}, "tiny-reverse") == "tiny-reverse"
    assert looks_like_run("reverse-1122-1010") and not looks_like_run("tiny-reverse")
    gone = AppTest.from_file(APP, default_timeout=60)
    gone.query_params["model"] = "reverse-0101-0000"
    gone.run()
    assert not gone.exception
    texts = " ".join(str(e.value) for e in [*gone.warning, *gone.info, *gone.toast, *gone.caption])
    assert "no longer kept" in texts, texts


def test_one_name_everywhere_with_the_id_only_where_two_would_look_the_same(runs_folder: Path) -> None:
    """Issue 45: one run carried four labels ("reverse-1127-1819" in the menu, "reverse" in the kept-runs table,
    "reverse (reverse-20261127-181935-b374f155)" in the run menu, "reverse (b374f155)" in the chart legend). Every
    place shows ``runs.run_names``: the name, with the run id where another run or a shipped model has it too."""
    newest, oldest = runs.saved_runs()
    assert runs.run_names([newest, oldest]) == {newest.folder: "numbers-en-de", oldest.folder: "reverse"}
    assert runs.run_names([newest, oldest], ["reverse"])[oldest.folder] == "reverse (reverse-1122-1010)"
    runs.rename_run(newest.folder, "reverse")  # two runs now read "reverse": both carry their ids
    assert sorted(runs.run_names(runs.saved_runs()).values()) == ["reverse (numbers-en-de-1122-1111)",
                                                                  "reverse (reverse-1122-1010)"]
    runs.rename_run(newest.folder, "my numbers")
    for run in (newest, oldest):  # a training log, so the kept runs' curves are drawn with a legend
        (run.folder / "train_log.jsonl").write_text('{"step": 1, "loss": 3.0, "phase": "train"}\n'
                                                    '{"step": 2, "loss": 2.0, "phase": "train"}\n')
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("pages/10_training.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    menu = at.sidebar.selectbox(key=settings.MODEL_WIDGET)  # AppTest lists the options as shown
    assert {"my numbers", "reverse"} <= set(menu.options) and not any("1122" in o for o in menu.options)
    table = next(df.value for df in at.dataframe if "folder" in df.value.columns)
    assert sorted(table["name"]) == ["my numbers", "reverse"]
    assert sorted(at.selectbox(key="runs_choice").options) == ["my numbers", "reverse"]
    figures = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    compared = next(f for f in figures if "training loss" in json.dumps(f["layout"].get("annotations", [])))
    assert sorted(t["name"] for t in compared["data"] if t.get("showlegend", True)) == ["my numbers", "reverse"]


def test_rename_delete_and_download(runs_folder: Path, tmp_path: Path) -> None:
    newest, oldest = runs.saved_runs()
    runs.rename_run(newest.folder, "  my numbers  ")
    assert runs.saved_runs()[0].name == "my numbers" and newest.folder.is_dir()  # the folder stays
    for bad in ("", "a/b", "x" * 61, "tab\there"):
        with pytest.raises(ValueError):
            runs.rename_run(newest.folder, bad)
    with pytest.raises(ValueError, match="not a run of this app"):
        runs.rename_run(tmp_path, "elsewhere")
    unpacked = uploads.extract_checkpoint_zip(runs.run_zip(newest.folder), tmp_path / "unzipped")
    assert load_pretrained(unpacked).config == load_pretrained(newest.folder).config  # loads back
    with pytest.raises(ValueError, match="still training"):
        runs.delete_run(oldest.folder, busy=oldest.folder)
    runs.delete_run(oldest.folder)
    assert [r.name for r in runs.saved_runs()] == ["my numbers"]


def test_the_oldest_runs_go_beyond_the_bound(runs_folder: Path) -> None:
    oldest = runs.saved_runs()[-1].folder
    assert runs.bound_runs(keep=1) == [oldest] and len(runs.saved_runs()) == 1


def test_kept_runs_are_in_the_menu_of_a_new_session(runs_folder: Path) -> None:
    at = AppTest.from_file(APP, default_timeout=60)  # a reloaded browser: a fresh session
    at.run()
    options = at.sidebar.selectbox(key=settings.MODEL_WIDGET).options
    labels = [r.label for r in runs.saved_runs()]
    assert set(runs.run_names(runs.saved_runs()).values()) <= set(options)  # shown by name, chosen by run id
    at.sidebar.selectbox(key=settings.MODEL_WIDGET).set_value(labels[0]).run()
    assert not at.exception and at.session_state[settings.MODEL] == labels[0]
    at.switch_page("pages/10_training.py").run()
    assert not at.exception
    assert any("Kept runs" in h.value for h in at.header)


def test_app_runs_are_small_and_a_second_run_of_a_task_is_another_model(runs_folder: Path) -> None:
    config = training.make_config(max_seconds=3, task="copy")
    assert (config.snapshot_dtype, config.max_snapshots, config.save_optimizer) == ("float16", 6, False)

    def script() -> None:
        import os

        from ui.models.menu import register_trained_model

        for folder in sorted(os.listdir(os.environ["TRANSFORMER_APP_RUNS_DIR"])):
            register_trained_model("copy", os.path.join(os.environ["TRANSFORMER_APP_RUNS_DIR"], folder))

    at = AppTest.from_function(script, default_timeout=60).run()
    assert not at.exception
    assert set(at.session_state[settings.SESSION_MODELS]) == {r.label for r in runs.saved_runs()}  # as kept


def test_listing_runs_survives_another_sessions_save_in_progress(runs_folder: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A training saving its checkpoint writes into a hidden ``.saving-*`` folder and swaps it in: a listing at that
    moment must neither count that folder nor fail on a file that is gone by the time it is measured (the load
    test drew "[Errno 2] No such file or directory" on the runs page)."""
    newest = runs_folder / "numbers-en-de-20261122-111111-bbbb2222"
    before = {r.name: r.megabytes for r in runs.saved_runs()}
    staging = newest / ".saving-abc123"
    staging.mkdir()
    (staging / "model.safetensors").write_bytes(b"\0" * 2**21)  # 2 MB half-written: not part of the run
    assert {r.name: r.megabytes for r in runs.saved_runs()} == before
    real_getsize = os.path.getsize

    def vanished(path):  # another session's swap removed this file between the listing and the measuring
        if str(path).endswith("config.json"):
            raise FileNotFoundError(path)
        return real_getsize(path)

    monkeypatch.setattr(os.path, "getsize", vanished)
    assert [r.name for r in runs.saved_runs()] == ["numbers-en-de", "reverse"]
