"""The Heads page measuring a user's sentences, in chromium, with the server's memory (prints figures; never a test).

    python bench/bench_heads_page.py --models-dir /tmp/opusmodels [--sentences 50]

Serves the app, opens the Heads page (the model folder's first model: name an opus-mt stand-in folder, see
docs/benchmarks.md), types ``--sentences`` lines of 12 random words, presses "Measure the heads", and times it
until the statistics are drawn; on a large model it then presses "Run the pruning curve" and times that. Prints
the server's resident memory and its peak (VmHWM), and what the progress bar showed meanwhile (read every 0.2 s:
when it appeared, how often it moved, the longest it stood still). ``--click-at S`` changes the sidebar's input S
seconds into the statistics, as a user clicking elsewhere meanwhile: the work must go on, not start again.
Targets (issue 19): head statistics over 50 sentences <= 60 s, server memory <= 2 GB.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from bench_app import RunWatcher, proc_memory  # noqa: E402
from devserver import CHROMIUM, CHROMIUM_ARGS, serve  # noqa: E402

WORDS = "the a house cat dog station train where is my friend big small red green walks runs sees today".split()
CHARTS_DRAWN = ("n => [...document.querySelectorAll('[data-testid=stPlotlyChart]')]"
                ".filter(c => c.querySelector('.main-svg')).length >= n")
PROGRESS_TEXT = "() => document.querySelector('[data-testid=stProgress]')?.innerText ?? null"


def watch_progress(page, charts: int, start: float, click_at: float | None = None) -> str:
    """Wait until ``charts`` charts are drawn, reading the progress bar every 0.2 s: a line saying when it first
    showed, how often its text changed and the longest time it stood still (what the user sees of the work).
    ``click_at``: that many seconds in, change the sidebar's input sentence (a click elsewhere during the work)."""
    seen: list[tuple[float, str]] = []
    deadline = start + 1800
    while not page.evaluate(CHARTS_DRAWN, charts):
        if click_at is not None and time.perf_counter() - start >= click_at:
            click_at = None
            field = page.get_by_role("textbox", name="Input sentence")
            field.fill("The train is late.")
            field.press("Enter")
        if time.perf_counter() > deadline:
            raise SystemExit(f"no {charts} charts after 30 minutes")
        text = page.evaluate(PROGRESS_TEXT)
        if text and (not seen or seen[-1][1] != text):
            seen.append((time.perf_counter() - start, text))
        page.wait_for_timeout(200)
    if not seen:
        return "no progress bar seen"
    times = [t for t, _ in seen] + [time.perf_counter() - start]
    still = max(b - a for a, b in zip(times, times[1:], strict=False))
    return (f"progress bar: first at {seen[0][0]:.1f} s, {len(seen)} updates, longest still {still:.1f} s; "
            f"last: {seen[-1][1]!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models-dir", required=True, help="folder of model folders (the first is opened)")
    parser.add_argument("--sentences", type=int, default=50, help="source lines typed into the page (1-200)")
    parser.add_argument("--click-at", type=float, default=None, metavar="S",
                        help="change the sidebar's input S seconds after pressing Measure (the work must go on)")
    args = parser.parse_args()
    if not 1 <= args.sentences <= 200:
        raise SystemExit("--sentences must be 1 to 200 (the page measures at most 200)")
    rng = random.Random(0)
    lines = [" ".join(rng.choice(WORDS) for _ in range(12)).capitalize() + "." for _ in range(args.sentences)]
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright, serve(Path(args.models_dir).resolve(), timeout=600) as server:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        runs = RunWatcher(page)
        page.goto(f"{server.url}/heads", wait_until="domcontentloaded")
        box = page.locator("[data-testid=stTextArea] textarea").first
        box.wait_for(timeout=120_000)
        runs.wait_quiet(page)
        print(f"before: {proc_memory(server.process.pid)}")
        box.fill("\n".join(lines))
        box.press("Control+Enter")
        runs.wait_quiet(page)
        start = time.perf_counter()
        page.get_by_role("button", name=f"Measure the heads on these {len(lines)} sentences").click()
        print(watch_progress(page, 1, start, args.click_at))
        runs.wait_quiet(page)
        print(f"statistics of {len(lines)} sentences drawn in {time.perf_counter() - start:.1f} s; "
              f"server {proc_memory(server.process.pid)}")
        curve = page.get_by_role("button", name="Run the pruning curve", exact=False)
        if curve.count():  # a large model: the curve waits for its own button
            start = time.perf_counter()
            curve.click()
            print(watch_progress(page, 2, start))
            print(f"pruning curve drawn in {time.perf_counter() - start:.1f} s; "
                  f"server {proc_memory(server.process.pid)}")
        errors = page.locator("[data-testid=stException], [data-testid=stAlertContentError]").count()
        print(f"errors on the page: {errors}")
        browser.close()


if __name__ == "__main__":
    main()
