"""What the server's garbage collector walks (ui/state/collector.py): after the app's runs a full collection walks
the app's own objects, not the libraries' hundreds of thousands (each full collection stopped the server's event
loop for 0.3-1.3 s in the load test). Run in fresh processes: a freeze is process-wide and must not reach pytest's."""

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


def test_freeze_imports_freezes_the_libraries_then_only_after_new_imports() -> None:
    code = ("import gc, sys, types; from ui.state import collector; first = collector.freeze_imports(); "
            "frozen, walked = gc.get_freeze_count(), len(gc.get_objects()); again = collector.freeze_imports(); "
            "few = [sys.modules.setdefault(f'_new{i}', types.ModuleType(f'_new{i}')) for i in range(10)]; "
            "after_few = collector.freeze_imports(); "
            "many = [sys.modules.setdefault(f'_new{i}', types.ModuleType(f'_new{i}')) for i in range(60)]; "
            "print(first, again, after_few, collector.freeze_imports(), frozen, walked)")
    first, again, after_few, after_many, frozen, walked = _python(code)
    assert (first, again, after_few, after_many) == ("True", "False", "False", "True")
    assert int(frozen) > FROZEN_AT_LEAST, "torch, pandas, pyarrow and Plotly are imported before the freeze"
    assert int(walked) < WALKED_AFTER_FREEZE


def test_the_apps_runs_leave_few_objects_to_walk_and_freeze_only_after_imports(tiny_models_dir: Path) -> None:
    """app.py as the server runs it (every run starts there): after its first run, and after the Explain page
    (which imports more: Captum among it on the shipped models) and another run, the objects a full collection
    walks are few; a run that imports nothing new freezes nothing more. (AppTest runs a switched-to page
    directly, not through app.py, so each visit here is a new session, whose first run goes through app.py.)"""
    code = ("import gc; from streamlit.testing.v1 import AppTest; from ui.state import collector; "
            "app = lambda: AppTest.from_file('app.py', default_timeout=120); "
            "first = app().run(); frozen, walked = gc.get_freeze_count(), len(gc.get_objects()); "
            "explain = app(); explain.switch_page('pages/5_explain.py'); explain.run(); "
            "third = app().run(); modules = collector._modules_at_freeze; walked_after = len(gc.get_objects()); "
            "fourth = app().run(); "
            "assert not any(at.exception for at in (first, explain, third, fourth)); "
            "print(frozen, walked, walked_after, modules == collector._modules_at_freeze)")
    frozen, walked, walked_after_explain, nothing_more = _python(code, {settings.MODELS_DIR_ENV: str(tiny_models_dir)})
    assert int(frozen) > FROZEN_AT_LEAST
    assert int(walked) < WALKED_AFTER_FREEZE
    assert int(walked_after_explain) < WALKED_AFTER_FREEZE
    assert nothing_more == "True"
