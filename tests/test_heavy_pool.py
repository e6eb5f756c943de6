"""The heavy-work pool of public mode (ui/compute/pool.py) serves sessions fairly, and every costly request has its
time budget (issue 43, item 4). No measured seconds: jobs are threads that hold the pool until an event, the pool's
clock is a fake one where waits are aged, and budgets are tiny."""

from __future__ import annotations

import itertools
import threading
import time
import types

import pytest
import torch
from app_helpers import StoppedRun

from ui.compute import explain, pool, shared_work
from ui.state import settings

_keys = itertools.count()


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def heavy(monkeypatch):
    """A fresh pool of one worker (public mode), 10 s a job, a fake clock, and fast polling."""
    clock = FakeClock()
    fresh = pool.HeavyPool(clock)
    monkeypatch.setattr(pool, "POLL_S", 0.01)
    monkeypatch.setattr(pool, "POOL", fresh)
    monkeypatch.setattr(shared_work, "POOL", fresh)
    monkeypatch.setenv(settings.PUBLIC_ENV, "1")
    monkeypatch.setenv(settings.HEAVY_WORKERS_ENV, "1")
    monkeypatch.setenv(settings.HEAVY_SECONDS_ENV, "10")
    monkeypatch.delenv(settings.HEAVY_WAIT_ENV, raising=False)
    return fresh, clock


