"""Presentation mode on a projector, measured in chromium: every page opened by a link with ``present=1``
at 1280×720 and 1024×768 (one server on the shipped models of pretrained/, one browser, the pages in
turn). On every page the sidebar is collapsed, the link still carries ``present=1``, no chart text is
drawn under 14 px, and every Plotly chart is at least ``MIN_CHART_PX`` wide.

The size of a text is what the eye gets: its computed font size times the scale of its transforms
(Plotly shrinks a bar's value to fit its bar with a ``scale()``, which the computed font size does not
show). Every Plotly chart counts, not just a page's first: a column holding a chart is never narrower
than 560 px in presentation mode (ui/state/presentation.py, style_page), so two charts side by side at 1280 px (600 px
each) stack at 1024 px, each the full width (964 px). The architecture diagram (an SVG, not Plotly)
is measured for its text too. No two tick labels of a chart overlap, here and in the normal mode at 1280 px
(``test_no_tick_labels_overlap_at_1280_px``). The figures go to test-artifacts/projector-WxH.json with full-page
screenshots projector-WxH-PAGE.png.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from devserver import ServerError, chromium, require_chromium, serve

from ui.figures.projector import MIN_FONT_PX
from ui.state.presentation import LINK_PARAM, MIN_CHART_PX

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
EXCEPTION = "[data-testid=stException]"
VIEW = "model=reverse&text=abc123"  # a shipped model: the real sizes of its charts
LONG_VIEW = "model=sentences-en-de&text=the+old+dog+sleeps+because+the+young+man+sees+the+green+cat"
PAGES = ["", "embeddings", "attention", "explain", "heads", "patching", "masks", "decoding", "training"]
SIZES = [(1280, 720), (1024, 768)]
TIMEOUT_S = 90.0
IDLE_JS = ("() => { const w = document.querySelector('[data-testid=stStatusWidget]');"
           " return !w || !w.querySelector('[data-testid^=stStatusWidgetRunning]'); }")
# The page's state: a run has finished when it stays the same over a pause (right after a link opens, the
# status widget may not say "running" yet).
STATE_JS = """() => [document.querySelectorAll('.js-plotly-plot .main-svg').length,
  document.querySelectorAll('[data-testid=stMain] *').length, document.querySelector('h1')?.innerText || '']"""
# Per chart (a Plotly chart or the architecture diagram): its width and every text smaller than MIN_FONT_PX.
CHARTS_JS = """(minimum) => Array.from(document.querySelectorAll(
    '[data-testid=stPlotlyChart], svg.architecture-diagram')).flatMap(chart => {
  const box = chart.getBoundingClientRect();
  if (box.width === 0 || box.height === 0) return [];
  const plot = chart.querySelector('.js-plotly-plot');
  const texts = chart.querySelectorAll(plot ? '.main-svg text' : 'text');
  let smallest = null;
  const small = [];
  for (const el of texts) {
    const text = el.textContent.trim(), r = el.getBoundingClientRect();
    if (!text || r.width === 0 || r.height === 0) continue;
    const m = el.getScreenCTM();
    const size = parseFloat(getComputedStyle(el).fontSize) * (m ? Math.hypot(m.a, m.b) : 1);
    smallest = smallest === null ? size : Math.min(smallest, size);
    if (size < minimum - 0.05) small.push(size.toFixed(1) + ' px: ' + text.slice(0, 24));
  }
  const title = plot && plot._fullLayout.title ? (plot._fullLayout.title.text || '') : 'architecture';
  return [{chart: title.replace(/<[^>]+>/g, '').slice(0, 40), plotly: !!plot, width: Math.round(box.width),
           texts: texts.length, smallest_px: smallest === null ? null : Math.round(smallest * 10) / 10,
           small: small.slice(0, 8)}];
})"""
# Per Plotly chart: pairs of tick labels of one axis that overlap. Each label's box is turned as drawn (its
# getBBox through its screen matrix, so upright and 30-degree labels count as they look); two boxes overlap
# when they do by more than 2 px along every separating axis (the separating axis theorem).
OVERLAP_JS = """() => {
  const quad = el => { const b = el.getBBox(), m = el.getScreenCTM(); if (!m || !b.width) return null;
    return [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]]
      .map(([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]); };
  const depth = (p, q) => { let least = Infinity;
    for (const poly of [p, q]) for (let i = 0; i < 4; i++) {
      const [x1, y1] = poly[i], [x2, y2] = poly[(i + 1) % 4], len = Math.hypot(x2 - x1, y2 - y1) || 1;
      const nx = -(y2 - y1) / len, ny = (x2 - x1) / len;
      const pr = poly2 => poly2.map(([x, y]) => x * nx + y * ny);
      const a = pr(p), b = pr(q);
      least = Math.min(least, Math.min(Math.max(...a), Math.max(...b)) - Math.max(Math.min(...a), Math.min(...b)));
    } return least; };
  return Array.from(document.querySelectorAll('[data-testid=stPlotlyChart] .js-plotly-plot')).map(plot => {
    const title = (plot._fullLayout.title && plot._fullLayout.title.text || '').replace(/<[^>]+>/g, '').slice(0, 50);
    const out = [];
    for (const layer of plot.querySelectorAll('.xaxislayer-above, .yaxislayer-above')) {
      const boxes = Array.from(layer.querySelectorAll('text')).filter(t => t.textContent.trim())
        .map(t => [t.textContent, quad(t)]).filter(b => b[1]);
      for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++)
        if (depth(boxes[i][1], boxes[j][1]) > 2) out.push(boxes[i][0] + ' / ' + boxes[j][0]);
    }
    const titles = (plot._fullLayout.annotations || []).map((a, i) => [a, i])  // panel titles (make_subplots')
      .filter(([a]) => a.yref === 'paper' && a.yanchor === 'bottom')
      .map(([a, i]) => plot.querySelector(`.infolayer .annotation[data-index="${i}"] .annotation-text`))
      .filter(Boolean).map(t => [t.textContent, quad(t)]).filter(b => b[1]);
    for (let i = 0; i < titles.length; i++) for (let j = i + 1; j < titles.length; j++)
      if (depth(titles[i][1], titles[j][1]) > 2) out.push('titles ' + titles[i][0] + ' / ' + titles[j][0]);
    return {title, width: Math.round(plot.getBoundingClientRect().width), overlaps: out.length,
            examples: out.slice(0, 3)};
  });
}"""
SIDEBAR_RIGHT_JS = "() => document.querySelector('[data-testid=stSidebar]').getBoundingClientRect().right"

require_chromium()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        with serve(ROOT / "pretrained", tmp_path_factory.mktemp("runs"),
                   log_path=ARTIFACTS / "streamlit-projector.log") as running:
            yield running.url
    except ServerError as error:
        pytest.fail(str(error))


@pytest.fixture(scope="module")
def browser() -> Iterator:
    with chromium() as launched:
        yield launched


def settle(page, timeout_s: float = TIMEOUT_S) -> None:
    """Until the script run has finished and the page stays the same for half a second."""
    import time

    deadline = time.monotonic() + timeout_s
    before = None
    while time.monotonic() < deadline:
        page.wait_for_function(IDLE_JS, timeout=timeout_s * 1000)
        state = page.evaluate(STATE_JS)
        if state == before and state[0] > 0:
            return
        before = state
        page.wait_for_timeout(500)
    raise AssertionError(f"{page.url} did not settle in {timeout_s:.0f} s")


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_presentation_link_shows_every_page_readably_on_a_projector(server: str, browser, size) -> None:
    width, height = size
    context = browser.new_context(viewport={"width": width, "height": height})  # a new session: the link's mode
    page = context.new_page()
    measured, problems = {}, []
    try:
        for path in PAGES:
            name = path or "model"
            page.goto(f"{server}/{path}?{VIEW}&{LINK_PARAM}=1", wait_until="domcontentloaded")
            page.locator(f"[data-testid=stPlotlyChart] .main-svg, {EXCEPTION}").first.wait_for(
                state="visible", timeout=TIMEOUT_S * 1000)
            settle(page)
            page.screenshot(path=str(ARTIFACTS / f"projector-{width}x{height}-{name}.png"), full_page=True)
            if page.locator(EXCEPTION).count():
                problems.append(f"{name}: exception {page.locator(EXCEPTION).first.inner_text()[:200]}")
            if f"{LINK_PARAM}=1" not in page.url:
                problems.append(f"{name}: the link lost {LINK_PARAM}=1: {page.url}")
            if page.evaluate(SIDEBAR_RIGHT_JS) > 0:
                problems.append(f"{name}: the sidebar is open")
            charts = measured[name] = page.evaluate(CHARTS_JS, MIN_FONT_PX)
            if not any(chart["plotly"] for chart in charts):
                problems.append(f"{name}: no Plotly chart drawn")
            for chart in charts:
                if chart["small"]:
                    problems.append(f"{name} / {chart['chart']}: text under {MIN_FONT_PX} px: {chart['small']}")
                if chart["plotly"] and chart["width"] < MIN_CHART_PX:
                    problems.append(f"{name} / {chart['chart']}: {chart['width']} px wide < {MIN_CHART_PX}")
            problems += overlapping_labels(page, name)
    finally:
        (ARTIFACTS / f"projector-{width}x{height}.json").write_text(json.dumps(measured, indent=1))
        context.close()
    assert not problems, "\n".join(problems)


def overlapping_labels(page, name: str) -> list[str]:
    return [f"{name} / {chart['title'] or 'chart'} ({chart['width']} px): {chart['overlaps']} overlapping tick "
            f"labels, e.g. {chart['examples']}" for chart in page.evaluate(OVERLAP_JS) if chart["overlaps"]]


def test_no_tick_labels_overlap_at_1280_px(server: str, browser) -> None:
    """Every page in the normal mode at 1280x720, sidebar open, on the sentences model with a long sentence (tick
    labels, and the panel titles of a figure of panels):
    Explain's small multiples (a quarter of the page), the Masks panels and the half-page charts drew their
    token labels over each other before ``ui.figures.crowding`` (issue 23)."""
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    problems: list[str] = []
    try:
        for path in PAGES:
            page.goto(f"{server}/{path}?{LONG_VIEW}", wait_until="domcontentloaded")
            page.locator(f"[data-testid=stPlotlyChart] .main-svg, {EXCEPTION}").first.wait_for(
                state="visible", timeout=TIMEOUT_S * 1000)
            settle(page)
            problems += overlapping_labels(page, path or "model")
    finally:
        context.close()
    assert not problems, "\n".join(problems)
