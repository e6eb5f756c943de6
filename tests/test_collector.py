"""The server's garbage collector (ui/state/collector.py): after the app's first run a full collection walks the
app's own objects, not the libraries' hundreds of thousands (each full collection stopped the server's event loop
for 0.3-1.3 s in the load test). Run in fresh processes: the freeze is process-wide and must not reach pytest's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ui.state import settings

ROOT = Path(__file__).resolve().parent.parent
FROZEN_AT_LEAST = 150_000  # the libraries' objects (about 200,000; 260,000 with Streamlit's)
WALKED_AFTER_FREEZE = 60_000  # objects a full collection may still walk


def _python(code: str, env: dict[str, str] | None = None) -> list[str]:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=180,
                          env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.split()


def test_freeze_libraries_freezes_once_and_leaves_little_to_walk() -> None:
    code = ("import gc; from ui.state import collector; first = collector.freeze_libraries(); "
            "second = collector.freeze_libraries(); print(first, second, gc.get_freeze_count(), len(gc.get_objects()))")
    first, second, frozen, walked = _python(code)
    assert (first, second) == ("True", "False")
    assert int(frozen) > FROZEN_AT_LEAST, "torch, pandas, pyarrow and Plotly are imported before the freeze"
    assert int(walked) < WALKED_AFTER_FREEZE


def test_the_apps_first_run_freezes_the_libraries(tiny_models_dir: Path) -> None:
    """app.py as the server runs it: after its first run the objects a full collection walks are few."""
    code = ("import gc; from streamlit.testing.v1 import AppTest; "
            "at = AppTest.from_file('app.py', default_timeout=120).run(); "
            "assert not at.exception, [e.value for e in at.exception]; "
            "print(gc.get_freeze_count(), len(gc.get_objects()))")
    frozen, walked = map(int, _python(code, {settings.MODELS_DIR_ENV: str(tiny_models_dir)}))
    assert frozen > FROZEN_AT_LEAST
    assert walked < WALKED_AFTER_FREEZE
