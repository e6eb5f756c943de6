"""How long ``threading.Thread.start`` waits beside busy Python threads, with the cores shared or not (prints
figures; never a test). It is the wait that made the load test's heartbeat late (docs/benchmarks.md, "the load
test's late answers"): Streamlit's event loop, which also answers /_stcore/health, starts a thread for every
script run and waits until the new thread has taken the GIL.

    python bench/bench_gil_handover.py [--busy 2] [--hogs 8] [--seconds 15]

Three rounds: the busy threads alone; beside ``--hogs`` CPU-bound processes at nice 10, then at nice 19; and
beside them in Linux's SCHED_IDLE class (the load test's ``--nice-generator`` and ``--idle-generator``). Each
round prints the median, p99 and max of the waits.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time

import numpy as np
import pandas as pd

HOG = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass\n"


def busy(halt: threading.Event) -> None:
    """A script run's kind of work: pandas and Python objects, the GIL held most of the time."""
    columns = [f"m{i}" for i in range(13)]
    labels = [str(i) for i in range(2000)]
    generator = np.random.default_rng(0)
    while not halt.is_set():
        pd.DataFrame(generator.random((50, 13)), columns=columns).corr(method="spearman")
        pd.Series(labels, dtype="string")


def start_waits(seconds: float) -> list[float]:
    """Start (and join) an empty thread every 20 ms for ``seconds``; the time each ``start()`` took."""
    waits = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.monotonic()
        thread = threading.Thread(target=lambda: None)
        thread.start()
        waits.append(time.monotonic() - started)
        thread.join()
        time.sleep(0.02)
    return waits


def hogs(n: int, seconds: float, nice: int | None, idle: bool) -> list[subprocess.Popen]:
    def demote() -> None:
        if nice is not None:
            os.nice(nice)
        if idle:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    return [subprocess.Popen([sys.executable, "-c", HOG.format(seconds=seconds)], preexec_fn=demote)
            for _ in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--busy", type=int, default=2, help="busy Python threads (the app's run slots: 2)")
    parser.add_argument("--hogs", type=int, default=8, help="CPU-bound processes beside them")
    parser.add_argument("--seconds", type=float, default=15.0, help="each round's length")
    args = parser.parse_args()
    halt = threading.Event()
    for _ in range(args.busy):
        threading.Thread(target=busy, args=(halt,), daemon=True).start()
    time.sleep(0.5)
    print(f"{args.busy} busy threads, {os.cpu_count()} cores; Thread.start() waits:")
    rounds = (("alone", None, False), (f"{args.hogs} hogs at nice 10", 10, False),
              (f"{args.hogs} hogs at nice 19", 19, False), (f"{args.hogs} hogs in SCHED_IDLE", None, True))
    for name, nice, idle in rounds:
        started = [] if name == "alone" else hogs(args.hogs, args.seconds + 2, nice, idle)
        time.sleep(0.5 if started else 0)
        waits = sorted(start_waits(args.seconds))
        for hog in started:
            hog.wait()
        print(f"  {name:24s} n={len(waits):4d}  median {1000 * statistics.median(waits):6.1f} ms"
              f"  p99 {1000 * waits[int(0.99 * len(waits))]:6.1f} ms  max {1000 * waits[-1]:6.1f} ms")
    halt.set()


if __name__ == "__main__":
    main()
