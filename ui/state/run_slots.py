"""How many script runs compute at once: the server's cores, not its visitors, set how many threads share the GIL.

Streamlit runs each session's script in its own thread of one process, and Python runs one thread at a time (the
GIL). With 20 sessions' runs ready at once, the thread that answers /_stcore/health and moves every websocket
message (the event loop) waits behind them each time it needs the GIL, several times per request: the load test's
heartbeat came back late (the CHANGELOG's 2026-11-26 benchmarks: 2 slots cut its p99 by a third). ``slot``
bounds the runs that compute at once to ``settings.run_slots()`` (the cores by default, at least 2); a run beyond
them waits on a semaphore, which holds no GIL, and starts when one ends. Work that waits long without computing here
gives its slot back meanwhile (``released``): a run following another's shared work or queued for the heavy-work
pool (ui/compute/shared_work.py), which the pool bounds on its own. Fragments (the Training page's live curves)
rerun without ``app.py`` and take no slot.

A run that stops (a click starts a new one, ``st.stop``) gives its slot back on the way out.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ui.state import settings

_SLOTS = threading.BoundedSemaphore(settings.run_slots())  # one per server process, sized at its start
_HELD = threading.local()  # whether this thread's script run holds a slot now


@contextmanager
def slot() -> Iterator[None]:
    """Hold a slot around a script run (``app.py``), waiting for one if all are taken."""
    _SLOTS.acquire()
    _HELD.slot = True
    try:
        yield
    finally:
        if getattr(_HELD, "slot", False):
            _HELD.slot = False
            _SLOTS.release()


@contextmanager
def released() -> Iterator[None]:
    """Give this run's slot back around waiting that computes nothing here (another run's work, a queue), and
    take one again after; nothing outside a slot."""
    if not getattr(_HELD, "slot", False):
        yield
        return
    _HELD.slot = False
    _SLOTS.release()
    try:
        yield
    finally:
        _SLOTS.acquire()
        _HELD.slot = True
