"""Five browsers on one server at once, as in a lecture: one trains a model, the others switch models
and inputs and walk through pages. Nothing may raise, no session may see another's model, text or
results, and the server stays under 1.5 GB (its peak resident memory, VmHWM, read from /proc).

The shipped models of pretrained/ are served (the real sizes), with a temporary runs folder.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from devserver import ServerError, chromium, require_chromium, serve, settle, start_training

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
EXCEPTION = "[data-testid=stException]"
CHART = "[data-testid=stPlotlyChart] .js-plotly-plot .main-svg"
TIMEOUT_MS = 120_000
MAX_SERVER_MB = 1536
# session -> (model in the menu, its own input); the pages each one walks through
SESSIONS = [("numbers-en-de", "forty-two"), ("dates-de", "2021-03-04"), ("reverse", "hello"),
            ("sentences-en-de", "the dog sleeps")]
PAGES = ["attention", "explain", "embeddings", "decoding"]  # each session ends on Decoding: its greedy output

require_chromium()


def peak_megabytes(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        with serve(ROOT / "pretrained", tmp_path_factory.mktemp("runs"),
                   log_path=ARTIFACTS / "streamlit-sessions.log") as running:
            yield running
    except ServerError as error:
        pytest.fail(str(error))


@pytest.fixture(scope="module")
def browser() -> Iterator:
    with chromium() as launched:
        yield launched


def choose_model(page, label: str) -> None:
    page.locator("[data-testid=stSidebar] [data-testid=stSelectbox]").filter(has_text="Model").first.click()
    page.get_by_role("option", name=label, exact=True).click()


def type_input(page, text: str) -> None:
    box = page.get_by_role("textbox", name="Input sentence")
    box.fill(text)
    box.press("Enter")


def test_five_sessions_at_once_keep_their_own_state(server, browser) -> None:
    from transformer.pipeline import load_pretrained

    expected = {model: load_pretrained(ROOT / "pretrained" / model).translate(text)
                for model, text in SESSIONS}
    contexts = [browser.new_context(viewport={"width": 1300, "height": 900}) for _ in range(5)]
    pages = [context.new_page() for context in contexts]
    trainer, viewers = pages[0], pages[1:]
    try:
        start_training(trainer, server.url)
        for page in viewers:  # all four open the app at once
            page.goto(f"{server.url}/attention", wait_until="domcontentloaded")
        for page, (model, _) in zip(viewers, SESSIONS, strict=True):
            page.locator(CHART).first.wait_for(state="visible", timeout=TIMEOUT_MS)
            settle(page)
            choose_model(page, model)
        for page, (_, text) in zip(viewers, SESSIONS, strict=True):
            settle(page)
            type_input(page, text)
        for name in PAGES:  # every session moves on without waiting for the others
            for page in viewers:
                settle(page)
                page.locator("[data-testid=stSidebarNav] a", has_text=name.capitalize()).first.click()
        for page, (model, text) in zip(viewers, SESSIONS, strict=True):
            settle(page)
            page.locator(CHART).first.wait_for(state="visible", timeout=TIMEOUT_MS)
            assert page.locator(EXCEPTION).count() == 0, page.locator(EXCEPTION).first.inner_text()
            sidebar = page.locator("[data-testid=stSidebar]")
            assert sidebar.get_by_role("combobox", name="Model").input_value() == model
            assert page.get_by_role("textbox", name="Input sentence").input_value() == text
            # its own results: the greedy translation of its own input by its own model
            greedy = page.locator("[data-testid=stMain] [data-testid=stCode]").first.inner_text().strip()
            assert greedy == (expected[model] or "(empty)"), (model, text, greedy)
        trainer.get_by_text("Finished: step", exact=False).first.wait_for(timeout=TIMEOUT_MS)
        settle(trainer)
        assert trainer.locator(EXCEPTION).count() == 0, trainer.locator(EXCEPTION).first.inner_text()
        for i, page in enumerate(pages):
            page.screenshot(path=str(ARTIFACTS / f"sessions-{i}.png"), full_page=True)
    finally:
        for context in contexts:
            context.close()
    peak = peak_megabytes(server.process.pid)
    print(f"server peak memory: {peak:.0f} MB")
    assert peak < MAX_SERVER_MB
