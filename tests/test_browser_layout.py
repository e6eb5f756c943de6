"""Nothing cramped or clipped (issue 45), measured in chromium at 1280×800, in the normal view (sidebar open) and in
presentation mode: on the pages of the sentences model with a sentence of twelve source tokens (heatmaps of about
eleven columns, in half a page and in panels), the Decoding page's beam tree of a long sentence, T5's Embeddings
and Model pages, the sidebar of two multilingual models (NLLB, mBART-50) and every page of a decoder-only model
(a tiny Gemma-2, issue 41), no text is clipped and no label overlaps another element. From the DOM: no element that
hides or scrolls what overflows it holds text or a formula wider than itself (a menu's "eng_Latn (", a formula cut at
a column's edge; a data grid, drawn on a canvas, scrolls its columns with a scroll bar: the Model page's parameters
are a static table now), and widgets side by side have labels of one height (a label on two lines put its menu lower
than its neighbour's).
From each Plotly chart's rendered SVG (each text's box turned as drawn, ``test_browser_projector.OVERLAP_JS``'s
separating axis test): no two texts overlap (numbers written into each other's cells, a legend over an axis title),
no tick label, axis title or legend entry lies over a plot area (a panel's row labels over its left neighbour), and
no text reaches past the figure or, for text drawn in a plot (a beam tree's labels), past its plot, where Plotly cuts
it. Every problem is listed with the view, the chart and the texts; screenshots go to
test-artifacts/layout-VIEW[-present].png.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from devserver import ServerError, chromium, require_chromium, serve

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
EXCEPTION = "[data-testid=stException]"
SIZE = {"width": 1280, "height": 800}
TIMEOUT_S = 120.0
TOLERANCE_PX = 2  # overlaps and overflows up to this are rounding (KaTeX's display box is 2 px wider than its row)
# Two texts' boxes: an SVG text's box spans its font's whole ascent and descent, about 2 px beyond the glyphs at
# top and bottom, so boxes that meet by up to 4 px leave the glyphs apart (a figure's title over its first panel's).
TEXT_OVER_TEXT_PX = 4
TWELVE = "model=sentences-en-de&text=the+old+dog+sleeps+because+the+man+sees+the+cat"  # 12 source tokens
LONG = "model=sentences-en-de&text=the+old+dog+sleeps+because+the+young+man+sees+the+green+cat"
LM = "model=tiny-gemma2&text=When+Mary+and+Tom+went+to+the+store,+Tom+gave+a+drink+to"  # a decoder-only model
VIEWS = {  # name -> page and link
    "model": ("", TWELVE), "attention": ("attention", TWELVE), "explain": ("explain", TWELVE),
    "patching": ("patching", TWELVE), "masks": ("masks", TWELVE), "decoding": ("decoding", TWELVE),
    "decoding-long": ("decoding", LONG), "t5-embeddings": ("embeddings", "model=tiny-t5"),
    "t5-model": ("", "model=tiny-t5"), "nllb-sidebar": ("tokenization", "model=tiny-nllb"),
    "mbart50-sidebar": ("tokenization", "model=tiny-mbart50&src_lang=fr_XX&tgt_lang=et_EE"),
    **{f"lm-{page or 'model'}": (page, LM) for page in ("", "tokenization", "embeddings", "attention", "explain",
                                                         "heads", "patching", "masks", "decoding")},
}
IDLE_JS = ("() => { const w = document.querySelector('[data-testid=stStatusWidget]');"
           " return !w || !w.querySelector('[data-testid^=stStatusWidgetRunning]'); }")
STATE_JS = """() => [document.querySelectorAll('.js-plotly-plot .main-svg').length,
  document.querySelectorAll('[data-testid=stMain] *').length, document.querySelector('h1')?.innerText || '']"""

# DOM: elements that cut (hidden, clip, ellipsis) or scroll (auto, scroll) what overflows them, holding text or a
# formula wider than themselves; and widgets side by side whose labels differ in height. A collapsed
# sidebar (presentation mode) is not looked at.
DOM_JS = """(tolerance) => {
  const out = [];
  const sidebar = document.querySelector('[data-testid=stSidebar]');
  const roots = [document.querySelector('[data-testid=stMain]')];
  if (sidebar && sidebar.getBoundingClientRect().right > 0) roots.push(sidebar);
  for (const root of roots) {
    const where = root.dataset.testid === 'stSidebar' ? 'sidebar' : 'page';
    for (const el of root.querySelectorAll('*')) {
      if (el.closest('svg') || el.closest('.js-plotly-plot') || el.closest('.katex-mathml')) continue;
      const style = getComputedStyle(el);
      const cuts = ['hidden', 'clip', 'auto', 'scroll'].includes(style.overflowX) || style.textOverflow === 'ellipsis';
      if (!cuts || el.clientWidth === 0 || el.scrollWidth <= el.clientWidth + tolerance) continue;
      // a menu's choice is the value of its input (a text box's own input scrolls what is typed: not looked at)
      const menu = el.tagName === 'INPUT' && el.getAttribute('role') === 'combobox';
      if (el.tagName === 'INPUT' && !menu) continue;
      const text = (menu ? el.value : el.innerText || '').trim().replace(/\\s+/g, ' ');
      const formula = el.querySelector('.katex-html');
      if (!text && !formula) continue;  // a data grid (a canvas) scrolls its columns with a scroll bar, by design
      out.push(`${where}: ${formula ? 'formula' : 'text'} "${text.slice(0, 40)}" is cut: ` +
               `${el.scrollWidth} px wide in ${el.clientWidth} px`);
    }
    for (const row of root.querySelectorAll('[data-testid=stHorizontalBlock]')) {
      const labels = Array.from(row.querySelectorAll(':scope > [data-testid=stColumn]')).map(column =>
        column.querySelector('[data-testid=stWidgetLabel]')).filter(Boolean).map(l => [l.innerText.trim(),
        l.getBoundingClientRect()]).filter(([, r]) => r.height > 0);
      for (const [text, r] of labels.slice(1))
        if (Math.abs(r.top - labels[0][1].top) <= tolerance && Math.abs(r.height - labels[0][1].height) > tolerance)
          out.push(`${where}: labels side by side of different heights: "${labels[0][0]}" ` +
                   `${Math.round(labels[0][1].height)} px, "${text}" ${Math.round(r.height)} px`);
    }
  }
  return out;
}"""

# Plotly: per chart, its texts (hover labels aside) as turned boxes, its plot areas (the drag rectangles), the
# figure's box; then text over text, a label over a plot area, and text past the figure or, in a plot, past it.
PLOTLY_JS = """([tolerance, textTolerance]) => {
  const quad = el => { const b = el.getBBox(), m = el.getScreenCTM(); if (!m || !b.width || !b.height) return null;
    return [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]]
      .map(([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]); };
  const depth = (p, q) => { let least = Infinity;
    for (const poly of [p, q]) for (let i = 0; i < 4; i++) {
      const [x1, y1] = poly[i], [x2, y2] = poly[(i + 1) % 4], len = Math.hypot(x2 - x1, y2 - y1) || 1;
      const nx = -(y2 - y1) / len, ny = (x2 - x1) / len;
      const a = p.map(([x, y]) => x * nx + y * ny), b = q.map(([x, y]) => x * nx + y * ny);
      least = Math.min(least, Math.min(Math.max(...a), Math.max(...b)) - Math.max(Math.min(...a), Math.min(...b)));
    } return least; };
  const rectQuad = r => [[r.left, r.top], [r.right, r.top], [r.right, r.bottom], [r.left, r.bottom]];
  const inside = (q, r) => q.every(([x, y]) => x >= r.left - tolerance && x <= r.right + tolerance &&
                                            y >= r.top - tolerance && y <= r.bottom + tolerance);
  const out = [];
  for (const plot of document.querySelectorAll('[data-testid=stPlotlyChart] .js-plotly-plot')) {
    const title = ((plot._fullLayout.title && plot._fullLayout.title.text) || 'chart').replace(/<[^>]+>/g, '')
      .slice(0, 40);
    const figure = plot.querySelector('.main-svg').getBoundingClientRect();
    const areas = Array.from(plot.querySelectorAll('.draglayer .nsewdrag')).map(r => r.getBoundingClientRect());
    const texts = [];
    for (const el of plot.querySelectorAll('.main-svg text')) {
      const text = el.textContent.trim(), q = quad(el);
      if (!text || !q || el.closest('.hoverlayer')) continue;
      const kind = el.closest('.xaxislayer-above, .yaxislayer-above') ? 'tick' :
        el.closest('.g-xtitle, .g-ytitle, [class^=g-x], [class^=g-y]') ? 'axis title' :
        el.closest('.legend') ? 'legend' : el.closest('.textpoint') ? 'in-plot' : 'other';
      texts.push({text, q, kind});
    }
    for (let i = 0; i < texts.length; i++) for (let j = i + 1; j < texts.length; j++) {
      const by = depth(texts[i].q, texts[j].q);
      if (by > textTolerance) out.push(`${title}: "${texts[i].text}" over "${texts[j].text}" by ${by.toFixed(1)} px`);
    }
    for (const t of texts) {
      if (['tick', 'axis title', 'legend'].includes(t.kind) && areas.some(a => depth(t.q, rectQuad(a)) > tolerance))
        out.push(`${title}: ${t.kind} "${t.text}" over a plot area`);
      if (!inside(t.q, figure)) out.push(`${title}: "${t.text}" past the figure's edge`);
      if (t.kind === 'in-plot') {
        const [cx, cy] = [t.q.reduce((s, p) => s + p[0], 0) / 4, t.q.reduce((s, p) => s + p[1], 0) / 4];
        const area = areas.find(a => cx >= a.left && cx <= a.right && cy >= a.top && cy <= a.bottom);
        if (!area || !inside(t.q, area)) out.push(`${title}: "${t.text}" cut at its plot's edge`);
      }
    }
  }
  return out;
}"""

require_chromium()


@pytest.fixture(scope="module")
def models_dir(family_tokenizers: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped models, tiny T5, NLLB and mBART-50 folders and a tiny Gemma-2 (a decoder-only model: grouped
    key/value heads, a sliding window on alternate layers), in one models folder."""
    from family_app_folders import build_family_folder
    from lm_folders import build_lm_folder

    root = tmp_path_factory.mktemp("layout-models")
    for folder in (ROOT / "pretrained").iterdir():
        if (folder / "config.json").exists():
            shutil.copytree(folder, root / folder.name)
    for layout in ("t5", "nllb", "mbart50"):
        build_family_folder(root, layout, family_tokenizers[layout], name=f"tiny-{layout}")
    build_lm_folder("gemma2", root).rename(root / "tiny-gemma2")
    return root


