"""How many script runs compute at once (ui/state/run_slots.py): a run beyond the slots waits, without the GIL,
until one ends; waiting work gives its slot back. Threads stand in for Streamlit's script threads, in a fresh
process so that the slots are sized by the environment given."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from ui.state import settings

ROOT = Path(__file__).resolve().parent.parent

CODE = """
import threading, time
from ui.state import run_slots
started, go = [], threading.Event()

def run(name, wait_inside=False):
    with run_slots.slot():
        started.append(name)
        if wait_inside:
            with run_slots.released():  # e.g. following another run's shared work
                go.wait()
        else:
            go.wait()

threads = [threading.Thread(target=run, args=("a",)), threading.Thread(target=run, args=("b",)),
           threading.Thread(target=run, args=("c",))]
for t in threads:
    t.start()
time.sleep(0.5)
print("before", sorted(started))  # two slots: the third run waits
go.set()
for t in threads:
    t.join(5)
print("after", sorted(started))
started.clear(); go.clear()
threads = [threading.Thread(target=run, args=(n, True)) for n in "xyz"]
for t in threads:
    t.start()
time.sleep(0.5)
print("released", sorted(started))  # runs that wait without computing leave their slot to the others
go.set()
for t in threads:
    t.join(5)
print("free", run_slots._SLOTS._value, getattr(run_slots._HELD, "slot", False))
"""


def test_runs_beyond_the_slots_wait_and_waiting_work_gives_its_slot_back() -> None:
    done = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, cwd=ROOT, timeout=60,
                          env={**os.environ, settings.RUN_SLOTS_ENV: "2"})
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("before [") and len(ast.literal_eval(lines[0][len("before "):])) == 2  # any two
    assert lines[1] == "after ['a', 'b', 'c']"
    assert lines[2] == "released ['x', 'y', 'z']"
    assert lines[3] == "free 2 False"  # every slot back


def test_the_default_is_the_cores(monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.delenv(settings.RUN_SLOTS_ENV, raising=False)
    assert settings.run_slots() == max(2, os.cpu_count() or 1)
    monkeypatch.setenv(settings.RUN_SLOTS_ENV, "3")
    assert settings.run_slots() == 3