def test_the_wait_budget_is_three_time_budgets_unless_set(monkeypatch) -> None:
    for name in (settings.HEAVY_SECONDS_ENV, settings.HEAVY_WAIT_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(settings.PUBLIC_ENV, "1")
    assert settings.heavy_seconds() == 180 and settings.heavy_wait_seconds() == 540
    monkeypatch.setenv(settings.HEAVY_WAIT_ENV, "60")
    assert settings.heavy_wait_seconds() == 60
    monkeypatch.delenv(settings.HEAVY_WAIT_ENV)
    monkeypatch.delenv(settings.PUBLIC_ENV)
    assert settings.heavy_wait_seconds() == 0  # outside public mode: no time budget, so no bound on the wait
    assert pool.wait_bound(0, 1, 1, 0) == float("inf") and pool.wait_bound(0, 0, 1, 0) == 0.0
    assert pool.wait_bound(3, 2, 2, 10) == 20.0  # both workers busy, 3 ahead: the 4th job starts after 2 holds


class Session:
    """One session's request in its own thread: it waits for the pool, records what it is told, holds the worker
    until ``done`` is set."""

    def __init__(self, heavy: pool.HeavyPool, name: str, order: list[str], stop_on_place: bool = False) -> None:
        self.pool, self.name, self.order = heavy, name, order
        self.told: list[tuple[int, float]] = []
        self.started, self.done = threading.Event(), threading.Event()
        self.error: BaseException | None = None
        self.stop_on_place = stop_on_place
        self.thread = threading.Thread(target=self._run)

    def _waiting(self, place: int, bound: float) -> None:
        self.told.append((place, bound))
        if self.stop_on_place:
            raise StoppedRun  # what Streamlit raises at a bar update once the user clicked

    def _run(self) -> None:
        try:
            self.pool.acquire(self.name, self._waiting)
        except BaseException as error:  # noqa: BLE001  (recorded for the test)
            self.error = error
            return
        self.order.append(self.name)
        self.started.set()
        assert self.done.wait(10)
        self.pool.release(self.name)

    def start(self) -> Session:
        self.thread.start()
        return self

    def told_place(self) -> bool:
        deadline = time.monotonic() + 10
        while not self.told and self.error is None and time.monotonic() < deadline:
            time.sleep(0.005)
        return bool(self.told)



def wait_until(condition, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.005)
    return condition()


def queue(heavy: pool.HeavyPool, order: list[str], *waiting: str) -> list[Session]:
    """alice holding the worker, then each of ``waiting`` in line behind her (each told its place), in order."""
    alice = Session(heavy, "alice", order).start()
    assert alice.started.wait(10)
    sessions = [alice]
    for name in waiting:
        sessions.append(Session(heavy, name, order).start())
        assert sessions[-1].told_place(), name
    return sessions


def test_a_waiting_session_is_told_its_place_and_the_most_it_may_wait(heavy) -> None:
    fresh, _ = heavy
    order: list[str] = []
    alice, bob, carol = queue(fresh, order, "bob", "carol")
    assert bob.told[-1] == (1, 10.0) and carol.told[-1] == (2, 20.0)  # one worker, 10 s a job: 1 and 2 holds
    for session in (alice, bob, carol):
        session.done.set()
    for session in (alice, bob, carol):
        session.thread.join(10)
    assert order == ["alice", "bob", "carol"] and fresh.running() == 0


def test_a_session_whose_wait_would_pass_the_budget_is_refused_at_once(heavy, monkeypatch) -> None:
    """Three holds at most by default (``heavy_wait_seconds``: 3 x 10 s): alice runs, bob and carol wait one and two
    holds, dave would wait three and still gets in; erin would wait four: refused at once, with a message."""
    fresh, _ = heavy
    order: list[str] = []
    alice, *waiting = queue(fresh, order, "bob", "carol", "dave")
    with pytest.raises(pool.PoolBusy, match="could wait up to 40 s, more than the 30 s a wait may take here. Try "
                                            "again in a few minutes"):
        fresh.acquire("erin", lambda place, bound: None)
    assert fresh.waiting() == ["bob", "carol", "dave"]
    for session in (alice, *waiting):
        session.done.set()
    for session in (alice, *waiting):
        session.thread.join(10)
    assert order == ["alice", "bob", "carol", "dave"]


def test_a_session_that_waits_past_the_budget_gives_up_with_a_message(heavy) -> None:
    """A job ahead overran its budget between two checks: the waiting session is told to try later, not left
    waiting (the fake clock passes the 30 s of waiting)."""
    fresh, clock = heavy
    order: list[str] = []
    alice, bob = queue(fresh, order, "bob")
    clock.now += 31
    bob.thread.join(10)
    assert isinstance(bob.error, pool.PoolBusy) and "no worker came free within 30 s" in str(bob.error)
    assert fresh.waiting() == [] and order == ["alice"]
    alice.done.set()
    alice.thread.join(10)


def test_one_place_per_session_a_newer_request_takes_its_earlier_ones(heavy) -> None:
    """Bob asks again while he waits (his input changed: a newer script run): the newer request takes his place,
    ahead of carol, and the earlier one leaves (a stale run, stopped quietly)."""
    fresh, _ = heavy
    order: list[str] = []
    alice, bob, carol = queue(fresh, order, "bob", "carol")
    bob_again = Session(fresh, "bob", order).start()
    assert bob_again.told_place()
    bob.thread.join(10)
    assert isinstance(bob.error, pool.Superseded)
    assert fresh.waiting() == ["bob", "carol"] and bob_again.told[-1][0] == 1
    for session in (alice, bob_again, carol):
        session.done.set()
    for session in (alice, bob_again, carol):
        session.thread.join(10)
    assert order == ["alice", "bob", "carol"]


def test_a_run_stopped_while_waiting_keeps_its_place_for_its_sessions_next_run(heavy, monkeypatch) -> None:
    """A click stops bob's waiting run at its bar's update: his place stays his for ``GRACE_S``, the rerun takes it
    (ahead of carol, who came later); a place nobody comes back to goes after ``GRACE_S``."""
    fresh, clock = heavy
    order: list[str] = []
    alice = Session(fresh, "alice", order).start()
    assert alice.started.wait(10)
    bob = Session(fresh, "bob", order, stop_on_place=True).start()
    bob.thread.join(10)
    assert isinstance(bob.error, StoppedRun)
    carol = Session(fresh, "carol", order).start()
    assert carol.told_place() and carol.told[-1][0] == 2  # behind bob's kept place
    bob_rerun = Session(fresh, "bob", order).start()
    assert bob_rerun.told_place() and bob_rerun.told[-1][0] == 1
    dave = Session(fresh, "dave", order, stop_on_place=True).start()  # stops waiting and never comes back
    dave.thread.join(10)
    assert fresh.waiting() == ["bob", "carol", "dave"]
    clock.now += pool.GRACE_S + 1
    assert fresh.waiting() == ["bob", "carol"]
    for session in (alice, bob_rerun, carol):
        session.done.set()
    for session in (alice, bob_rerun, carol):
        session.thread.join(10)
    assert order == ["alice", "bob", "carol"] and fresh.running() == 0


def test_a_refused_computation_says_so_and_is_not_kept(heavy, monkeypatch) -> None:
    """``shared`` with the pool full: a warning that says to try later, the page stopped, nothing kept (the same work
    asked once there is room runs)."""
    from app_helpers import WarnedBars

    fresh, _ = heavy

    bars = WarnedBars()
    monkeypatch.setattr(shared_work, "st", bars)
    monkeypatch.setenv(settings.HEAVY_WAIT_ENV, "5")  # less than one 10 s hold: no place in line while one runs
    monkeypatch.setattr("ui.state.owner.session_id", lambda state=None: "visitor")
    order: list[str] = []
    alice = Session(fresh, "alice", order).start()
    assert alice.started.wait(10)
    name = f"refused-{next(_keys)}"
    with pytest.raises(StoppedRun):
        shared_work.shared(name, "k", lambda progress: "done", label="Measuring:")
    assert bars.warned == ["Measuring: not started: the server is busy with other visitors' heavy work (0 waiting, "
                           "1 running), and a place in line now could wait up to 10 s, more than the 5 s a wait may "
                           "take here. Try again in a few minutes."]
    alice.done.set()
    alice.thread.join(10)
    assert shared_work.shared(name, "k", lambda progress: "done", label="Measuring:") == "done"


# --- the Explain page's costly methods: in the pool, under the time budget ---------------------------------------


def _fake_attribute(steps: list[int]):
    """A slow costly method that honours ``progress`` as the real ones do: told before each of 1000 steps."""

    def attribute(model, src, tgt, method, *, progress=None, **options):
        for i in range(1000):
            if progress is not None:
                progress(i / 1000, f"step {i}")
            steps.append(i)
            time.sleep(0.002)
        return types.SimpleNamespace(source=torch.zeros(1, 1, 2), target=None, delta=None)

    return attribute


@pytest.mark.parametrize("large", [True, False])
def test_the_explain_pages_costly_methods_are_cut_at_the_time_budget(monkeypatch, large: bool) -> None:
    """"Compute gradient methods" on a large model ran past 555 s with 180 s allowed: now integrated gradients past
    the budget stops at its next step and the page gets its message in place of the map, on a large model (shared
    work, in the pool) as on a small one (cached)."""
    from app_helpers import RecordedBars

    steps: list[int] = []
    monkeypatch.setattr(shared_work, "st", RecordedBars())
    monkeypatch.setattr(explain, "attribute", _fake_attribute(steps))
    monkeypatch.setattr(explain, "is_large", lambda pipeline: large)
    monkeypatch.setattr(explain, "explained_ids", lambda analysis, pad_id=None: (torch.zeros(1, 2), torch.zeros(1, 2)))
    monkeypatch.setattr(settings, "heavy_seconds", lambda: 0.05)
    monkeypatch.setenv(settings.PUBLIC_ENV, "1")
    monkeypatch.setattr("ui.state.owner.session_id", lambda state=None: "visitor")
    pipeline = types.SimpleNamespace(device="cpu", model=None, config=types.SimpleNamespace(pad_id=0))
    key = f"budget-test-{next(_keys)}"  # a model key no other test caches
    found = explain.method_maps(key, "cpu", "abc", "integrated_gradients", "zero", pipeline, None)
    assert isinstance(found, str) and found.startswith("cut after 0 s, the time one computation may take"), found
    assert found.endswith(explain.CUT_ADVICE) and len(steps) < 1000
    ran = len(steps)
    again = explain.method_maps(key, "cpu", "abc", "integrated_gradients", "zero", pipeline, None)
    assert again == found and len(steps) == ran  # the cut is kept: asked again, the message at once


def test_the_explain_pages_costly_methods_on_a_large_model_hold_a_pool_place(heavy, monkeypatch) -> None:
    """Integrated gradients at opus-mt size runs holding a place in the pool, its bar saying so; attention does
    not."""
    from app_helpers import RecordedBars

    fresh, _ = heavy
    held = {}

    def attribute(model, src, tgt, method, *, progress=None, **options):
        held[method] = fresh.running()
        return types.SimpleNamespace(source=torch.zeros(1, 1, 2), target=None, delta=None)

    monkeypatch.setattr(shared_work, "st", RecordedBars())
    monkeypatch.setattr(explain, "attribute", attribute)
    monkeypatch.setattr(explain, "is_large", lambda pipeline: True)
    monkeypatch.setattr(explain, "explained_ids", lambda analysis, pad_id=None: (torch.zeros(1, 2), torch.zeros(1, 2)))
    monkeypatch.setattr("ui.state.owner.session_id", lambda state=None: "visitor")
    pipeline = types.SimpleNamespace(device="cpu", model=None, config=types.SimpleNamespace(pad_id=0))
    key = f"pool-test-{next(_keys)}"
    for method in ("integrated_gradients", "attention"):
        found = explain.method_maps(key, "cpu", "abc", method, "zero" if method == "integrated_gradients" else "",
                                    pipeline, None)
        assert not isinstance(found, str)
    assert held == {"integrated_gradients": 1, "attention": 0} and fresh.running() == 0


def test_activation_patching_is_cut_at_the_time_budget(monkeypatch) -> None:
    """The Patching page's work was cached without a budget (thousands of forwards at the largest sizes): now it
    stops at its next forward past the budget, and the page says so instead of drawing it."""
    from app_helpers import WarnedBars

    from ui.compute import patching

    steps: list[int] = []

    def activation_patching(model, clean, corrupt, tgt, position, *, progress=None, **options):
        for i in range(1000):
            if progress is not None:
                progress(i / 1000, f"sites {i}")
            steps.append(i)
            time.sleep(0.002)

    bars = WarnedBars()
    monkeypatch.setattr(shared_work, "st", bars)
    monkeypatch.setattr(patching.explain, "activation_patching", activation_patching)
    monkeypatch.setattr(patching, "explained_ids", lambda analysis: (torch.zeros(1, 2), torch.zeros(1, 2)))
    monkeypatch.setattr(settings, "heavy_seconds", lambda: 0.05)
    pipeline = types.SimpleNamespace(device="cpu", model=None, encode_source=lambda text, warn: torch.zeros(1, 2))
    clean = types.SimpleNamespace(text=f"clean-{next(_keys)}")
    with pytest.raises(StoppedRun):
        patching.patching("tiny", "cpu", pipeline, clean, "corrupt", 0)
    assert len(steps) < 1000 and len(bars.warned) == 1
    assert bars.warned[0].startswith("Patching every activation: cut after 0 s, the time one computation may take")
    assert bars.warned[0].endswith("Try a shorter input, or a smaller model.")
