"""The server's GIL switch interval (ui/state/gil.py): app.py shortens it once, in the server's process. Run in a
fresh process: the setting is process-wide and must not reach pytest's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ui.state import gil, settings

ROOT = Path(__file__).resolve().parent.parent


def test_shorten_switch_interval_acts_once() -> None:
    code = ("import sys; from ui.state import gil; before = sys.getswitchinterval(); "
            "first = gil.shorten_switch_interval(); "
            "print(before, first, gil.shorten_switch_interval(), sys.getswitchinterval())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    before, first, second, after = done.stdout.split()
    assert float(before) == 0.005 and (first, second) == ("True", "False") and float(after) == gil.SWITCH_INTERVAL_S


def test_the_apps_first_run_shortens_it(tiny_models_dir: Path) -> None:
    code = ("import sys; from streamlit.testing.v1 import AppTest; "
            "at = AppTest.from_file('app.py', default_timeout=120).run(); assert not at.exception; "
            "print(sys.getswitchinterval())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=180,
                          env={**os.environ, settings.MODELS_DIR_ENV: str(tiny_models_dir)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert float(done.stdout.split()[-1]) == gil.SWITCH_INTERVAL_S
