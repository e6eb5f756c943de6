"""Long work that moves a progress bar on the page, computed once per server and shared by every browser.

``st.cache_resource`` records the elements a cached function draws and replays them on a hit, and it cannot
replay one drawn into a placeholder made outside the function (Streamlit raises ``CacheReplayClosureError``):
work that reports its progress as it goes cannot run inside it. ``shared`` keeps such results instead, as
``st.cache_resource`` would: per ``name`` a bounded store (the least recently used result leaves first), kept
for the server's life, its results never modified. One browser computes a result, with a progress bar; another
browser asking for the same key meanwhile waits for it (a spinner) rather than computing it twice. A run that
is stopped half-way (the user clicks elsewhere: Streamlit stops the script at the next bar update) keeps
nothing, and the next run starts again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import streamlit as st

from transformer.explain.progress import Progress

T = TypeVar("T")


@dataclass
class _Store:
    max_entries: int
    lock: threading.Lock = field(default_factory=threading.Lock)  # guards the two dicts below
    results: OrderedDict[Hashable, Any] = field(default_factory=OrderedDict)
    running: dict[Hashable, threading.Lock] = field(default_factory=dict)  # held by the browser computing a key

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
        running = store.running.setdefault(key, threading.Lock())
    if not running.acquire(blocking=False):
        with st.spinner(f"{label} another browser is computing the same; waiting for its result..."):
            running.acquire()
    try:
        found, value = store.get(key)  # computed while this run waited
        if found:
            return value
        bar = st.progress(0.0, text=label)
        value = work(lambda share, what: bar.progress(min(max(share, 0.0), 1.0), text=f"{label} {what}"))
        bar.empty()
        store.put(key, value)
        return value
    finally:
        with store.lock:
            if store.running.get(key) is running:
                del store.running[key]
        running.release()
