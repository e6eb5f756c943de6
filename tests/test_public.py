"""Safe in front of an audience (issue 33): "Open a folder" reads nothing outside its allowed roots, and in public
mode (TRANSFORMER_APP_PUBLIC=1) there is no folder to open, no upload unless allowed, a run belongs to the session
that trained it, and trainings wait in a server-wide queue."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from app_helpers import assert_clean
from streamlit.testing.v1 import AppTest

from transformer.checkpoints.checkpoint import CheckpointError
from ui.models import menu, runs, training, training_job
from ui.state import owner, settings

APP = str(Path(__file__).resolve().parent.parent / "app.py")
TIMEOUT = 120
ALICE, BOB = "alice-token", "bob-token"


@pytest.fixture
def server(tiny_models_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The tiny models folder and an empty runs folder; no public mode, no extra roots."""
    runs_folder = tmp_path / "runs"
    runs_folder.mkdir()
    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(tiny_models_dir))
    monkeypatch.setenv(settings.RUNS_DIR_ENV, str(runs_folder))
    for name in (settings.PUBLIC_ENV, settings.PUBLIC_UPLOADS_ENV, settings.OPEN_ROOTS_ENV,
                 settings.MAX_TRAININGS_ENV, settings.RUNS_PER_SESSION_ENV):
        monkeypatch.delenv(name, raising=False)
    return runs_folder


def _run(runs_folder: Path, tiny_models_dir: Path, name: str, who: str | None, age_s: float = 10.0) -> Path:
    """A finished run in the runs folder, owned by ``who`` (a session token; None: a run from before)."""
    folder = runs_folder / name
    if who is not None:
        runs.claim_run(folder, who)
    shutil.copytree(tiny_models_dir / "tiny-reverse", folder, dirs_exist_ok=True)
    stamp = time.time() - age_s
    os.utime(folder / "model.safetensors", (stamp, stamp))
    return folder


def _errors(at: AppTest) -> list[str]:
    return [e.value for e in at.sidebar.error]


# --- "Open a folder" outside public mode: only under the allowed roots ------------------------------------------


def test_open_a_folder_reads_nothing_outside_the_allowed_roots(server: Path, tiny_models_dir: Path,
                                                               tmp_path: Path) -> None:
    elsewhere = shutil.copytree(tiny_models_dir / "tiny-reverse", tmp_path / "someone-elses-upload")
    (tiny_models_dir / "link-out").unlink(missing_ok=True)
    (tiny_models_dir / "link-out").symlink_to(elsewhere, target_is_directory=True)
    try:
        for typed in ("/etc/passwd", "/nonexistent/x", "/root/.ssh", "../../etc", "~root", "/proc/self",
                      str(elsewhere), "link-out", f"{tiny_models_dir}/../{tmp_path.name}", str(server.parent)):
            started = time.monotonic()
            with pytest.raises(CheckpointError) as caught:
                menu.open_folder(typed)
            assert time.monotonic() - started < 1.0  # refused at once, nothing loaded
            assert str(caught.value) == menu.NOT_OPENABLE  # "not there" and "not allowed" read the same
        assert "/" not in menu.NOT_OPENABLE  # no server path
    finally:
        (tiny_models_dir / "link-out").unlink()


def test_a_listed_root_opens_and_a_bad_folder_there_names_no_server_path(server: Path, tiny_models_dir: Path,
                                                                         tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    allowed = tmp_path / "allowed"
    shutil.copytree(tiny_models_dir / "tiny-reverse", allowed / "mine")
    (allowed / "empty").mkdir()
    monkeypatch.setenv(settings.OPEN_ROOTS_ENV, str(allowed))
    assert allowed.resolve() in settings.open_roots()
    with pytest.raises(CheckpointError, match="has no config.json") as caught:
        menu.open_folder(str(allowed / "empty"))
    assert str(allowed) in str(caught.value) and str(allowed.resolve()) not in str(caught.value).replace(
        str(allowed / "empty"), "")  # the path as typed, not the resolved one
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state[settings.MODEL] = "tiny-reverse"
    at.run()
    at.sidebar.text_input(key=settings.OPEN_WIDGET).set_value(str(allowed / "mine")).run()
    at.sidebar.button(key=settings.OPEN_BUTTON).click().run()
    assert_clean(at)
    assert at.session_state[settings.MODEL] == "mine (opened)"


# --- public mode: nothing of the server's disk, uploads only when allowed -------------------------------------


def test_public_mode_has_no_open_folder_and_no_upload(server: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(settings.PUBLIC_ENV, "1")
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state[settings.MODEL] = "tiny-reverse"
    at.run()
    assert_clean(at)
    assert not [w for w in at.sidebar.text_input if w.key == settings.OPEN_WIDGET]
    assert not at.sidebar.get("file_uploader")
    with pytest.raises(CheckpointError, match="off on this public server"):
        menu.open_folder("tiny-reverse")  # even a shipped model's folder, by its name
    at.switch_page("pages/10_training.py").run()
    assert_clean(at)
    assert at.radio(key="train_source").options == ["Built-in task"]  # no pairs upload either
    monkeypatch.setenv(settings.PUBLIC_UPLOADS_ENV, "1")  # allowed by the second setting: the (capped) uploader
    at.run()
    assert len(at.sidebar.get("file_uploader")) == 1
    assert len(at.radio(key="train_source").options) == 2
    assert not [w for w in at.sidebar.text_input if w.key == settings.OPEN_WIDGET]


# --- run names --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["evil\u202egnp.exe", "a\u200bb", "line\u2028break", "bell\x07", "del\x7f",
                                 "iso\u2066late"])
