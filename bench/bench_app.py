"""How fast and how big the Streamlit app is (prints figures; never a test).

    nice python bench/bench_app.py [--model numbers-en-de] [--models-dir pretrained] [--repeats 10] [--no-browser]
        [--text "Where is the train station?"] [--skip-apptest] [--server-log FILE] [--cold]

1. Warm reruns: every page under streamlit.testing's AppTest with a shipped model; after a
   first (cold) run, ``at.run()`` is timed ``--repeats`` times. This is the server's time for
   one rerun (the script, the cached model and analysis, the charts, the element tree);
   target <= 150 ms per page.
2. Start-up: ``streamlit run app.py`` as a subprocess until /_stcore/health answers, and until
   the first page has drawn its first chart in chromium (Playwright); target <= 4 s. That chart
   is the Model page's architecture diagram (SVG, drawn from config.json before torch and the
   model are loaded); the time to its first Plotly chart (once its title is drawn) is printed too.
   Then the page switches: each page clicked in the sidebar until settled, first and warm visit;
   targets <= 2 s and <= 1 s. The first visits come after every page was opened once in another tab (the
   shared caches warm: each page opened in a new session, timed until its run is over and its charts drew,
   with the server's memory after it); ``--cold`` times them before, as a session that opens the app first meets
   them. ``--text`` gives the input in every page's link: a Hugging Face folder other than opus-mt-en-* (T5, NLLB)
   comes without examples, and its input starts empty. ``--skip-apptest`` skips part 1: at flan-t5-base or NLLB
   size (``--models-dir`` a folder of links to the stand-ins of bench/bench_families.py) it would load a second
   copy of the model into this process.
3. Memory: the server's resident set (VmRSS, and its peak VmHWM from /proc) with the model
   loaded, after every page was opened once in the browser; target < 1 GB.

Without a shipped model (``pretrained/`` empty) a stand-in is written to a temporary folder:
random weights of the size ``transformer.train`` builds by default (d_model 128, 4 heads,
2 + 2 layers, d_ff 512, a BPE vocabulary of 160 on ``numbers``), which costs the same to run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from anywhere without installing

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the dev server is test tooling
from devserver import APP, CHROMIUM, CHROMIUM_ARGS, ServerError, serve  # noqa: E402

from ui.state.settings import MODEL, MODELS_DIR_ENV  # noqa: E402

CHART = "[data-testid=stPlotlyChart] .js-plotly-plot"
TITLED_CHART = f"{CHART} .gtitle"  # a drawn Plotly figure
DIAGRAM = "svg.architecture-diagram"  # the Model page's first chart, drawn before torch and the model


def stand_in_models(folder: Path) -> Path:
    """A random-weight checkpoint of train.py's default size, as a shipped model would be."""
    import torch

    from transformer.checkpoints.checkpoint import save_checkpoint
    from transformer.network.config import TransformerConfig
    from transformer.network.model import Transformer
    from transformer.text.tasks import make_task
    from transformer.text.tokenizers import build_tokenizers

    splits = make_task("numbers", n_train=2000, n_valid=0, n_test=0, seed=0)
    src_tok, tgt_tok = build_tokenizers(splits, kind="bpe", vocab_size=160, shared=True)
    torch.manual_seed(0)
    config = TransformerConfig(src_vocab_size=src_tok.vocab_size, tgt_vocab_size=tgt_tok.vocab_size, d_model=128,
                               n_heads=4, n_layers=2, d_ff=512, dropout=0.0, max_len=256, tying="all")
    model = Transformer(config).eval()
    meta = {"task": "numbers", "task_options": {}, "src_lang": "en", "tgt_lang": "de", "max_output_len": 40,
            "step": 0}
    save_checkpoint(folder / "stand-in-numbers", model, src_tok, tgt_tok, meta)
    return folder


def page_files() -> list[str]:
    return sorted((p.name for p in (ROOT / "pages").glob("[0-9]*_*.py")), key=lambda name: int(name.split("_")[0]))


