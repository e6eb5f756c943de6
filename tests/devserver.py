"""Test tooling: serve the app for the browser tests and the benchmark (`streamlit run app.py` on a free
localhost port, waited for until /_stcore/health answers, stopped on exit); how chromium is launched for
them; ``require_chromium``, which skips the browser tests on a machine without chromium but fails them
in CI (``CI`` set in the environment, as .ci/run does), where chromium is installed on purpose; and the browser
steps the session test and the load benchmark share (``settle``, ``start_training``).

Imports only the standard library and ``ui.state.settings`` (no Streamlit, no torch), so a script
can start the server before it pays for those imports.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ui.state.settings import MODELS_DIR_ENV, ROOT, RUNS_DIR_ENV

APP = ROOT / "app.py"
CHROMIUM = "/usr/bin/chromium"  # Debian's chromium; Playwright's own browser download is not used
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", "--disable-sync"]
@contextmanager
def chromium() -> Iterator:
    """Debian's chromium, headless, through Playwright; closed on exit."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def require_chromium() -> None:
    """Skip the calling test module when chromium is missing, or fail it in CI (where .ci/run installs it)."""
    import pytest

    if Path(CHROMIUM).exists():
        return
    message = f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium) to run the browser tests"
    if os.environ.get("CI"):
        pytest.fail(f"{message}; CI installs it, so its absence is an error here", pytrace=False)
    pytest.skip(message, allow_module_level=True)


START_TIMEOUT = 60.0  # seconds until /_stcore/health must answer


class ServerError(RuntimeError):
    """The server exited or did not answer in time; the message holds the end of its log."""


@dataclass(frozen=True)
class Server:
    url: str  # http://127.0.0.1:PORT
    process: subprocess.Popen


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


@contextmanager
def serve(models_dir: Path | str | None = None, runs_dir: Path | str | None = None, *, log_path: Path | None = None,
          timeout: float = START_TIMEOUT, script: Path = APP) -> Iterator[Server]:
    """The app (or another Streamlit ``script``, run from its own folder: another checkout's app reads its own
    ``.streamlit/config.toml``) served on a free port, ready (health answers) when this yields; stopped afterwards.

    ``models_dir``/``runs_dir`` set the app's folders (``ui.state.settings``) for the server; its output
    goes to ``log_path`` (default: a temporary file). Raises ``ServerError`` if it exits or does not
    answer within ``timeout`` seconds.
    """
    env = dict(os.environ)
    if models_dir is not None:
        env[MODELS_DIR_ENV] = str(models_dir)
    if runs_dir is not None:
        env[RUNS_DIR_ENV] = str(runs_dir)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(log_path, "w+b") if log_path is not None else tempfile.TemporaryFile()
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(script), "--server.headless", "true", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
        cwd=Path(script).resolve().parent, env=env, stdout=log, stderr=subprocess.STDOUT,
    )

    def failure(what: str) -> ServerError:
        log.flush()
        log.seek(0)
        tail = log.read().decode(errors="replace")[-4000:]
        where = f" (log: {log_path})" if log_path is not None else ""
        return ServerError(f"streamlit {what}{where}:\n{tail}")

    try:
        deadline = time.monotonic() + timeout
        while not _healthy(url):
            if process.poll() is not None:
                raise failure(f"exited with {process.returncode}")
            if time.monotonic() > deadline:
                raise failure(f"did not answer within {timeout:.0f} s")
            time.sleep(0.05)
        yield Server(url, process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


BROWSER_TIMEOUT_MS = 120_000
# true once the page's status widget shows no script run in progress
IDLE = ("() => { const w = document.querySelector('[data-testid=stStatusWidget]');"
        " return !w || !w.querySelector('[data-testid^=stStatusWidgetRunning]'); }")


def settle(page, timeout_ms: int = BROWSER_TIMEOUT_MS) -> None:  # noqa: ANN001 (a Playwright page)
    """Wait until the page's script run has started and ended."""
    page.wait_for_timeout(300)  # the rerun starts
    page.wait_for_function(IDLE, timeout=timeout_ms)


def start_training(page, url: str) -> None:  # noqa: ANN001
    """Start the Training page's default task (reverse) for 10 s instead of 60: the slider moved by keyboard."""
    page.goto(f"{url}/training", wait_until="domcontentloaded")
    page.get_by_role("button", name="Train", exact=True).wait_for(timeout=BROWSER_TIMEOUT_MS)
    settle(page)
    seconds = page.get_by_role("slider", name="Train for (seconds)")
    seconds.focus()
    seconds.press("Home")  # 3 s
    for _ in range(7):
        seconds.press("ArrowRight")
    settle(page)
    page.get_by_role("button", name="Train", exact=True).click()
