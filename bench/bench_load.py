"""The load test of issue 33: many visitors on one server at once, some of them hostile (prints figures; never a
test). Loopback only, bounded in sessions and time.

    python bench/bench_load.py [--sessions 20] [--seconds 180] [--browsers 5] [--public] [--files DIR]
                               [--nice-generator N | --idle-generator] [--think S] [--cold-start]
                               [--watch FILE] [--json FILE]

One server (``tests/devserver.py``: ``streamlit run app.py`` on 127.0.0.1) with the shipped models and an empty
runs folder; ``--public`` sets ``TRANSFORMER_APP_PUBLIC=1`` (no uploads, no "Open a folder"), else uploads are on.
Of the ``--sessions`` visitors, ``--browsers`` are chromium pages (Playwright, one browser): a trainer that
starts a 10 s run of the Training page, an attacker that tries every hostile case below, and viewers that pick
models, type inputs and walk the pages; the rest speak Streamlit's websocket protocol (``load_sessions.py``),
asking for one page's script run after another. Meanwhile a heartbeat (``heartbeat.py``, a process of its own,
as a visitor elsewhere would be) GETs /_stcore/health every 0.25 s (target: every answer within 1 s) and the
server's memory is sampled (target: peak <= 3 GB).

The hostile cases (files from ``load_files.py``): a zipped Marian config.json of 10**9 layers; our checkpoint of
max_len 2,097,152 that never says </s> (uploaded, then decoded); a zip whose vocab.json holds 10**7 entries; a
280 MB config.json PUT straight to the upload endpoint (the browser would refuse it; the server's 100 MB cap must);
a 49 MB pairs file on the Training page; 20 MB of Pharaoh links typed into the Explain page's box (the browser
keeps its 1 MB ``max_chars``); "Open a folder" with /etc, ../../etc and /proc/self; and in public mode renaming
and deleting the trainer's run through its link. At the end the trainer's run must be intact, and the trainer's own
session (reached through the sidebar: a reload would be a new session, which in public mode owns no run) must list
it with "Delete this run".

The load generator (chromium and its pages, the websocket visitors) runs on the same cores as the server, which a
public server's visitors do not: their browsers draw the charts on their own machines. Two ways to keep it behind
the server, both set in the bench's main thread once the server, the heartbeat and the memory sampler have
started (on Linux the threads and processes started after it inherit them), with ``load_sessions.Renicer`` putting
back the threads chromium raises to nice -8:

- ``--idle-generator`` puts the generator in Linux's SCHED_IDLE class: it runs only on CPU time no server thread
  wants, the nearest one machine comes to visitors on machines of their own. The websocket visitors still ask for
  as many runs (they wait on the server, not on the CPU); chromium draws fewer pages.
- ``--nice-generator N`` runs it N steps nicer than the server: still a share of the cores whenever it is
  runnable (nice 10 weighs about a tenth of nice 0).

Why it matters: Streamlit's event loop, which answers the heartbeat, starts a thread for each script run and
waits until that thread has taken the GIL; each such hand-over needs the scheduler to run the right thread at the
right moment. Without either option the 2-core machine runs 10 to 24 threads at once (``vmstat``'s run queue),
and those waits stretch to a second and more (docs/benchmarks.md, "the load test's late answers"). They are
measurement choices: report the figures with and without them. Plain ``nice python bench/bench_load.py`` nices
the server too.

``--watch FILE`` loads ``server_watch/sitecustomize.py`` into the server: FILE gets a line for each time the
event loop fell 0.3 s behind (where it was, its CPU and its wait for a core, the machine's runnable threads),
another with the fall's length once the loop is back, and one for each collection over 50 ms; the figures count
the falls by the loop's innermost frame.

``--think S`` makes the websocket visitors wait S seconds after each page before the next click; by default
they click again at once (about one page a second each), far above a reading visitor's pace.

Before the visitors arrive one websocket session runs the first page once (``start_up`` in the figures: its time
and the heartbeat meanwhile), as a demo server is started before its audience: that first run of the process
imports torch, pandas, pyarrow and Plotly and freezes them out of the collector (ui/state/collector.py), holding
the GIL for about a second and a half, which a heartbeat then waits out once. ``--cold-start`` lets the visitors
meet it instead.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))
from devserver import chromium, serve, settle, start_training  # noqa: E402
from load_files import pharaoh_text, write_files  # noqa: E402
from load_sessions import Heartbeat, Memory, Renicer, scripted_visitor, ws_sessions  # noqa: E402

from ui.state import settings  # noqa: E402

TIMEOUT_MS = 120_000
PAGES = ("attention", "explain", "embeddings", "decoding", "tokenization", "model")
VIEWS = [("numbers-en-de", "forty-two"), ("dates-de", "2021-03-04"), ("reverse", "hello"),
         ("sentences-en-de", "the dog sleeps")]
ALERTS = "[data-testid=stAlert], [data-testid=stException], [data-testid=stFileUploaderFileError]"


def drawn(page, expand: bool = False) -> None:
    """Wait until the sidebar's model menu is drawn (a page still loading is idle before it is drawn); with
    ``expand``, open the sidebar's "Upload or open a model" (the uploader and "Open a folder" are inside it)."""
    page.locator("[data-testid=stSidebar] [data-testid=stSelectbox]").first.wait_for(state="attached",
                                                                                    timeout=TIMEOUT_MS)
    settle(page)
    expander = page.locator("[data-testid=stSidebar] [data-testid=stExpander]", has_text="Upload or open a model")
    if expand and expander.count() and expander.first.locator("details[open]").count() == 0:
        expander.first.locator("summary").first.click()
        settle(page)


