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
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import streamlit as st
from streamlit.runtime.scriptrunner import RerunException, StopException

from transformer.explain.progress import Progress

T = TypeVar("T")
POLL_S = 0.25  # how often a run waiting for another's work redraws its bar


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


@st.cache_resource(show_spinner=False)
def _store(name: str, max_entries: int) -> _Store:
    return _Store(max_entries)


def shared(name: str, key: Hashable, work: Callable[[Progress], T], *, label: str, max_entries: int = 16) -> T:
    """``work(progress)``'s result for ``key`` in the store ``name``: kept from an earlier run (any browser's),
    else computed now with a progress bar under ``label`` that ``progress(share, what)`` moves."""
    store = _store(name, max_entries)
    found, value = store.get(key)
    if found:
        return value
    with store.lock:
        running = store.running.setdefault(key, _Running())
    bar = None
    if not running.lock.acquire(blocking=False):  # another run computes it: follow its progress
        bar = st.progress(running.share, text=f"{label} {running.what}")
        while not running.lock.acquire(timeout=POLL_S):
            bar.progress(running.share, text=f"{label} {running.what}")  # clamped by _compute
    try:
        found, value = store.get(key)  # computed while this run waited
        if not found:
            value = _compute(store, key, running, work, bar or st.progress(0.0, text=label), label)
        elif bar is not None:
            bar.empty()
        return value
    finally:
        with store.lock:
            if store.running.get(key) is running:
                del store.running[key]
        running.lock.release()


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

    value = work(progress)
    store.put(key, value)
    if stopped:
        raise stopped[0]
    bar.empty()
    return value
