"""In chromium: a figure baked by ui.figures.house_style and sent with ``theme=None`` looks exactly as Streamlit's
own theme draws it (pixel for pixel), in the normal and the presentation view. The reference is Streamlit
itself: a small script draws the app's chart functions both ways on one page. Should Streamlit change its
theme, this fails and the values in house_style must be read again from the browser.

(That the app's charts arrive baked, on every page, is checked in tests/test_browser.py.)"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from devserver import CHROMIUM, CHROMIUM_ARGS, ServerError, require_chromium, serve

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
# The two charts stand at different heights of the page, so the anti-aliasing of a sloped line or a colour bar's
# gradient may differ: a few hundred pixels by up to ~10 levels (of 255). A colour of the theme missed changes
# thousands (a grid of #eeeeee for #e6eaf1: 8 levels along every grid line), a size or a position shifts text
# and lines by far more.
NOISE_LEVELS, MAX_NOISY_PIXELS, MAX_LEVELS = 2, 400, 32
require_chromium()

SCRIPT = """
import sys
sys.path.insert(0, {root!r})
import numpy as np
import streamlit as st
from ui.charts.decoding import top_k_chart, top_k_frame
from ui.charts.embeddings import positional_heatmap
from ui.figures import side_by_side
from ui.figures.house_style import baked
from ui.figures.margins import fit_margins
from ui.figures.projector import for_projector
from ui.charts.masks import mask_heatmap
from ui.charts.model import parameter_chart
from ui.charts.training import lr_schedule_chart, lr_schedule_frame
from ui.state.presentation import PAGE_FONT_PX, PRESENTATION, style_page

present = st.query_params.get("present") == "1"
st.session_state[PRESENTATION] = present
style_page()
tokens = ["The", "cat", "sat", "</s>", "<pad>"]
figures = [
    parameter_chart({{"src_embed": 2752, "encoder": 100096, "decoder": 133632, "generator": 43}}),
    top_k_chart(top_k_frame(np.array([14, 2, 30]), np.array([0.9, 0.06, 0.04]), lambda i: f"t{{i}}", chosen=14)),
    positional_heatmap(np.sin(np.arange(20)[:, None] / 10000 ** (np.arange(32)[None, :] / 32))),
    lr_schedule_chart(lr_schedule_frame(64, 400, 4000), warmup_steps=400),
    side_by_side([mask_heatmap(np.tril(np.ones((5, 5))), tokens, tokens, title=f"mask {{i}}") for i in range(3)],
                 cols=3),
]
for i, fig in enumerate(figures):
    fig = for_projector(fig) if present else fit_margins(fig)
    st.plotly_chart(fig, key=f"themed{{i}}")
    st.plotly_chart(baked(fig, PAGE_FONT_PX / 16 if present else 1.0), key=f"baked{{i}}", theme=None)
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    script = tmp_path_factory.mktemp("house_style") / "both_ways.py"
    script.write_text(SCRIPT.format(root=str(ROOT)))
    try:
        with serve(script=script) as running:
            yield running.url
    except ServerError as error:
        pytest.fail(str(error))


@pytest.mark.parametrize("query", ["", "?present=1"], ids=["normal", "presentation"])
def test_a_baked_chart_is_drawn_exactly_as_streamlits_theme_draws_it(server: str, query: str) -> None:
    from PIL import Image, ImageChops
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(server + "/" + query, wait_until="domcontentloaded")
            charts = page.locator("[data-testid=stPlotlyChart]")
            charts.nth(9).locator(".main-svg").first.wait_for(timeout=60_000)
            page.wait_for_timeout(1500)  # the themed charts' second drawing
            page.mouse.move(0, 0)
            shots = []
            for i in range(charts.count()):
                charts.nth(i).scroll_into_view_if_needed()
                page.mouse.move(0, 0)
                shots.append(Image.open(io.BytesIO(charts.nth(i).screenshot())).convert("RGB"))
            drawn = page.evaluate("() => [...document.querySelectorAll('.js-plotly-plot')].map(g => "
                                  "g.layout.template === undefined ? 'baked' : 'themed')")
        finally:
            browser.close()
    assert drawn == ["themed", "baked"] * 5
    for i in range(0, len(shots), 2):
        themed, baked = shots[i], shots[i + 1]
        assert themed.size == baked.size, f"figure {i // 2}: {themed.size} vs {baked.size}"
        difference = ImageChops.difference(themed, baked).convert("L")  # in grey levels
        levels = difference.histogram()
        noisy, largest = sum(levels[NOISE_LEVELS + 1:]), max((v for v, n in enumerate(levels) if n), default=0)
        box = difference.getbbox() if noisy > MAX_NOISY_PIXELS or largest > MAX_LEVELS else None
        if box is not None:
            ARTIFACTS.mkdir(exist_ok=True)
            both = Image.new("RGB", (themed.width, 2 * themed.height))
            both.paste(themed, (0, 0))
            both.paste(baked, (0, themed.height))
            both.save(ARTIFACTS / f"house_style_{i // 2}{'_present' if query else ''}.png")  # themed above
        assert box is None, f"figure {i // 2} ({query or 'normal'}) differs from Streamlit's theme: {noisy} pixels, " \
                            f"up to {largest}/255, within {box} (test-artifacts/house_style_*.png: themed above)"
