"""Long work that moves a progress bar on the page, computed once per server and shared by every browser.

``st.cache_resource`` records the elements a cached function draws and replays them on a hit, and it cannot
replay one drawn into a placeholder made outside the function (Streamlit raises ``CacheReplayClosureError``):
work that reports its progress as it goes cannot run inside it. ``shared`` keeps such results instead, as
``st.cache_resource`` would: per ``name`` a bounded store (the least recently used result leaves first), kept
for the server's life, its results never modified. One script run computes a result, with a progress bar;
another asking for the same key meanwhile (another browser, or this one after a click) waits for it, its own bar
following the running work's, rather than computing it twice.

Streamlit (``runner.fastReruns``, the default) answers a click during a run by stopping that run at its next
element call and starting a new run at once. A bar update is such a call: rather than lose the work, the stopped
run finishes it without the bar, keeps the result and only then stops; the new run meanwhile shows the work's
progress and takes the result. (So does the Stop button: the work finishes, as it did inside st.cache_resource.)

In public mode (or with $TRANSFORMER_APP_HEAVY_WORKERS) the computing runs go through the heavy-work pool
(``ui/compute/pool.py``): at most ``settings.heavy_workers()`` computations at once server-wide and one per session,
one place in line per session; the others wait in order, their bar saying their place in the queue and the most it
may wait, and a session whose wait would pass ``settings.heavy_wait_seconds()`` is told to try later instead (not
kept: asking again later may find room). A visitor cannot stack work (a click during work starts no second one) nor
hold the server's cores from several sessions beyond the pool's size.

Each computation is also bounded by time (``settings.heavy_seconds()``: 180 s in public mode, none outside it
unless set): a step told after that raises ``OutOfTime`` (``transformer/explain/progress.py``), and the page says
the work was cut ("cut after 180 s ...; try fewer sentences") instead of drawing it. The cut is kept as the key's
result, so a rerun asking for the same work gets the message at once rather than spending the time again.
``shared`` stops the page after the message; ``shared_or_cut`` returns the ``Cut`` for a page that goes on without
that one result (the Explain page's costly methods on a large model, each a method of its own).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import streamlit as st
from streamlit.runtime.scriptrunner import RerunException, StopException

from transformer.explain.progress import OutOfTime, Progress, with_deadline
from ui.compute.pool import POOL, PoolBusy, wait_in_words
from ui.state import run_slots, settings

T = TypeVar("T")
POLL_S = 0.25  # how often a run waiting for another's work redraws its bar
ADVICE = "Try fewer sentences, or a smaller model."  # what ``shared`` adds to a cut's message, unless told another


@dataclass(frozen=True)
class Cut:
    """Work that did not run to the end: cut by the time budget (``kept``: the key's result from then on) or refused
    by the pool before it started (not kept). ``message`` is what the page says instead of drawing it."""

    message: str
    kept: bool = True


@dataclass
class _Running:
    """One key's work in progress: held by the run computing it, with how far it is."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    share: float = 0.0
    what: str = ""


@dataclass
class _Store:
    max_entries: int
    lock: threading.Lock = field(default_factory=threading.Lock)  # guards the two dicts below
    results: OrderedDict[Hashable, Any] = field(default_factory=OrderedDict)
    running: dict[Hashable, _Running] = field(default_factory=dict)

    def get(self, key: Hashable) -> tuple[bool, Any]:
        with self.lock:
            if key not in self.results:
                return False, None
            self.results.move_to_end(key)
            return True, self.results[key]

    def put(self, key: Hashable, value: Any) -> None:
        with self.lock:
            self.results[key] = value
            while len(self.results) > self.max_entries:
                self.results.popitem(last=False)


_HELD = threading.local()  # whether this thread's script run holds a place in POOL


@st.cache_resource(show_spinner=False)
def _store(name: str, max_entries: int) -> _Store:
    return _Store(max_entries)


def shared(name: str, key: Hashable, work: Callable[[Progress], T], *, label: str, max_entries: int = 16,
           advice: str = ADVICE) -> T:
    """``work(progress)``'s result for ``key`` in the store ``name``: kept from an earlier run (any browser's),
    else computed now with a progress bar under ``label`` that ``progress(share, what)`` moves. Work cut by the time
    budget (a ``Cut``, now or kept from before; ``advice`` follows its message) or refused by a full pool stops the
    page after a warning saying so."""
    return _unless_cut(shared_or_cut(name, key, work, label=label, max_entries=max_entries), label, advice)


def shared_or_cut(name: str, key: Hashable, work: Callable[[Progress], T], *, label: str, max_entries: int = 16
                  ) -> T | Cut:
    """``shared``, but a cut or refused computation comes back as its ``Cut`` and the page goes on."""
    store = _store(name, max_entries)
    found, value = store.get(key)
    if found:
        return value
    with store.lock:
        running = store.running.setdefault(key, _Running())
    bar = None
    if not running.lock.acquire(blocking=False):  # another run computes it: follow its progress
        bar = st.progress(running.share, text=f"{label} {running.what}")
        with run_slots.released():  # computing nothing here: another run's slot is the one that works
            while not running.lock.acquire(timeout=POLL_S):
                bar.progress(running.share, text=f"{label} {running.what}")  # clamped by _compute
    try:
        found, value = store.get(key)  # computed while this run waited
        if not found:
            bar = bar or st.progress(0.0, text=label)
            if settings.heavy_workers():
                value = _pooled(store, key, running, work, bar, label)
            else:
                value = _compute(store, key, running, work, bar, label)
        elif bar is not None:
            bar.empty()
    finally:
        with store.lock:
            if store.running.get(key) is running:
                del store.running[key]
        running.lock.release()
    return value


def _unless_cut(value: T | Cut, label: str, advice: str) -> T:
    """``value``, or for a ``Cut`` a warning and the page's stop (nothing below it is drawn)."""
    if isinstance(value, Cut):
        st.warning(f"{label} {value.message}." + (f" {advice}" if value.kept else ""))
        st.stop()
    return value


def _pooled(store: _Store, key: Hashable, running: _Running, work: Callable[[Progress], T], bar: Any,
            label: str) -> T | Cut:
    """``_compute`` once the pool gives this session a place; the bar (and those following it) says the place in
    the queue meanwhile. A refusal by the pool (``PoolBusy``) is a ``Cut`` that is not kept."""
    from ui.state.owner import session_id  # imported here: only public mode needs a session's id

    if getattr(_HELD, "place", False):  # work that asks for other shared work: it already holds its place
        return _compute(store, key, running, work, bar, label)
    session = session_id()

    def waiting(place: int, bound_s: float) -> None:
        most = "" if bound_s == float("inf") else f", at most {wait_in_words(bound_s)}"
        running.what = f"(waiting for a free worker: number {place} in the queue{most})"
        bar.progress(0.0, text=f"{label} {running.what}")

    with run_slots.released():  # the pool bounds this work on its own; the slot serves the light runs meanwhile
        try:
            POOL.acquire(session, waiting)
        except PoolBusy as busy:
            bar.empty()
            return Cut(str(busy), kept=False)
        _HELD.place = True
        try:
            running.what = ""
            return _compute(store, key, running, work, bar, label)
        finally:
            _HELD.place = False
            POOL.release(session)


def _compute(store: _Store, key: Hashable, running: _Running, work: Callable[[Progress], T], bar: Any,
             label: str) -> T:
    """Run ``work`` moving ``bar`` (and ``running``'s record, which waiting runs follow), and keep its result;
    a stop or rerun raised by a bar update waits until the result is kept (module docstring)."""
    stopped: list[BaseException] = []

    def progress(share: float, what: str) -> None:
        running.share, running.what = min(max(share, 0.0), 1.0), what
        if not stopped:
            try:
                bar.progress(running.share, text=f"{label} {what}")
            except (StopException, RerunException) as stop:
                stopped.append(stop)

    try:
        value: Any = work(with_deadline(progress, settings.heavy_seconds()))
    except OutOfTime as cut:
        value = Cut(str(cut))  # kept: the same work asked again is cut again
    store.put(key, value)
    if stopped:
        raise stopped[0]
    bar.empty()
    return value
