"""ui.compute.shared_work: a result computed once per key (whichever browser asks first), kept in a bounded
store, nothing kept from work that failed or was stopped, and a second asker waiting for the first."""

from __future__ import annotations

import itertools
import threading

import pytest

from ui.compute.shared_work import shared

_names = itertools.count()


def fresh_store() -> str:
    """A store name no other test uses (the stores live for the process, as on a server)."""
    return f"test-store-{next(_names)}"


def test_a_result_is_computed_once_and_the_least_recently_used_leaves_first() -> None:
    name, calls = fresh_store(), []

    def work(key: str):
        def run(progress):
            progress(0.5, "half")
            calls.append(key)
            return [key]
        return run

    first = shared(name, "a", work("a"), label="L", max_entries=2)
    assert shared(name, "a", work("a"), label="L", max_entries=2) is first and calls == ["a"]
    shared(name, "b", work("b"), label="L", max_entries=2)
    shared(name, "a", work("a"), label="L", max_entries=2)  # "a" used again: "b" is now the oldest
    shared(name, "c", work("c"), label="L", max_entries=2)  # a third key: "b" leaves
    assert calls == ["a", "b", "c"]
    shared(name, "a", work("a"), label="L", max_entries=2)
    shared(name, "b", work("b"), label="L", max_entries=2)
    assert calls == ["a", "b", "c", "b"]


def test_work_that_fails_keeps_nothing_and_the_next_run_starts_again() -> None:
    name = fresh_store()

    def broken(progress):
        raise RuntimeError("stopped half-way")

    with pytest.raises(RuntimeError, match="half-way"):
        shared(name, "k", broken, label="L")
    assert shared(name, "k", lambda progress: 42, label="L") == 42  # not blocked by the failed run


def test_a_second_asker_waits_for_the_first_and_follows_its_progress(monkeypatch) -> None:
    """Not computed twice: the second run waits for the first's result, its own bar showing the running work's
    progress."""
    from app_helpers import RecordedBars

    from ui.compute import shared_work

    bars = RecordedBars()
    monkeypatch.setattr(shared_work, "st", bars)
    monkeypatch.setattr(shared_work, "POLL_S", 0.01)
    name, halfway, release, calls = fresh_store(), threading.Event(), threading.Event(), []

    def slow(progress):
        calls.append("computed")
        progress(0.5, "half")
        halfway.set()
        assert release.wait(10)
        return object()

    results: list = []
    first = threading.Thread(target=lambda: results.append(shared(name, "k", slow, label="L")))
    first.start()
    assert halfway.wait(10)
    second = threading.Thread(target=lambda: results.append(shared(name, "k", slow, label="L")))
    second.start()
    second.join(0.3)
    assert second.is_alive(), "the second asker waits while the first computes"
    assert bars.told.count((0.5, "L half")) >= 2  # the first's bar, then the waiting run's, following it
    release.set()
    first.join(10)
    second.join(10)
    assert calls == ["computed"] and len(results) == 2 and results[0] is results[1]


class InterruptedBar:
    """Stands in for streamlit in shared_work: the bar's first update raises what Streamlit raises there when
    the user changes a widget (RerunException) or presses Stop (StopException)."""

    def __init__(self, error: BaseException) -> None:
        self.error, self.updates = error, 0

    def progress(self, value: float, text: str = "") -> InterruptedBar:
        if text != "L":  # the bar's first drawing passes; its first update is interrupted
            self.updates += 1
            if self.updates == 1:
                raise self.error
        return self

    def empty(self) -> None:
        pass


@pytest.mark.parametrize("interruption", ["rerun", "stop"])
def test_a_click_meanwhile_lets_the_work_finish_and_keep_its_result(monkeypatch, interruption: str) -> None:
    """Streamlit stops a run at a bar update when the user clicks (fast reruns: a StopException, the new run
    already started) or asks for a rerun: the work goes on without the bar, its result is kept, then the run
    stops as asked."""
    from streamlit.runtime.scriptrunner import RerunException, StopException

    from ui.compute import shared_work

    name, steps = fresh_store(), []

    def work(progress):
        for i in range(3):
            progress(i / 3, f"step {i}")
            steps.append(i)
        return "result"

    error = RerunException(None) if interruption == "rerun" else StopException()
    monkeypatch.setattr(shared_work, "st", InterruptedBar(error))
    with pytest.raises(type(error)):  # the run stops as asked, after the work
        shared(name, "k", work, label="L")
    assert steps == [0, 1, 2]
    assert shared(name, "k", work, label="L") == "result" and steps == [0, 1, 2]  # the next run finds it kept


# --- public mode: a bounded pool, one computation per session ------------------------------------------------


def _pool_setup(monkeypatch, workers: str):
    """shared_work with recorded bars, each thread a session named by its thread's name, a pool of ``workers``."""
    from app_helpers import RecordedBars

    from ui.compute import pool, shared_work
    from ui.state import owner, settings

    bars = RecordedBars()
    monkeypatch.setattr(shared_work, "st", bars)
    monkeypatch.setattr(shared_work, "POLL_S", 0.01)
    monkeypatch.setattr(pool, "POLL_S", 0.01)
    monkeypatch.setattr(owner, "session_id", lambda state=None: threading.current_thread().name.split("/")[0])
    monkeypatch.setenv(settings.PUBLIC_ENV, "1")
    monkeypatch.setenv(settings.HEAVY_WORKERS_ENV, workers)
    return bars