def alerts(page) -> str:
    return " | ".join(t.strip()[:160] for t in page.locator(ALERTS).all_inner_texts() if t.strip())


def timed(results: dict, name: str, action) -> None:
    """Run one hostile case, keep its outcome (what the page said) and its time."""
    started = time.monotonic()
    try:
        outcome = action()
    except Exception as error:  # the case's failure is its outcome
        outcome = f"FAILED: {type(error).__name__}: {str(error)[:200]}"
    results[name] = {"outcome": outcome, "seconds": round(time.monotonic() - started, 2),
                     "started": round(started, 2)}  # monotonic, as the heartbeat's "late" answers
    print(f"  {name}: {results[name]['seconds']} s: {outcome}", flush=True)


def upload(page, url: str, path: Path) -> str:
    page.goto(f"{url}/", wait_until="domcontentloaded")
    drawn(page, expand=True)
    uploader = page.locator("[data-testid=stSidebar] [data-testid=stFileUploaderDropzoneInput]")
    if uploader.count() == 0:
        return "refused: no uploader (public mode)"
    uploader.first.set_input_files(str(path))
    page.locator("[data-testid=stSidebar] [data-testid=stAlert]").first.wait_for(state="attached",
                                                                                 timeout=TIMEOUT_MS)
    settle(page)
    return alerts(page.locator("[data-testid=stSidebar]"))


def decode_endless(page, url: str) -> str:
    """After ``endless.zip`` was loaded (the session's current model): the Decoding page's greedy output, the
    model named."""
    page.locator("[data-testid=stSidebarNav] a", has_text="Decoding").first.click()  # the same session
    drawn(page)
    box = page.get_by_role("textbox", name="Input sentence")
    box.fill("abcdefghij" * 5)
    box.press("Enter")
    settle(page)
    code = page.locator("[data-testid=stMain] [data-testid=stCode]")
    out = code.first.inner_text().strip() if code.count() else ""
    model = page.locator("[data-testid=stSidebar]").get_by_role("combobox", name="Model").input_value()
    return f"{model}: output of {len(out)} characters; {alerts(page.locator('[data-testid=stMain]')) or 'no message'}"


def tokenize_uploaded(page, url: str) -> str:
    """After ``bart-padding.zip`` was loaded (the session's current model): the Tokenization page of its input, the
    number of ids it shows (the file asked for 10**8) and what it said."""
    page.locator("[data-testid=stSidebarNav] a", has_text="Tokenization").first.click()  # the same session
    drawn(page)
    box = page.get_by_role("textbox", name="Input sentence")
    box.fill("the house is small")
    box.press("Enter")
    settle(page)
    exceptions = page.locator("[data-testid=stException]").count()
    text = page.locator("[data-testid=stMain]").inner_text()
    return (f"drawn, {exceptions} exceptions, {len(text):,} characters of page; "
            f"{alerts(page.locator('[data-testid=stMain]')) or 'no message'}")


