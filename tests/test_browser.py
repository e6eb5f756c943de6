"""The app in a real browser: `streamlit run app.py` on the tiny checkpoints of conftest.py, Debian's
chromium driven by Playwright; every page must draw its main chart without an exception box.
Screenshots go to test-artifacts/ (gitignored).

Needs /usr/bin/chromium (`apt-get install chromium`, done by .ci/run) and the playwright package
(requirements-dev.txt); Playwright's own browser download is not used.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from devserver import CHROMIUM, CHROMIUM_ARGS, ServerError, require_chromium, serve

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
# url path (st.navigation infers it from the file name; the first page is the root) -> what must be drawn
PAGES = {
    "": "svg.architecture-diagram",  # 1 model: the diagram (SVG, drawn before the model is loaded)
    "tokenization": "[data-testid=stDataFrame]",  # 2: chips and tables, no plotly chart
    "embeddings": "[data-testid=stPlotlyChart] .js-plotly-plot",
    "attention": "[data-testid=stPlotlyChart] .js-plotly-plot",
    "explain": "[data-testid=stPlotlyChart] .js-plotly-plot",
    "heads": "[data-testid=stPlotlyChart] .js-plotly-plot",
    "patching": "[data-testid=stPlotlyChart] .js-plotly-plot",
    "masks": "[data-testid=stPlotlyChart] .js-plotly-plot",
    "decoding": "[data-testid=stPlotlyChart] .js-plotly-plot",
    "training": "[data-testid=stPlotlyChart] .js-plotly-plot",
}
EXCEPTION = "[data-testid=stException]"
# Charts whose margins Plotly had to grow, i.e. lay out twice: ui.figures.margins estimates them beforehand.
GROWN_MARGINS_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).flatMap(g => {
  const set = g.layout.margin || {}, size = g._fullLayout._size;
  const grown = ['l', 'r', 'b'].filter(s => size[s] > (set[s] === undefined ? 80 : set[s]) + 0.5);
  const title = (g._fullLayout.title && g._fullLayout.title.text) || '';
  const what = grown.map(s => s + ' ' + set[s] + ' -> ' + size[s]).join(', ');
  return grown.length ? [title.slice(0, 40) + ': ' + what] : [];
})"""
# Charts that reach the browser with a template or without a fixed data revision: Streamlit's mount effect then
# redraws them in full (ui.figures.house_style). Every chart of the app comes from the figure cache, baked.
THEMED_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).flatMap(g =>
  g.layout.template === undefined && g.layout.datarevision === 'baked' ? [] :
    [((g._fullLayout.title && g._fullLayout.title.text) || '').slice(0, 40) || 'untitled'])"""
PAGE_TIMEOUT_MS = 45_000

require_chromium()


@pytest.fixture(scope="module")
def server(tiny_models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The app served on a free localhost port; its log is in test-artifacts/streamlit.log."""
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        with serve(tiny_models_dir, tmp_path_factory.mktemp("runs"), log_path=ARTIFACTS / "streamlit.log") as running:
            yield running.url
    except ServerError as error:
        pytest.fail(str(error))


@pytest.fixture(scope="module")
def browser_page(server: str):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
        page = context.new_page()
        try:
            yield page
        finally:
            context.close()
            browser.close()


def wait_until_idle(page, timeout_ms: int = PAGE_TIMEOUT_MS) -> None:
    """Until Streamlit's "running" indicator (the word, or in 1.67 an icon next to "Stop") is gone: the
    script run has finished."""
    page.wait_for_function(
        "() => { const widget = document.querySelector('[data-testid=stStatusWidget]');"
        " return !widget || (!widget.innerText.includes('Running')"
        " && !widget.querySelector('[data-testid^=stStatusWidgetRunning]')); }",
        timeout=timeout_ms,
    )