def _blocking(started: threading.Event, release: threading.Event, calls: list, tag: str):
    def work(progress):
        calls.append(tag)
        started.set()
        assert release.wait(10)
        return tag
    return work


def test_public_mode_computes_at_most_the_pools_size_at_once(monkeypatch) -> None:
    from ui.compute.shared_work import POOL

    bars = _pool_setup(monkeypatch, "1")
    name, calls, results = fresh_store(), [], []
    a_started, b_started, release = threading.Event(), threading.Event(), threading.Event()
    a = threading.Thread(name="alice", target=lambda: results.append(
        shared(name, "a", _blocking(a_started, release, calls, "a"), label="L")))
    b = threading.Thread(name="bob", target=lambda: results.append(
        shared(name, "b", _blocking(b_started, release, calls, "b"), label="L")))
    a.start()
    assert a_started.wait(10)
    b.start()
    assert not b_started.wait(0.3), "bob's work waits while alice's runs"
    assert POOL.running() == 1 and any("number 1 in the queue" in text for _, text in bars.told)
    release.set()
    a.join(10)
    b.join(10)
    assert calls == ["a", "b"] and sorted(results) == ["a", "b"] and POOL.running() == 0


def test_public_mode_runs_one_computation_per_session(monkeypatch) -> None:
    from ui.compute.shared_work import POOL

    _pool_setup(monkeypatch, "2")
    name, calls = fresh_store(), []
    first, second, other, release = threading.Event(), threading.Event(), threading.Event(), threading.Event()
    threads = [threading.Thread(name="alice/1", target=lambda: shared(name, "a1", _blocking(first, release, calls,
                                                                                           "a1"), label="L")),
               threading.Thread(name="alice/2", target=lambda: shared(name, "a2", _blocking(second, release, calls,
                                                                                           "a2"), label="L")),
               threading.Thread(name="bob", target=lambda: shared(name, "b", _blocking(other, release, calls, "b"),
                                                                 label="L"))]
    threads[0].start()
    assert first.wait(10)
    threads[1].start()
    threads[2].start()
    assert other.wait(10), "another session gets the pool's second place"
    assert not second.is_set(), "alice's second computation waits for her first"
    release.set()
    for thread in threads:
        thread.join(10)
    assert sorted(calls) == ["a1", "a2", "b"] and calls[-1] == "a2" and POOL.running() == 0


def test_outside_public_mode_there_is_no_pool(monkeypatch) -> None:
    from ui.state import settings

    monkeypatch.delenv(settings.PUBLIC_ENV, raising=False)
    monkeypatch.delenv(settings.HEAVY_WORKERS_ENV, raising=False)
    assert settings.heavy_workers() == 0


# --- the time budget ------------------------------------------------------------------------------------------


def test_a_deadline_progress_raises_once_told_past_its_time() -> None:
    from transformer.explain.progress import OutOfTime, with_deadline

    now, told = [0.0], []
    progress = with_deadline(lambda share, what: told.append(share), 10, clock=lambda: now[0])
    progress(0.1, "a")
    now[0] = 10.0
    progress(0.2, "b")  # at the deadline, not past it
    now[0] = 10.5
    with pytest.raises(OutOfTime, match="cut after 10 s"):
        progress(0.3, "c")
    assert told == [0.1, 0.2]
    unbounded = with_deadline(None, 0, clock=lambda: now[0])
    now[0] = 1e9
    unbounded(0.5, "x")  # 0: no limit, and no progress to tell



def test_work_past_the_time_budget_is_cut_with_a_message_and_the_cut_is_kept(monkeypatch) -> None:
    """The work stops at its first step past ``settings.heavy_seconds()``; the page gets a warning and stops, and a
    second ask for the same key gets the message at once, not another run of the work."""
    import time

    from app_helpers import StoppedRun, WarnedBars

    from ui.compute import shared_work

    bars = WarnedBars()
    monkeypatch.setattr(shared_work, "st", bars)
    monkeypatch.setattr(shared_work.settings, "heavy_seconds", lambda: 0.05)
    name, steps = fresh_store(), []

    def endless(progress):
        for i in range(1000):
            steps.append(i)
            progress(i / 1000, f"step {i}")
            time.sleep(0.005)
        return "finished"

    started = time.monotonic()
    with pytest.raises(StoppedRun):
        shared(name, "k", endless, label="Measuring:")
    assert time.monotonic() - started < 2 and len(steps) < 500
    assert len(bars.warned) == 1 and bars.warned[0].startswith("Measuring: cut after 0 s, the time one computation")
    assert bars.warned[0].endswith("Try fewer sentences, or a smaller model.")
    ran = len(steps)
    with pytest.raises(StoppedRun):
        shared(name, "k", endless, label="Measuring:")
    assert len(steps) == ran and len(bars.warned) == 2  # the cut was kept: no second run of the work