def pairs_upload(page, url: str, path: Path) -> str:
    page.goto(f"{url}/training", wait_until="domcontentloaded")
    page.get_by_role("button", name="Train", exact=True).wait_for(timeout=TIMEOUT_MS)
    drawn(page)
    own = page.get_by_text("My own pairs (TSV/CSV)")
    if own.count() == 0:
        return "refused: no pairs upload (public mode)"
    own.first.click()
    settle(page)
    page.locator("[data-testid=stMain] [data-testid=stFileUploaderDropzoneInput]").first.set_input_files(str(path))
    page.wait_for_timeout(1000)
    settle(page)
    return alerts(page.locator("[data-testid=stMain]")) or "no message"


def open_folder(page, url: str, typed: str) -> str:
    page.goto(f"{url}/", wait_until="domcontentloaded")
    drawn(page, expand=True)
    box = page.get_by_role("textbox", name="Or open a model folder on the server")
    if box.count() == 0:
        return "refused: no \"Open a folder\" (public mode)"
    box.fill(typed)
    box.press("Enter")
    settle(page)
    sidebar_buttons = page.locator("[data-testid=stSidebar] [data-testid=stButton]")
    sidebar_buttons.get_by_role("button", name="Open", exact=True).click()
    settle(page)
    said = page.locator("[data-testid=stSidebar]").locator(ALERTS)
    try:  # on a loaded server the run may settle before its message is drawn: wait for it (read "" before)
        said.first.wait_for(timeout=30_000)
    except Exception:  # noqa: BLE001 (Playwright's TimeoutError)
        return "no message within 30 s"
    return alerts(page.locator("[data-testid=stSidebar]"))


def steal_run(page, url: str, runs_dir: Path, public: bool) -> str:
    """Open the trainer's run by its link and try to rename and delete it."""
    if not public:
        return "n/a: outside public mode every browser shares the runs by design (docs/app.md)"
    records = [json.loads(p.read_text()) for p in runs_dir.glob("*/run.json")]
    if not records:
        return "FAILED: the trainer's run has no run.json yet"
    page.goto(f"{url}/training?model=run:{records[0]['link']}", wait_until="domcontentloaded")
    settle(page)
    name = page.get_by_role("textbox", name="Name")
    delete = page.get_by_role("button", name="Delete this run")
    try:
        delete.first.wait_for(state="attached", timeout=60_000)
    except Exception:  # noqa: BLE001 (Playwright's TimeoutError: the section never drew it)
        pass
    if name.count() == 0 or delete.count() == 0:
        page.screenshot(path="/tmp/load-steal.png", full_page=True)
        return "refused: the run is not listed for this session"
    return (f"name box {'disabled' if name.first.is_disabled() else 'EDITABLE'}, delete button "
            f"{'disabled' if delete.first.is_disabled() else 'ENABLED'}")


def trainer_sees_its_run(page) -> bool:
    """Whether the trainer's own session lists its run, with "Delete this run" enabled. Reached through the
    sidebar's links (Model, then Training) in the same browser session: loading the page's address again would
    open a new session, which in public mode owns no run (a run belongs to the session that trained it)."""
    nav = page.locator("[data-testid=stSidebarNav] a")
    try:
        for title in ("Model", "Training"):
            nav.filter(has_text=title).first.click()
            drawn(page)
        delete = page.get_by_role("button", name="Delete this run").first
        delete.wait_for(state="attached", timeout=60_000)
        return delete.is_enabled()
    except Exception:  # noqa: BLE001 (Playwright's TimeoutError: the run is not listed)
        return False


def view(page, url: str, step: int, model: str, text: str) -> None:
    """One visitor's click: a page of the app with its own model and input (by link), no wait for the end."""
    page.goto(f"{url}/{PAGES[step % len(PAGES)]}?model={model}&text={text.replace(' ', '+')}",
              wait_until="domcontentloaded")