@pytest.mark.parametrize("path", list(PAGES), ids=[p or "model" for p in PAGES])
def test_page_draws_its_main_chart(server: str, browser_page, path: str) -> None:
    page = browser_page
    page.goto(f"{server}/{path}", wait_until="domcontentloaded")
    # the main chart, or an exception box: whichever comes first (a broken page fails at once)
    drawn = page.locator(f"{PAGES[path]}, {EXCEPTION}").filter(visible=True)
    drawn.first.wait_for(state="visible", timeout=PAGE_TIMEOUT_MS)
    wait_until_idle(page)
    page.wait_for_timeout(500)  # let plotly finish drawing before the screenshot
    page.screenshot(path=str(ARTIFACTS / f"page-{path or 'model'}.png"), full_page=True)
    exceptions = page.locator(EXCEPTION)
    assert exceptions.count() == 0, exceptions.first.inner_text()
    assert page.locator(PAGES[path]).filter(visible=True).count() >= 1
    assert page.locator("[data-testid=stSidebar]").is_visible()
    assert page.evaluate(GROWN_MARGINS_JS) == []  # every chart laid out once
    assert page.evaluate(THEMED_JS) == []  # and drawn once (ui.figures.house_style)


def test_decoding_next_button_moves_the_step(server: str, browser_page) -> None:
    page = browser_page
    page.goto(f"{server}/decoding", wait_until="domcontentloaded")
    page.locator(PAGES["decoding"]).filter(visible=True).first.wait_for(state="visible", timeout=PAGE_TIMEOUT_MS)
    wait_until_idle(page)
    page.get_by_role("button", name="Next ▶").click()
    page.get_by_text("Decoder input at step 2").wait_for(timeout=PAGE_TIMEOUT_MS)
    wait_until_idle(page)
    page.screenshot(path=str(ARTIFACTS / "decoding-step-2.png"), full_page=True)
    assert page.locator(EXCEPTION).count() == 0


def test_clicking_a_head_opens_it_on_the_attention_page(server: str, browser_page) -> None:
    page = browser_page
    page.goto(f"{server}/heads", wait_until="domcontentloaded")
    grid = page.locator(PAGES["heads"]).filter(visible=True).first
    grid.wait_for(state="visible", timeout=PAGE_TIMEOUT_MS)
    wait_until_idle(page)
    points = grid.locator(".scatterlayer .point")
    assert points.count() == 20  # tiny-numbers, the first model: 4 heads x (1 encoder + 2 decoder + 2 cross) layers
    points.last.click(force=True)  # the last trace drawn is the last role's last head
    page.locator("h1", has_text="Attention").wait_for(timeout=PAGE_TIMEOUT_MS)
    wait_until_idle(page)
    assert "/attention?" in page.url and "kind=cross" in page.url and "layer=1" in page.url and "head=3" in page.url
    assert page.locator(EXCEPTION).count() == 0
    page.locator("[data-testid=stSidebarNav] a", has_text="heads").first.click()  # and back: no redirect loop
    page.locator("h1", has_text="What does each head do?").wait_for(timeout=PAGE_TIMEOUT_MS)
    wait_until_idle(page)
    page.wait_for_timeout(1000)
    assert "/heads?" in page.url or page.url.endswith("/heads")


SMALL_TEXT_JS = """() => {
  const small = [];
  for (const el of document.querySelectorAll('[data-testid=stPlotlyChart] svg text')) {
    const text = el.textContent.trim();
    const box = el.getBoundingClientRect();
    if (!text || box.width === 0 || box.height === 0) continue;
    const size = parseFloat(getComputedStyle(el).fontSize);
    if (size < 14) small.push(`${size}px: ${text.slice(0, 30)}`);
  }
  return small;
}"""