def warm_reruns(model: str, repeats: int, presenting: bool = False) -> list[tuple[str, float, float, float]]:
    """(page, cold ms, median warm ms, best warm ms) for every page."""
    from streamlit.testing.v1 import AppTest

    rows = []
    for page in page_files():
        at = AppTest.from_file(str(APP), default_timeout=120)
        at.session_state[MODEL] = model
        if presenting:
            from ui.state.presentation import PRESENTATION

            at.session_state[PRESENTATION] = True
        at.switch_page(f"pages/{page}")
        start = time.perf_counter()
        at.run()
        cold = time.perf_counter() - start
        if at.exception:
            print(f"  {page}: exception on the page: {at.exception[0].value}")
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            at.run()
            times.append(time.perf_counter() - start)
        rows.append((page, 1000 * cold, 1000 * statistics.median(times), 1000 * min(times)))
    return rows


def proc_memory(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM (peak) of a process in MB, from /proc."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) / 1024
    return values


def explain_clicks(page, url: str, clicks: int = 4, query: str = "") -> None:
    """Explain page, warm: click another output token, until the run it started is over and the charts drew."""
    runs = RunWatcher(page)
    page.goto(f"{url}/explain{query}", wait_until="domcontentloaded")
    page.locator(CHART).nth(2).wait_for(state="visible", timeout=120_000)
    buttons = page.locator("[data-testid=stButtonGroup] button")
    times = []
    for i in range(1, min(clicks, buttons.count() - 1) + 1):
        runs.wait_quiet(page)
        page.evaluate("() => { window.__settleCount = -1; }")
        started = runs.started
        start = time.perf_counter()
        buttons.nth(i).click()
        try:
            runs.wait_for_run(page, started, timeout_s=20)
        except TimeoutError:  # seen on the random stand-in's look-alike pills after a first click: say so
            print(f"Explain page: click {i} on an output token started no run within 20 s: not timed")
            continue
        page.wait_for_function(SETTLED, timeout=120_000, polling=25)
        times.append(time.perf_counter() - start - 0.15)
    if times:
        print(f"Explain page: another output token clicked -> page settled in {statistics.median(times):.2f} s "
              f"(median of {len(times)}, browser)")


SETTLED = """() => {
  const charts = document.querySelectorAll('[data-testid=stPlotlyChart]');
  for (const c of charts) { if (!c.querySelector('.js-plotly-plot .main-svg')) return false; }
  const n = charts.length;
  if (window.__settleCount !== n) { window.__settleCount = n; window.__settleSince = performance.now(); return false; }
  return performance.now() - window.__settleSince > 150;  // no new chart for 150 ms
}"""


class RunWatcher:
    """Which script runs the server started and finished, read from the app's websocket (Streamlit's ForwardMsg
    protobufs: ``new_session``, or the first element of a fragment's run, opens a run; ``script_finished`` ends
    it). The status widget alone cannot tell a finished new run from one that has not started yet: after a slow
    page, a click's run can start later than any fixed wait, and the previous page then looks settled at once."""

    def __init__(self, page) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        self._parse = ForwardMsg.FromString
        self.started = 0
        self.running = False
        page.on("websocket", lambda ws: ws.on("framereceived", self._frame))

    def _frame(self, payload) -> None:
        if isinstance(payload, str):
            return
        kind = self._parse(payload).WhichOneof("type")
        if kind == "script_finished":
            self.running = False
        elif kind in ("new_session", "delta", "ref_hash") and not self.running:  # a fragment's run has no new_session
            self.started += 1
            self.running = True

    def wait_quiet(self, page, quiet_s: float = 1.0, timeout_s: float = 300) -> None:
        """Until no run is going and none started for ``quiet_s`` seconds: a page may rerun itself after its
        first run (a link written into the URL), and a click on a widget being redrawn is lost."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            started = self.started
            page.wait_for_timeout(1000 * quiet_s)
            if started == self.started and not self.running:
                return
        raise TimeoutError(f"the page did not come to rest within {timeout_s:.0f} s")

    def wait_for_run(self, page, started_before: int, timeout_s: float = 120) -> None:
        """Until a run started after ``started_before`` runs has finished and no other is running (the last of
        the two messages is a ``script_finished``: a run stopped for another need not send its own)."""
        deadline = time.monotonic() + timeout_s
        while not (self.started > started_before and not self.running):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no run finished within {timeout_s:.0f} s")
            page.wait_for_timeout(10)  # Playwright delivers the websocket's frames while it waits


def page_switches(page, url: str, query: str = "") -> None:
    """Click each page in the sidebar (one session, as a user does) until the page has settled: the run
    the click started is over (``RunWatcher``), every chart has drawn, and no chart came for 150 ms
    (reported without those 150 ms). First the first visit of every page, then a second round of warm visits."""
    runs = RunWatcher(page)
    page.goto(f"{url}/{query}", wait_until="domcontentloaded")
    page.locator(TITLED_CHART).filter(visible=True).first.wait_for(state="visible", timeout=120_000)
    runs.wait_quiet(page)
    links = page.locator("[data-testid=stSidebarNav] a")
    names = [links.nth(i).inner_text().strip().splitlines()[-1] for i in range(links.count())]  # after the icon
    rounds: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(2):
        for i, name in enumerate(names):
            runs.wait_quiet(page, 0.3)
            page.evaluate("() => { window.__settleCount = -1; }")
            started = runs.started
            start = time.perf_counter()
            page.locator("[data-testid=stSidebarNav] a").nth(i).click()
            runs.wait_for_run(page, started)
            page.wait_for_function(SETTLED, timeout=120_000, polling=25)
            rounds[name].append(time.perf_counter() - start - 0.15)
    print(f"\n{'page (browser, click to settled)':<34}{'first visit s':>14}{'warm visit s':>14}")
    for name, (first, warm) in rounds.items():
        flag = ("  > 2 s" if first > 2 else "") + ("  > 1 s warm" if warm > 1 else "")
        print(f"{name:<34}{first:>14.2f}{warm:>14.2f}{flag}")


def server_figures(models_dir: Path, model: str, use_browser: bool, cold: bool = False,
                   log_path: Path | None = None, text: str | None = None) -> None:
    query = f"?{urlencode({'text': text})}" if text else ""  # a link's input (ui/state/links.py), every page opened
    playwright = browser = None
    if use_browser:
        from playwright.sync_api import sync_playwright

        playwright = sync_playwright().start()  # the browser starts before the clock does
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
    start = time.perf_counter()
    try:
        with serve(models_dir, timeout=600, log_path=log_path) as server:
            health = time.perf_counter() - start
            print(f"\nStart-up: /_stcore/health answers {health:.2f} s after `streamlit run`")
            if browser is None:
                return
            url, pid = server.url, server.process.pid
            page.goto(f"{url}/{query}", wait_until="domcontentloaded")
            page.locator("h1").filter(visible=True).first.wait_for(state="visible", timeout=120_000)
            titled = time.perf_counter() - start
            page.locator(DIAGRAM).filter(visible=True).first.wait_for(state="visible", timeout=120_000)
            shown = time.perf_counter() - start
            page.locator(TITLED_CHART).filter(visible=True).first.wait_for(state="visible", timeout=120_000)
            plotted = time.perf_counter() - start
            print(f"Start-up: the first page shows its title {titled:.2f} s, its first chart (the architecture "
                  f"diagram, SVG) {shown:.2f} s and its first Plotly chart {plotted:.2f} s after `streamlit run` "
                  "(target: first chart <= 4 s)")
            memory = proc_memory(pid)
            print(f"Memory with the model loaded (first page): RSS {memory['VmRSS']:.0f} MB")
            if cold:  # a session's true first visits: nothing cached yet but the model (and the first page)
                page_switches(browser.new_page(viewport={"width": 1400, "height": 1000}), url, query)
                return
            runs = RunWatcher(page)
            for name in page_files()[1:]:  # each page once in its own session: the shared caches fill
                path = name.split("_", 1)[1].removesuffix(".py")
                runs.wait_quiet(page, 0.3)
                started = runs.started
                opened = time.perf_counter()
                page.goto(f"{url}/{path}{query}", wait_until="domcontentloaded")
                runs.wait_for_run(page, started, timeout_s=300)
                page.evaluate("() => { window.__settleCount = -1; }")
                page.wait_for_function(SETTLED, timeout=120_000, polling=25)
                first = time.perf_counter() - opened - 0.15
                memory = proc_memory(pid)
                print(f"  {path}: opened in a new session, nothing of it cached, settled in {first:.2f} s; server "
                      f"RSS {memory['VmRSS']:.0f} MB, peak {memory['VmHWM']:.0f} MB")
            explain_clicks(browser.new_page(viewport={"width": 1400, "height": 1000}), url, query=query)
            page_switches(browser.new_page(viewport={"width": 1400, "height": 1000}), url, query)
            memory = proc_memory(pid)
            weights = sum(f.stat().st_size for f in (models_dir / model).glob("*")
                          if f.suffix in (".safetensors", ".bin", ".pt")) / 2**20
            print(f"Memory after opening every page once: RSS {memory['VmRSS']:.0f} MB, peak "
                  f"{memory['VmHWM']:.0f} MB (the weights' files: {weights:.0f} MB; target < 1024 MB for the "
                  "shipped models, the weights + 1.5 GB at NLLB size)")
    except ServerError as error:
        raise SystemExit(str(error)) from None
    finally:
        if browser is not None:
            browser.close()
            playwright.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models-dir", default=str(ROOT / "pretrained"), help="folder of checkpoint folders")
    parser.add_argument("--model", help="which of them (default: the first by name)")
    parser.add_argument("--repeats", type=int, default=10, help="warm reruns timed per page")
    parser.add_argument("--no-browser", action="store_true", help="skip the chromium part of the start-up figure")
    parser.add_argument("--cold", action="store_true",
                        help="time the page switches first, before any page was opened (true first visits)")
    parser.add_argument("--text", help="the input sentence, given in every page's link (a Hugging Face model "
                        "other than opus-mt-en-* comes without examples: its input starts empty)")
    parser.add_argument("--server-log", type=Path, help="write the server's output to this file")
    parser.add_argument("--skip-apptest", action="store_true",
                        help="skip the AppTest reruns (at NLLB size each page's cold run loads a second copy of the "
                             "model into this process)")
    parser.add_argument("--presentation", action="store_true",
                        help="time the warm reruns in presentation mode, and skip the browser part")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)  # like one busy server core; the figures are per rerun, not per core
    models_dir = Path(args.models_dir)
    names = sorted(p.name for p in models_dir.iterdir() if (p / "config.json").is_file()) if models_dir.is_dir() \
        else []
    if not names:
        models_dir = stand_in_models(Path(tempfile.mkdtemp(prefix="bench-app-")))
        names = ["stand-in-numbers"]
        print(f"No shipped model in {args.models_dir}: using a random stand-in of train.py's default size")
    model = args.model or names[0]
    if model not in names:
        raise SystemExit(f"no model {model!r} in {models_dir}; there are: {', '.join(names)}")
    os.environ[MODELS_DIR_ENV] = str(models_dir)

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"Model: {model} ({models_dir / model}); {args.repeats} warm reruns per page, torch threads 1; "
          f"{os.cpu_count()} cores, load average {load:.1f}")
    if not args.skip_apptest:
        print(f"\n{'page':<22}{'cold ms':>10}{'warm median ms':>17}{'warm best ms':>15}")
        for page, cold, median, best in warm_reruns(model, args.repeats, args.presentation):
            flag = "" if median <= 150 else "  > 150 ms"
            print(f"{page:<22}{cold:>10.0f}{median:>17.0f}{best:>15.0f}{flag}")
    if args.presentation:
        return

    use_browser = not args.no_browser and Path(CHROMIUM).exists()
    if not use_browser and not args.no_browser:
        print(f"\n{CHROMIUM} missing: start-up is measured up to the health check only")
    server_figures(models_dir, model, use_browser, args.cold, args.server_log, args.text)


if __name__ == "__main__":
    main()