def browsers(url: str, n: int, seconds: float, files: dict[str, Path], runs_dir: Path, public: bool,
             results: dict) -> dict:
    deadline = time.monotonic() + seconds
    with chromium() as browser:
        contexts = [browser.new_context(viewport={"width": 1300, "height": 900}) for _ in range(max(n, 2))]
        trainer, attacker, *viewers = [c.new_page() for c in contexts]
        start_training(trainer, url)
        runs_before = _runs(runs_dir, wait_s=60)  # the trainer's run, claimed before it trains
        step = 0

        def round_of_views() -> None:
            nonlocal step
            for i, page in enumerate(viewers):
                view(page, url, step + i, *VIEWS[i % len(VIEWS)])
            step += 1

        cases = [("marian 10**9 layers (zip)", lambda: upload(attacker, url, files["marian-layers.zip"])),
                 ("max_len 2,097,152, never </s>: upload", lambda: upload(attacker, url, files["endless.zip"])),
                 ("max_len 2,097,152, never </s>: decode", lambda: decode_endless(attacker, url) if "Loaded as" in
                  results["max_len 2,097,152, never </s>: upload"]["outcome"] else "n/a: not loaded"),
                 ("vocab.json of 10**7 entries (zip)", lambda: upload(attacker, url, files["vocab-1e7.zip"])),
                 ("tokenizer.json padded to 10**8 (zip): upload", lambda: upload(attacker, url,
                                                                              files["bart-padding.zip"])),
                 ("tokenizer.json padded to 10**8: Tokenization page", lambda: tokenize_uploaded(attacker, url)
                  if "Loaded as" in results["tokenizer.json padded to 10**8 (zip): upload"]["outcome"]
                  else "n/a: not loaded"),
                 ("safetensors ranges overlapping (zip)", lambda: upload(attacker, url, files["bart-overlap.zip"])),
                 ("tokenizer.json of 3.5 M pieces (zip)", lambda: upload(attacker, url, files["t5-pieces.zip"])),
                 ("pairs file of 49 MB", lambda: pairs_upload(attacker, url, files["pairs-49mb.tsv"])),
                 ("280 MB config.json PUT, 20 MB of Pharaoh links (script)", lambda: scripted_visitor(
                     url, files["config-280mb.json"], pharaoh_text(20), "model=sentences-en-de&more=alignment")),
                 *[(f"open a folder: {p}", lambda p=p: open_folder(attacker, url, p))
                   for p in ("/etc", "../../etc", "/proc/self")],
                 ("rename/delete another session's run", lambda: steal_run(attacker, url, runs_dir, public))]
        for name, action in cases:
            round_of_views()
            timed(results, name, action)
        while time.monotonic() < deadline:
            round_of_views()
            settle(viewers[-1] if viewers else attacker)
        exceptions = sum(p.locator("[data-testid=stException]").count() for p in [trainer, *viewers])
        trained = trainer_sees_its_run(trainer)
        for context in contexts:
            context.close()
    after = _runs(runs_dir)
    intact = bool(runs_before) and all(after.get(folder) == record and (runs_dir / folder / "model.safetensors")
                                       .is_file() for folder, record in runs_before.items())
    return {"browser_exceptions": exceptions, "trainer_sees_its_run": trained, "view_rounds": step,
            "runs_intact": intact, "runs": sorted(after)}