def test_presentation_mode_has_no_chart_text_under_14px(server: str, browser_page) -> None:
    """The sidebar's switch turns presentation mode on and collapses the sidebar; then every page in
    presentation mode, opened by its link (one session): screenshots, no chart text smaller than 14 px,
    every chart laid out once. (tests/test_browser_projector.py measures the shipped models at 1280 x 720
    and 1024 x 768.)"""
    context = browser_page.context.browser.new_context(viewport={"width": 1400, "height": 1000})  # a new session
    page = context.new_page()
    try:
        page.goto(server, wait_until="domcontentloaded")
        page.locator(PAGES[""]).filter(visible=True).first.wait_for(state="visible", timeout=PAGE_TIMEOUT_MS)
        wait_until_idle(page)
        page.get_by_text("Presentation mode").click()
        wait_until_idle(page)
        page.wait_for_function("() => document.querySelector('[data-testid=stSidebar]')"
                               ".getBoundingClientRect().right <= 0", timeout=PAGE_TIMEOUT_MS)  # collapsed
        assert "present=1" in page.url
        for path in PAGES:
            name = path or "model"
            page.goto(f"{server}/{path}?present=1", wait_until="domcontentloaded")
            page.locator(f"{PAGES[path]}, {EXCEPTION}").filter(visible=True).first.wait_for(
                state="visible", timeout=PAGE_TIMEOUT_MS)
            wait_until_idle(page)
            page.wait_for_timeout(800)  # plotly draws after the run
            page.screenshot(path=str(ARTIFACTS / f"present-{name}.png"), full_page=True)
            assert page.locator(EXCEPTION).count() == 0, name
            small = page.evaluate(SMALL_TEXT_JS)
            assert not small, f"{name}: {small[:10]}"
            assert page.evaluate(GROWN_MARGINS_JS) == [], name
    finally:
        context.close()


