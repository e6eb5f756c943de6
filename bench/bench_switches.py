"""Warm page switches, many of them, and optionally two checkouts side by side (prints figures; never a test).

    python bench/bench_switches.py --models-dir /tmp/opusmodels --model opus-mt-en-de-standin \\
        --pages Masks,Attention --times 4 [--checkout ../other-checkout] [--rounds 2]

``bench_app.py`` times one warm visit per page, which on this 2-core machine varies by ±0.15 s from run to
run: too coarse to tell a 0.1 s change. This clicks each page ``--times`` times in one browser session, each
time coming from a cheap page (Heads), and prints medians of: click to the run's end (read from the
websocket), click to settled (every chart drawn, none new for 150 ms) and the renderer's main-thread busy
time over the switch (chromium's ``Performance.getMetrics`` TaskDuration; less sensitive to the other
processes than the wall clock). With ``--checkout`` the other checkout's app is served too, alternately,
``--rounds`` times each: an A/B on the same machine in the same minutes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from bench_app import SETTLED, TITLED_CHART, RunWatcher  # noqa: E402
from devserver import CHROMIUM, CHROMIUM_ARGS, serve  # noqa: E402

from ui.state.settings import MODEL, MODELS_DIR_ENV  # noqa: E402

VIA = "Heads"  # a page with little to draw, between two timed switches


def switches(browser, url: str, pages: list[str], times: int) -> dict[str, list[tuple[float, float, float]]]:
    """(run finished s, settled s, renderer busy s) of ``times`` warm switches to each page."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    runs = RunWatcher(page)
    cdp = page.context.new_cdp_session(page)
    cdp.send("Performance.enable")

    def busy() -> float:
        return next(m["value"] for m in cdp.send("Performance.getMetrics")["metrics"] if m["name"] == "TaskDuration")

    page.goto(url, wait_until="domcontentloaded")
    page.locator(TITLED_CHART).filter(visible=True).first.wait_for(state="visible", timeout=120_000)
    runs.wait_quiet(page)
    links = page.locator("[data-testid=stSidebarNav] a")
    names = [links.nth(i).inner_text().strip().splitlines()[-1] for i in range(links.count())]

    def click(name: str) -> tuple[float, float, float]:
        runs.wait_quiet(page, 0.3)
        page.evaluate("() => { window.__settleCount = -1; }")
        started, before, start = runs.started, busy(), time.perf_counter()
        links.nth(names.index(name)).click()
        runs.wait_for_run(page, started)
        finished = time.perf_counter() - start
        page.wait_for_function(SETTLED, timeout=120_000, polling=25)
        return finished, time.perf_counter() - start - 0.15, busy() - before

    for name in [*pages, VIA]:
        if name not in names:
            raise SystemExit(f"no page {name!r}; the pages are: {', '.join(names)}")
    out: dict[str, list[tuple[float, float, float]]] = {name: [] for name in pages}
    for name in pages:  # the first visits, not timed
        click(name)
        click(VIA)
    for _ in range(times):
        for name in pages:
            out[name].append(click(name))
            click(VIA)
    page.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models-dir", required=True, help="folder of checkpoint folders")
    parser.add_argument("--model", help="which of them (default: the app's default)")
    parser.add_argument("--pages", default="Masks,Embeddings and positions,Attention", help="sidebar names, by commas")
    parser.add_argument("--times", type=int, default=4, help="timed warm switches per page and round")
    parser.add_argument("--checkout", type=Path, help="another checkout of the project, served alternately")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of each checkout")
    args = parser.parse_args()
    if args.times < 1 or args.rounds < 1:
        raise SystemExit("--times and --rounds must be at least 1")
    apps = [ROOT / "app.py"] + ([args.checkout.resolve() / "app.py"] if args.checkout else [])
    for app in apps:
        if not app.is_file():
            raise SystemExit(f"{app} is missing")
    os.environ[MODELS_DIR_ENV] = str(Path(args.models_dir).resolve())
    from playwright.sync_api import sync_playwright

    pages = [p.strip() for p in args.pages.split(",") if p.strip()]
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; medians of {args.times} warm switches")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        for round_ in range(args.rounds):
            for app in apps:
                with serve(os.environ[MODELS_DIR_ENV], timeout=600, script=app) as server:
                    url = server.url + (f"/?{MODEL}={args.model}" if args.model else "")
                    rows = switches(browser, url, pages, args.times)
                print(f"\n{app.parent} (round {round_ + 1})")
                print(f"{'page':<26}{'run finished s':>16}{'settled s':>11}{'renderer busy s':>17}")
                for name, samples in rows.items():
                    finished, settled, busy = (statistics.median(column) for column in zip(*samples, strict=True))
                    print(f"{name[:25]:<26}{finished:>16.2f}{settled:>11.2f}{busy:>17.2f}")
        browser.close()


if __name__ == "__main__":
    main()