def _runs(runs_dir: Path, wait_s: float = 0.0) -> dict[str, dict]:
    """Each run folder's run.json (name, owner, link), waiting up to ``wait_s`` for a first one."""
    deadline = time.monotonic() + wait_s
    while True:
        found = {p.name: json.loads((p / "run.json").read_text()) if (p / "run.json").is_file() else {}
                 for p in runs_dir.iterdir() if p.is_dir()}  # outside public mode a run has run.json once named
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def watched(log: Path) -> dict:
    """The server watcher's log in figures: the event loop's falls over 0.3 s (how many, where the loop was, by
    innermost frame, and the longest, as the loop measured it) and the collections over 50 ms."""
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    falls = [line.split() for line in lines if line.startswith("FALL ")]
    def innermost(fall: list[str]) -> str:  # file:function, past threading.py's own waits (Thread.start's)
        frames = [frame for frame in fall[6:] if frame != "<" and not frame.startswith("threading.py:")]
        return ":".join(frames[0].split(":")[::2]) if frames else "?"

    where = collections.Counter(innermost(fall) for fall in falls)
    return {"loop_falls_over_0.3s": len(falls),
            "longest_fall_s": max((float(line.split()[2].rstrip("s")) for line in lines if line.startswith("GAP ")),
                                  default=0.0),
            "falls_by_frame": dict(where.most_common()),
            "collections_over_50ms": sum(line.startswith("GC ") for line in lines), "log": str(log)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=180)
    parser.add_argument("--browsers", type=int, default=5, help="of the sessions, chromium pages (at least 2)")
    parser.add_argument("--public", action="store_true", help="TRANSFORMER_APP_PUBLIC=1 (no uploads)")
    parser.add_argument("--files", type=Path, default=Path(tempfile.gettempdir()) / "load-files")
    parser.add_argument("--nice-generator", type=int, default=0, metavar="N",
                        help="run the load generator (chromium, the websocket visitors) N steps nicer than the server")
    parser.add_argument("--idle-generator", action="store_true",
                        help="run the load generator in Linux's SCHED_IDLE class: it runs only on CPU time the server "
                             "leaves, the nearest this machine comes to visitors on machines of their own")
    parser.add_argument("--cold-start", action="store_true",
                        help="let the visitors arrive at a server no session has run yet (its first run imports "
                             "torch and the other libraries with the GIL held): the heartbeat then includes that")
    parser.add_argument("--think", type=float, default=0.0, metavar="S",
                        help="the websocket visitors wait S seconds after each page before the next click (default 0: "
                             "at once, a stress far above a reading visitor's pace)")
    parser.add_argument("--watch", type=Path, metavar="FILE",
                        help="log where the server's event loop was whenever it fell 0.3 s behind, and collections "
                             "over 50 ms, to FILE (bench/server_watch/sitecustomize.py), and count them in the figures")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    files = write_files(args.files)
    os.environ[settings.PUBLIC_ENV] = "1" if args.public else ""
    os.environ[settings.PUBLIC_UPLOADS_ENV] = ""
    if args.watch:  # the server inherits both; the watcher stays inert in every process but the server
        args.watch.unlink(missing_ok=True)
        os.environ["SERVER_WATCH_LOG"] = str(args.watch.resolve())
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "bench" / "server_watch"),
                                                                 os.environ.get("PYTHONPATH")]))
    n_browsers = max(2, min(args.browsers, args.sessions))
    results: dict = {}
    with tempfile.TemporaryDirectory() as runs_dir, serve(ROOT / "pretrained", runs_dir) as server:
        start_up = None
        if not args.cold_start:  # one session's first run before the visitors, as a demo server is started early
            warming = Heartbeat(server.url)
            warming.start()
            begun = time.monotonic()
            ws_sessions(server.url, 1, 0.0, PAGES)
            start_up = {"seconds": round(time.monotonic() - begun, 2), **warming.stop()}
        heartbeat, memory = Heartbeat(server.url), Memory(server.process.pid)
        heartbeat.start()
        memory.start()
        renicer = (Renicer(server.process.pid, args.nice_generator, spared=[heartbeat.process.pid],
                           idle=args.idle_generator) if args.nice_generator or args.idle_generator else None)
        if renicer:  # both are this thread's own on Linux: the threads and processes started from here inherit them
            renicer.start()
            os.nice(args.nice_generator)
            if args.idle_generator:
                os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        ws: dict = {}
        talker = threading.Thread(target=lambda: ws.update(stats=ws_sessions(
            server.url, args.sessions - n_browsers, args.seconds, PAGES, args.think)), daemon=True)
        talker.start()
        started = time.monotonic()
        figures = browsers(server.url, n_browsers, args.seconds, files, Path(runs_dir), args.public, results)
        talker.join(args.seconds + 120)
        elapsed = time.monotonic() - started
        figures.update(heartbeat.stop(), **memory.stop(), **(renicer.stop() if renicer else {}), start_up=start_up)
        stats = ws.get("stats")
    figures.update(mode="public" if args.public else "normal (uploads on)", generator_nice=args.nice_generator,
                   generator_idle=args.idle_generator,
                   think_s=args.think,
                   sessions=args.sessions,
                   browsers=n_browsers, seconds=round(elapsed), ws_runs=stats.runs if stats else 0,
                   ws_exceptions=stats.exceptions if stats else 0,
                   ws_errors=stats.errors[:5] if stats else ["the websocket sessions did not finish"], cases=results)
    if args.watch:
        figures.update(server_watch=watched(args.watch))
    print(json.dumps(figures, indent=1))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
