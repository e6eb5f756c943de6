"""How soon a thread waiting for the GIL gets it: the server's event loop among its visitors' script runs.

Streamlit runs each session's script in a thread of one process, and every thread runs Python under one lock, the
GIL. A thread waiting for it asks the holder to let go after ``sys.getswitchinterval()`` (5 ms by default), and
then any waiting thread may take it, not the one that asked. With 20 sessions' runs ready, the event loop (which
answers /_stcore/health and moves every websocket message) waited that long several times per request, behind
the runs. At 1 ms the load test's heartbeat improved (public mode, 20 sessions, 180 s, otherwise quiet machine:
max 1.62 → 1.20 s, p99 0.85 → 0.59 s, answers over 1 s 4 of 656 → 1 of 681; docs/benchmarks.md). The cost is more
hand-overs between threads that compute in Python; torch's kernels let go of the GIL anyway.

It is process-wide and set once (``app.py`` asks at every run; it acts only when the interval is longer), never
per call: it changes no result, only how the GIL is shared.
"""

from __future__ import annotations

import sys

SWITCH_INTERVAL_S = 0.001


def shorten_switch_interval() -> bool:
    """Set the interpreter's switch interval to ``SWITCH_INTERVAL_S`` if it is longer; True when it changed it."""
    if sys.getswitchinterval() <= SWITCH_INTERVAL_S:
        return False
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    return True