def test_run_names_refuse_control_direction_and_invisible_characters(bad: str) -> None:
    with pytest.raises(ValueError, match="control, direction or invisible"):
        runs.check_name(bad)
    assert runs.check_name(" Zürich → Genève ") == "Zürich → Genève"


# --- public mode: runs belong to their session -----------------------------------------------------------------


def test_a_run_is_its_owners_and_others_open_it_only_by_its_link(server: Path, tiny_models_dir: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(settings.PUBLIC_ENV, "1")
    folder = _run(server, tiny_models_dir, "reverse-20261122-101010-aaaa1111", ALICE)
    (kept,) = runs.saved_runs()
    assert kept.owner == ALICE and len(kept.link_id) >= 20 and kept.link_id not in kept.label
    assert runs.visible_runs(BOB, set()) == [] and runs.visible_runs(ALICE, set()) == [kept]
    for change in (lambda: runs.rename_run(folder, "mine now", owner=BOB), lambda: runs.delete_run(folder),
                   lambda: runs.delete_run(folder, owner=BOB), lambda: runs.rename_run(folder, "x")):
        with pytest.raises(ValueError, match="belongs to another session"):
            change()
    assert folder.is_dir() and runs.saved_runs()[0].name == "reverse"

    # Bob's session: the run is not in his menu, its guessable name opens nothing, its link id opens it read-only
    guessed = AppTest.from_file(APP, default_timeout=TIMEOUT)
    guessed.session_state[owner.OWNER] = BOB
    guessed.query_params["model"] = kept.label
    guessed.run()
    assert "reverse" not in guessed.sidebar.selectbox(key=settings.MODEL_WIDGET).options  # shown by name
    bob = AppTest.from_file(APP, default_timeout=TIMEOUT)
    bob.session_state[owner.OWNER] = BOB
    bob.query_params["model"] = menu.RUN_LINK + kept.link_id
    bob.switch_page("pages/10_training.py").run()
    assert_clean(bob)
    assert bob.session_state[settings.MODEL] == kept.label
    assert bob.text_input(key=f"runs_name_{folder.name}").disabled
    assert bob.button(key="runs_delete").disabled
    assert bob.query_params["model"] == menu.RUN_LINK + kept.link_id  # the link it shares is the unguessable one

    # Alice's session: hers to rename
    alice = AppTest.from_file(APP, default_timeout=TIMEOUT)
    alice.session_state[owner.OWNER] = ALICE
    alice.switch_page("pages/10_training.py").run()
    assert "reverse" in alice.sidebar.selectbox(key=settings.MODEL_WIDGET).options
    alice.text_input(key=f"runs_name_{folder.name}").set_value("alice's reverse").run()
    assert_clean(alice)
    assert runs.saved_runs()[0].name == "alice's reverse" and runs.saved_runs()[0].owner == ALICE


@pytest.mark.parametrize("public", [True, False])
def test_a_renamed_run_has_its_new_name_in_every_menu_at_once(server: Path, tiny_models_dir: Path,
                                                               monkeypatch: pytest.MonkeyPatch, public: bool) -> None:
    """Issue 45: in public mode the owner's menu kept a renamed run's old name (its session had registered the run
    under the name of the time), even after changing pages, and a browser opening its link saw a third name. The
    menu's value is the run id; the name shown is read from run.json on every run."""
    if public:
        monkeypatch.setenv(settings.PUBLIC_ENV, "1")
    folder = _run(server, tiny_models_dir, "reverse-20261122-101010-aaaa1111", ALICE)
    (kept,) = runs.saved_runs()
    alice = AppTest.from_file(APP, default_timeout=TIMEOUT)
    alice.session_state[owner.OWNER] = ALICE
    # as the sidebar registers a run this session trained (``register_trained_model``), and selects it
    alice.session_state[settings.SESSION_MODELS] = {kept.label: menu.ModelEntry(
        kept.label, f"folder:{folder}@{menu.folder_stamp(folder)}", "trained", folder)}
    alice.session_state[settings.MODEL] = kept.label
    alice.switch_page("pages/10_training.py").run()
    assert_clean(alice)
    alice.text_input(key=f"runs_name_{folder.name}").set_value("alice's reverse").run()
    assert_clean(alice)
    for page in ("pages/10_training.py", "pages/2_tokenization.py"):
        alice.switch_page(page).run()
        menu_shown = alice.sidebar.selectbox(key=settings.MODEL_WIDGET)
        assert "alice's reverse" in menu_shown.options and "reverse" not in menu_shown.options, page
        assert menu_shown.value == kept.label
    bob = AppTest.from_file(APP, default_timeout=TIMEOUT)
    bob.session_state[owner.OWNER] = BOB
    bob.query_params["model"] = alice.query_params["model"]  # the link Alice shares
    bob.run()
    assert_clean(bob)
    assert bob.sidebar.selectbox(key=settings.MODEL_WIDGET).options.count("alice's reverse") == 1
    assert bob.session_state[settings.MODEL] == kept.label


def test_public_mode_never_evicts_another_sessions_recent_run(server: Path, tiny_models_dir: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(settings.PUBLIC_ENV, "1")
    monkeypatch.setenv(settings.RUNS_PER_SESSION_ENV, "2")
    monkeypatch.setattr(runs, "MAX_RUNS", 4)
    alices = [_run(server, tiny_models_dir, f"reverse-20261122-1010{i}0-aaaa000{i}", ALICE, age_s=50 - i)
              for i in range(2)]
    # Bob's quota: his own oldest goes, never Alice's
    bobs = [_run(server, tiny_models_dir, f"copy-20261122-1111{i}0-bbbb000{i}", BOB, age_s=40 - i) for i in range(2)]
    assert runs.make_room(BOB) == [bobs[0]]
    assert all(f.is_dir() for f in alices)
    # the server full of Alice's recent work and one run of Bob: Bob's goes, then nothing of hers; then a refusal
    _run(server, tiny_models_dir, "reverse-20261122-101030-aaaa0003", ALICE, age_s=5)
    assert runs.make_room(BOB) == [bobs[1]]
    _run(server, tiny_models_dir, "reverse-20261122-101040-aaaa0004", ALICE, age_s=4)
    with pytest.raises(ValueError, match="other people's recent work"):
        runs.make_room("carol-token")
    assert len(runs.saved_runs()) == 4
    # an hour later Alice's oldest may go to make room
    assert runs.make_room("carol-token", now=time.time() + runs.OTHERS_KEPT_S) == [alices[0]]


def test_outside_public_mode_the_bound_is_kept_as_before(server: Path, tiny_models_dir: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runs, "MAX_RUNS", 1)
    old = _run(server, tiny_models_dir, "reverse-20261122-101010-aaaa1111", None, age_s=50)
    new = _run(server, tiny_models_dir, "reverse-20261122-101020-aaaa2222", None, age_s=5)
    assert runs.make_room(BOB) == [old] and new.is_dir()


# --- at most N trainings server-wide, the others wait in a queue ---------------------------------------------


def _endless(config, *, callback, stop_event):
    callback({"step": 1})
    stop_event.wait(30)
    return {"config": config}


def test_trainings_beyond_the_limit_wait_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(settings.MAX_TRAININGS_ENV, "1")
    first, second, third = (training_job.TrainingJob(i, train_fn=_endless).start() for i in range(3))
    try:
        deadline = time.monotonic() + 5
        while (first.status, second.queue_position, third.queue_position) != (training_job.RUNNING, 1, 2):
            assert time.monotonic() < deadline, (first.status, second.queue_position, third.queue_position)
            time.sleep(0.02)
        assert second.queued and second.running and second.elapsed == 0.0 and training_job.SLOTS.training() == 1
        third.stop()  # stopped while it waits: ends at once, nothing trained
        assert third.join(timeout=5) and third.status == training_job.STOPPED and third.result is None
        assert second.queue_position == 1
        first.stop()
        assert first.join(timeout=5)
        deadline = time.monotonic() + 5
        while second.status != training_job.RUNNING:
            assert time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        for job in (first, second, third):
            job.stop()
            job.join(timeout=5)


def test_the_training_page_shows_the_queue_position(server: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(settings.PUBLIC_ENV, "1")  # one training at a time
    holder = training_job.TrainingJob(0, train_fn=_endless).start()
    waiting = training_job.TrainingJob(training.make_config(max_seconds=3, task="copy"), train_fn=_endless).start()
    try:
        deadline = time.monotonic() + 5
        while waiting.queue_position != 1:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        at = AppTest.from_file(APP, default_timeout=TIMEOUT)
        at.session_state[training_job.JOB_KEY] = waiting
        at.switch_page("pages/10_training.py").run()
        assert_clean(at)
        assert any("number 1 in the queue" in p.proto.text for p in at.get("progress")), \
            [p.proto.text for p in at.get("progress")]
        assert at.button(key="train_start").disabled
        at.button(key="train_stop").click().run()
        assert waiting.join(timeout=5) and waiting.status == training_job.STOPPED
        at.run()
        assert_clean(at)
        assert any("Stopped before it started" in i.value for i in at.info)
    finally:
        for job in (holder, waiting):
            job.stop()
            job.join(timeout=5)


def test_every_setting_is_read_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(settings.PUBLIC_ENV, raising=False)
    monkeypatch.delenv(settings.MAX_TRAININGS_ENV, raising=False)
    assert not settings.public() and settings.uploads_allowed() and settings.max_trainings() == 2
    monkeypatch.setenv(settings.PUBLIC_ENV, "1")
    assert settings.public() and not settings.uploads_allowed() and settings.max_trainings() == 1
    assert settings.open_roots() == []
    monkeypatch.setenv(settings.MAX_TRAININGS_ENV, "3")
    assert settings.max_trainings() == 3
    state: dict = {}
    token = owner.session_id(state)
    assert len(token) >= 20 and owner.session_id(state) == token and owner.session_id({}) != token


def test_starting_a_run_in_public_mode_claims_it_and_keeps_the_quota(server: Path, tiny_models_dir: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(settings.PUBLIC_ENV, "1")
    monkeypatch.setenv(settings.RUNS_PER_SESSION_ENV, "1")
    mine = _run(server, tiny_models_dir, "reverse-20261122-101010-aaaa1111", ALICE)
    theirs = _run(server, tiny_models_dir, "reverse-20261122-101020-bbbb1111", BOB)
    started: list = []
    monkeypatch.setattr(training_job, "start_session_job", lambda config, name, then=(): started.append(config))

    def script() -> None:
        from ui.models import training
        from ui.state import owner

        owner.session_id()
        training.start_run(training.make_config(max_seconds=3, task="copy"))

    at = AppTest.from_function(script, default_timeout=TIMEOUT)
    at.session_state[owner.OWNER] = ALICE
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    (config,) = started
    claimed = runs._record(Path(config.out))
    assert claimed["owner"] == ALICE and len(claimed["link"]) >= 20
    assert not mine.exists() and theirs.is_dir()  # her quota of one: her old run made room, never Bob's


@pytest.mark.parametrize("both", [False, True])
def test_train_both_claims_both_runs_and_makes_room_for_two(server: Path, tiny_models_dir: Path,
                                                           monkeypatch: pytest.MonkeyPatch, both: bool) -> None:
    """"Train both" starts two runs: each is claimed, and her quota of two leaves none of her older runs."""
    monkeypatch.setenv(settings.PUBLIC_ENV, "1")
    monkeypatch.setenv(settings.RUNS_PER_SESSION_ENV, "2")
    mine = _run(server, tiny_models_dir, "reverse-20261122-101010-aaaa1111", ALICE)
    started: list = []
    monkeypatch.setattr(training_job, "start_session_job",
                        lambda config, name, then=(): started.extend([config, *(c for c, _ in then)]))

    def script() -> None:  # AppTest runs its source alone: ``both`` comes through the session state
        import streamlit as st

        from ui.models import training
        from ui.state import owner

        owner.session_id()
        training.start_run(training.make_config(max_seconds=3, task="copy"), with_twin=st.session_state["both"])

    at = AppTest.from_function(script, default_timeout=TIMEOUT)
    at.session_state[owner.OWNER] = ALICE
    at.session_state["both"] = both
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert [c.architecture for c in started] == ["encoder-decoder", "decoder"][: 1 + both]
    assert all(runs._record(Path(c.out))["owner"] == ALICE for c in started)
    assert mine.exists() != both  # one new run leaves her older one; two take her whole quota


@pytest.mark.parametrize(("public", "uploads"), [("", ""), ("1", ""), ("1", "1")])
def test_the_no_model_message_offers_only_what_this_server_allows(public: str, uploads: str, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(tmp_path / "empty"))
    monkeypatch.setenv(settings.PUBLIC_ENV, public)
    monkeypatch.setenv(settings.PUBLIC_UPLOADS_ENV, uploads)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not at.exception
    message = next(i.value for i in at.info if "No model is available" in i.value)
    assert "Training" in message
    assert ("open a folder" in message) == (not public)
    assert (str(tmp_path) in message) == (not public)  # public mode names no server path
    assert ("upload" in message) == (not public or bool(uploads))