@pytest.fixture(scope="module")
def server(models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        with serve(models_dir, tmp_path_factory.mktemp("runs"), log_path=ARTIFACTS / "streamlit-layout.log") as running:
            yield running.url
    except ServerError as error:
        pytest.fail(str(error))


@pytest.fixture(scope="module")
def browser() -> Iterator:
    with chromium() as launched:
        yield launched


def settle(page, timeout_s: float = TIMEOUT_S) -> None:
    """Until the script run has finished and the page stays the same for a second."""
    import time

    deadline = time.monotonic() + timeout_s
    before = None
    while time.monotonic() < deadline:
        page.wait_for_function(IDLE_JS, timeout=timeout_s * 1000)
        state = page.evaluate(STATE_JS)
        if state == before:
            return
        before = state
        page.wait_for_timeout(1000)
    raise AssertionError(f"{page.url} did not settle in {timeout_s:.0f} s")


@pytest.mark.parametrize("present", [False, True], ids=["normal", "presentation"])
def test_no_text_is_clipped_and_no_label_overlaps_another_element(server: str, browser, present: bool) -> None:
    context = browser.new_context(viewport=SIZE)
    page = context.new_page()
    problems: list[str] = []
    try:
        for name, (path, query) in VIEWS.items():
            page.goto(f"{server}/{path}?{query}{'&present=1' if present else ''}", wait_until="domcontentloaded")
            page.locator(f"h1, {EXCEPTION}").first.wait_for(state="visible", timeout=TIMEOUT_S * 1000)
            settle(page)
            page.screenshot(path=str(ARTIFACTS / f"layout-{name}{'-present' if present else ''}.png"), full_page=True)
            if page.locator(EXCEPTION).count():
                problems.append(f"{name}: exception {page.locator(EXCEPTION).first.inner_text()[:200]}")
            problems += [f"{name}: {problem}" for problem in page.evaluate(DOM_JS, TOLERANCE_PX)]
            drawn = page.evaluate(PLOTLY_JS, [TOLERANCE_PX, TEXT_OVER_TEXT_PX])
            problems += [f"{name}: {problem}" for problem in drawn]
    finally:
        context.close()
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:60])