def test_a_link_opens_its_view_and_a_clicked_row_is_selected_on_decoding(server: str, browser_page) -> None:
    """A link restores model, kind, layer and head; clicking a row of the weights heatmap selects that
    output token, which the Decoding page opens at (ui/state/links.py, ui/state/selection.py)."""
    page = browser_page
    page.goto(f"{server}/attention?model=tiny-numbers&text=seven&kind=cross&layer=1&head=2",
              wait_until="domcontentloaded")
    heat = page.locator("[data-testid=stPlotlyChart]").filter(visible=True).first
    heat.locator(".js-plotly-plot .main-svg").first.wait_for(state="visible", timeout=PAGE_TIMEOUT_MS)
    wait_until_idle(page)
    assert page.locator(EXCEPTION).count() == 0
    sidebar = page.locator("[data-testid=stSidebar]")
    assert sidebar.get_by_role("combobox", name="Model").input_value() == "tiny-numbers"
    assert page.get_by_role("textbox", name="Input sentence").input_value() == "seven"
    for text in ("Cross-attention", "head 2"):
        assert page.locator("[data-testid=stMain]").get_by_text(text).count() >= 1
    assert "kind=cross" in page.url and "head=2" in page.url and "layer=1" in page.url
    cells = heat.locator(".scatterlayer .point")
    cells.nth(cells.count() // 2).click(force=True)  # a cell of a middle row: a middle decoder position
    page.wait_for_timeout(300)
    wait_until_idle(page)
    chosen = int(re.search(r"[?&]query=(\d+)", page.url).group(1))
    assert chosen >= 1
    assert page.get_by_role("combobox", name="Selected query").input_value().startswith(f"{chosen}:")
    page.locator("[data-testid=stSidebarNav] a", has_text="Decoding").first.click()
    page.get_by_text("Decoder input at step").first.wait_for(timeout=PAGE_TIMEOUT_MS)
    wait_until_idle(page)
    assert f"step={chosen + 1}" in page.url
    assert page.locator(EXCEPTION).count() == 0


NAV_JS = "() => [...document.querySelectorAll('[data-testid=stSidebarNav] a')].map(a => a.innerText.trim())"


def test_a_fresh_servers_first_link_opens_through_app_py(tiny_models_dir: Path, tmp_path: Path, browser_page) -> None:
    """Streamlit treats an app with a pages/ folder as a file-based app until a run calls st.navigation: a link
    opened before anyone opened / ran the page without app.py, and every browser then got the file names as
    navigation ("app", "attention", ...). The page reruns through app.py (ui/state/routing.py): the app's
    titles, the link's view kept, for this browser and the next."""
    with serve(tiny_models_dir, tmp_path / "runs", log_path=ARTIFACTS / "streamlit-fresh.log") as fresh:
        page = browser_page.context.new_page()
        page.goto(f"{fresh.url}/attention?model=tiny-numbers&text=seven&kind=cross&layer=1&head=2",
                  wait_until="domcontentloaded")
        page.locator(PAGES["attention"]).filter(visible=True).first.wait_for(state="visible",
                                                                              timeout=PAGE_TIMEOUT_MS)
        wait_until_idle(page)
        titles = [title.split("\n")[-1] for title in page.evaluate(NAV_JS)]
        assert titles[:4] == ["Model", "Tokenization", "Embeddings and positions", "Attention"], titles
        assert page.locator("[data-testid=stSidebar]").get_by_role("combobox", name="Model").input_value() == \
            "tiny-numbers"
        assert "kind=cross" in page.url and "head=2" in page.url and "layer=1" in page.url
        assert page.locator("[data-testid=stMain]").get_by_text("head 2").count() >= 1
        other = browser_page.context.new_page()
        other.goto(f"{fresh.url}/masks", wait_until="domcontentloaded")
        other.locator(PAGES["masks"]).filter(visible=True).first.wait_for(state="visible", timeout=PAGE_TIMEOUT_MS)
        wait_until_idle(other)
        assert "Masks" in [title.split("\n")[-1] for title in other.evaluate(NAV_JS)]
        assert page.locator(EXCEPTION).count() == 0 and other.locator(EXCEPTION).count() == 0
        page.close()
        other.close()


def test_back_restores_the_previous_view_and_a_rerun_adds_no_history(server: str, browser_page) -> None:
    """The URL is written only where it changes (each write is a history entry), and a query that differs
    from the one the app wrote (the Back button) is followed like a link."""
    page = browser_page.context.new_page()  # a fresh tab: the module's page has a full history (at most 50)
    page.goto(f"{server}/attention?model=tiny-reverse&text=abc12&kind=encoder", wait_until="domcontentloaded")
    page.locator(PAGES["attention"]).filter(visible=True).first.wait_for(state="visible", timeout=PAGE_TIMEOUT_MS)
    wait_until_idle(page)
    page.wait_for_timeout(300)
    before = page.evaluate("() => history.length")
    page.get_by_text("Decoder masked self-attention").click()
    page.wait_for_timeout(300)
    wait_until_idle(page)
    assert "kind=decoder" in page.url
    assert page.evaluate("() => history.length") == before + 1  # one change, one entry
    page.go_back()
    page.wait_for_timeout(500)
    wait_until_idle(page)
    assert "kind=encoder" in page.url
    assert page.get_by_role("radio", name="Encoder self-attention").is_checked()
    assert page.locator(EXCEPTION).count() == 0
    page.close()


def test_a_csv_download_is_written_when_clicked(browser_page, server: str) -> None:
    """CSV buttons hand Streamlit a callable (a deferred download, written on click, not on every rerun):
    the click still downloads the table."""
    page = browser_page
    page.goto(f"{server}/masks?model=tiny-reverse&text=abc12", wait_until="domcontentloaded")
    button = page.locator("[data-testid=stDownloadButton] button").first
    button.wait_for(state="visible", timeout=PAGE_TIMEOUT_MS)
    with page.expect_download(timeout=PAGE_TIMEOUT_MS) as info:
        button.click()
    text = Path(info.value.path()).read_text(encoding="utf-8")
    assert info.value.suggested_filename.endswith(".csv") and text.count("\n") > 2, text[:200]
