"""The load test's heartbeat, in a process of its own: GETs ``URL/_stcore/health`` every 0.25 s until its
standard input closes, then prints its figures as one JSON object (max and p99 latency, answers over 1 s, and
the answers over 0.5 s with the monotonic time they were asked).

    python bench/heartbeat.py http://127.0.0.1:8501      # close stdin (Ctrl-D) to stop

A process of its own, doing nothing else, because a heartbeat is the stand-in for a visitor on another machine:
run as a thread of the load generator (bench_load.py, where the websocket visitors parse the server's messages
and Playwright drives chromium), every answer also waits for the generator's own interpreter lock, and the
figure could count the generator's queue as the server's (side by side in eight runs the two agreed within their
spread: docs/benchmarks.md). ``load_sessions.Heartbeat`` starts it; standard
library only, so it starts in a few tens of milliseconds.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.request

POLL_S = 0.25
HEALTH_TIMEOUT_S = 5.0  # a request that fails or takes longer counts as this
LATE_S = 0.5  # answers kept with their time, to line them up with the load test's cases


def probe(url: str, halt: threading.Event, latencies: list[float], late: list[tuple[float, float]]) -> int:
    """GET ``url`` every POLL_S until ``halt``; appends each latency, returns the number of failures."""
    failures = 0
    while not halt.is_set():
        started = time.monotonic()
        try:
            with urllib.request.urlopen(url, timeout=HEALTH_TIMEOUT_S) as answer:
                answer.read()
            latencies.append(time.monotonic() - started)
        except OSError:
            failures += 1
            latencies.append(HEALTH_TIMEOUT_S)
        if latencies[-1] > LATE_S:
            late.append((started, latencies[-1]))
        halt.wait(max(0.0, POLL_S - (time.monotonic() - started)))
    return failures


def figures(latencies: list[float], failures: int, late: list[tuple[float, float]]) -> dict:
    ordered = sorted(latencies) or [float("nan")]
    return {"requests": len(latencies), "failures": failures, "max_s": ordered[-1],
            "p99_s": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
            "over_1s": sum(latency > 1.0 for latency in ordered),
            "late": [(round(at, 2), round(latency, 2)) for at, latency in late]}


def main() -> None:
    if len(sys.argv) != 2 or not sys.argv[1].startswith("http://"):
        sys.exit("usage: python bench/heartbeat.py http://HOST:PORT  (then close stdin to stop)")
    halt, latencies, late, failed = threading.Event(), [], [], []
    worker = threading.Thread(target=lambda: failed.append(
        probe(sys.argv[1].rstrip("/") + "/_stcore/health", halt, latencies, late)), daemon=True)
    worker.start()
    sys.stdin.read()  # until the parent closes the pipe
    halt.set()
    worker.join(HEALTH_TIMEOUT_S + 1)
    print(json.dumps(figures(latencies, failed[0] if failed else 0, late)), flush=True)


if __name__ == "__main__":
    main()
