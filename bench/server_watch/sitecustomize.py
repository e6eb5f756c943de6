"""Where the app's server is when it answers late: a watcher that Python loads into the server at start-up
(this folder on ``PYTHONPATH``, as ``bench_load.py --watch FILE`` puts it). Inert in every other process and
whenever ``SERVER_WATCH_LOG`` is unset; a measuring instrument for the load test, never part of the app.

It writes one line per event to ``$SERVER_WATCH_LOG`` (times are ``time.monotonic()``, the clock the load
test's heartbeat and cases use):

- ``FALL t behind loop_cpu rq_wait runnable frames``: the event loop (the thread that answers
  ``/_stcore/health``) has not stamped the time for over 0.3 s. A coroutine on the loop stamps it every 50 ms; a
  thread of this module checks the stamp every 50 ms and, once per fall (per stamp left standing), logs the loop
  thread's innermost frames (``sys._current_frames``), its CPU time and its wait for a core since the stamp
  (``/proc/self/task/<tid>/schedstat``), and the machine's runnable threads (``procs_running`` in /proc/stat).
- ``GAP t seconds``: the loop's own account of a fall once it stamps again: the whole time between two stamps,
  when over 0.3 s.
- ``GC t seconds generation``: a garbage collection over 50 ms (``gc.callbacks``).
"""

from __future__ import annotations

import os
import sys

_LOG_PATH = os.environ.get("SERVER_WATCH_LOG")
_IS_SERVER = any(argument.endswith("app.py") for argument in sys.argv)

if _LOG_PATH and _IS_SERVER:
    import asyncio
    import gc
    import threading
    import time
    import traceback

    FALL_S = 0.3  # a loop that has not stamped the time for this long has fallen behind
    STAMP_S = 0.05
    _log = open(_LOG_PATH, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 (open for the server's life)
    _loop = {"stamp": time.monotonic(), "ident": None, "tid": None, "sched": (0, 0), "logged": None}

    def _schedstat(tid: int) -> tuple[int, int]:
        """(ns on a core, ns waiting for one) of a thread of this process."""
        try:
            on_core, waiting = open(f"/proc/self/task/{tid}/schedstat").read().split()[:2]
            return int(on_core), int(waiting)
        except (OSError, ValueError):
            return 0, 0

    def _runnable() -> int:
        with open("/proc/stat") as stat:
            for line in stat:
                if line.startswith("procs_running"):
                    return int(line.split()[1])
        return -1

    async def _stamp() -> None:
        while True:
            now = time.monotonic()
            if now - _loop["stamp"] > FALL_S:
                _log.write(f"GAP {now:.2f} {now - _loop['stamp']:.3f}s\n")
            _loop["stamp"], _loop["sched"] = now, _schedstat(_loop["tid"])
            await asyncio.sleep(STAMP_S)

    def _watch() -> None:
        while True:
            time.sleep(STAMP_S)
            now = time.monotonic()
            behind = now - _loop["stamp"]
            if _loop["ident"] is None or behind < FALL_S or _loop["logged"] == _loop["stamp"]:
                continue
            _loop["logged"] = _loop["stamp"]  # this fall is logged; the next one has another stamp
            frame = sys._current_frames().get(_loop["ident"])
            frames = traceback.extract_stack(frame)[-6:] if frame is not None else []
            where = " < ".join(f"{os.path.basename(f.filename)}:{f.lineno}:{f.name}" for f in reversed(frames))
            on_core, waiting = (a - b for a, b in zip(_schedstat(_loop["tid"]), _loop["sched"], strict=True))
            _log.write(f"FALL {now:.2f} behind={behind:.2f} loop_cpu={on_core / 1e9:.3f} "
                       f"rq_wait={waiting / 1e9:.3f} runnable={_runnable()} {where}\n")

    _started_gc: dict[str, float] = {}

    def _on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            _started_gc["t"] = time.monotonic()
        elif (took := time.monotonic() - _started_gc.get("t", time.monotonic())) > 0.05:
            _log.write(f"GC {time.monotonic():.2f} {took:.3f}s gen{info['generation']}\n")

    _run_forever = asyncio.BaseEventLoop.run_forever

    def _run_forever_stamped(self: asyncio.BaseEventLoop) -> None:
        if _loop["ident"] is None:  # the server's one loop: the first that runs
            _loop["ident"], _loop["tid"] = threading.get_ident(), threading.get_native_id()
            self.call_soon(lambda: self.create_task(_stamp()))
        return _run_forever(self)

    asyncio.BaseEventLoop.run_forever = _run_forever_stamped
    gc.callbacks.append(_on_gc)
    threading.Thread(target=_watch, daemon=True, name="server-watch").start()
