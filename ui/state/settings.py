"""The names and limits the app's modules share: folders, environment variables, session_state and widget keys."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # ui/state/settings.py -> the repository
MODELS_DIR_ENV = "TRANSFORMER_APP_MODELS_DIR"  # a folder of checkpoint folders; default ROOT/pretrained
RUNS_DIR_ENV = "TRANSFORMER_APP_RUNS_DIR"  # where runs started on the Training page are written; default ROOT/runs/app
THREADS_ENV = "TRANSFORMER_APP_THREADS"  # torch CPU threads of the server process; default 1 (see ui/models/menu.py)
# Public mode (ui/state/public.py, docs/app.md "Public mode"): safe in front of an audience.
PUBLIC_ENV = "TRANSFORMER_APP_PUBLIC"  # 1: no "Open a folder", uploads off, runs owned by their session
PUBLIC_UPLOADS_ENV = "TRANSFORMER_APP_PUBLIC_UPLOADS"  # 1: public mode keeps the (capped) uploads
OPEN_ROOTS_ENV = "TRANSFORMER_APP_OPEN_ROOTS"  # more folders "Open a folder" may open, os.pathsep-separated
MAX_TRAININGS_ENV = "TRANSFORMER_APP_MAX_TRAININGS"  # trainings at once, server-wide; default 1 public, 2 else
RUNS_PER_SESSION_ENV = "TRANSFORMER_APP_RUNS_PER_SESSION"  # public mode: runs one session keeps; default 3
HEAVY_WORKERS_ENV = "TRANSFORMER_APP_HEAVY_WORKERS"  # heavy computations at once; default 1 public, unbounded else
RUN_SLOTS_ENV = "TRANSFORMER_APP_RUN_SLOTS"  # script runs that compute at once (ui/state/run_slots.py)
HEAVY_SECONDS_ENV = "TRANSFORMER_APP_HEAVY_SECONDS"  # one heavy computation's time; default 180 s public, none else
HEAVY_WAIT_ENV = "TRANSFORMER_APP_HEAVY_WAIT_SECONDS"  # the longest wait for the heavy pool; default 3 x its time
UPLOADS_PER_SESSION_ENV = "TRANSFORMER_APP_UPLOADS_PER_SESSION"  # public mode: uploaded models a session keeps; 3
UPLOAD_MB_PER_SESSION_ENV = "TRANSFORMER_APP_UPLOAD_MB_PER_SESSION"  # public mode: their MB on disk; 300

# Plain session_state keys: the choices, shared by every page of one browser session.
MODEL, TEXT, DEVICE = "model", "input_text", "device"
CHAT = "chat"  # a decoder-only model with a chat template: the prompt goes through the template (also a link param)
SESSION_MODELS = "session_models"  # label -> ModelEntry: models trained or uploaded in this session
LAST_TRAINED = "last_trained_model"  # the menu label of the latest run registered in this session
# Widget keys (tests use them to find the widgets).
MODEL_WIDGET, TEXT_WIDGET, EXAMPLE_WIDGET, DEVICE_WIDGET, UPLOAD_WIDGET = (
    "model_select", "text_input", "example_select", "device_select", "checkpoint_upload")
OPEN_WIDGET, OPEN_BUTTON = "open_folder_path", "open_folder_button"  # a model folder on the server's disk
CHAT_WIDGET = "chat_toggle"

MAX_UPLOAD_BYTES = 100 * 2**20  # a shipped checkpoint is a few MB
MAX_EXTRACTED_BYTES = 300 * 2**20
MAX_ZIP_ENTRIES = 1000
MAX_INPUT_CHARS = 500
N_EXAMPLES = 8
RECORD_TOP_K = 8  # next-token candidates recorded per decoding step, by greedy, beam search and sampling alike


def models_dir() -> Path:
    """Where the shipped checkpoint folders are: $TRANSFORMER_APP_MODELS_DIR or pretrained/."""
    return Path(os.environ.get(MODELS_DIR_ENV) or ROOT / "pretrained")


def runs_dir() -> Path:
    """Where the Training page writes its runs: $TRANSFORMER_APP_RUNS_DIR or runs/app."""
    return Path(os.environ.get(RUNS_DIR_ENV) or ROOT / "runs" / "app")


def torch_threads() -> int:
    """The server's torch CPU threads: $TRANSFORMER_APP_THREADS (a positive integer) or 1."""
    value = os.environ.get(THREADS_ENV, "")
    return int(value) if value.isdigit() and int(value) > 0 else 1


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _positive(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else default


def public() -> bool:
    """Whether the app runs in public mode: $TRANSFORMER_APP_PUBLIC is 1 (read on every call)."""
    return _flag(PUBLIC_ENV)


def uploads_allowed() -> bool:
    """Whether the sidebar and pages offer uploads: always outside public mode; in it, only with
    $TRANSFORMER_APP_PUBLIC_UPLOADS=1 (and then under the same caps)."""
    return not public() or _flag(PUBLIC_UPLOADS_ENV)


def open_roots() -> list[Path]:
    """The folders under which "Open a folder" may open a model folder, resolved: the models folder, the runs
    folder and those listed in $TRANSFORMER_APP_OPEN_ROOTS (none in public mode, where the widget is gone)."""
    if public():
        return []
    listed = [Path(p).expanduser() for p in os.environ.get(OPEN_ROOTS_ENV, "").split(os.pathsep) if p.strip()]
    return [p.resolve() for p in (models_dir(), runs_dir(), *listed)]


def max_trainings() -> int:
    """Training runs at once on this server: $TRANSFORMER_APP_MAX_TRAININGS, else 1 in public mode and 2
    outside it; the others wait in a queue (ui/models/training_job.py)."""
    return _positive(MAX_TRAININGS_ENV, 1 if public() else 2)


def runs_per_session() -> int:
    """Public mode: the runs one session keeps ($TRANSFORMER_APP_RUNS_PER_SESSION, default 3); its oldest
    go when it starts another."""
    return _positive(RUNS_PER_SESSION_ENV, 3)


def heavy_workers() -> int:
    """How many heavy computations (ui/compute/shared_work.py) run at once, server-wide, one per session:
    $TRANSFORMER_APP_HEAVY_WORKERS, else 1 in public mode; 0 (no pool) outside it."""
    return _positive(HEAVY_WORKERS_ENV, 1 if public() else 0)


def run_slots() -> int:
    """How many script runs compute at once, server-wide (ui/state/run_slots.py): $TRANSFORMER_APP_RUN_SLOTS,
    else the machine's cores (at least 2)."""
    return _positive(RUN_SLOTS_ENV, max(2, os.cpu_count() or 1))


def heavy_seconds() -> int:
    """How long one heavy computation (ui/compute/shared_work.py) may run before it is cut:
    $TRANSFORMER_APP_HEAVY_SECONDS, else 180 s in public mode; 0 (no limit) outside it."""
    return _positive(HEAVY_SECONDS_ENV, 180 if public() else 0)


def heavy_wait_seconds() -> int:
    """The longest a session waits for a place in the heavy pool (ui/compute/pool.py) before it is told to try
    later: $TRANSFORMER_APP_HEAVY_WAIT_SECONDS, else three of ``heavy_seconds()`` (0, no bound, where that is 0)."""
    return _positive(HEAVY_WAIT_ENV, 3 * heavy_seconds())


def uploads_per_session() -> int:
    """The uploaded models one session keeps on the server's disk (ui/models/uploads.py; its oldest go first):
    $TRANSFORMER_APP_UPLOADS_PER_SESSION, else 3 in public mode; 0 (no cap) outside it."""
    return _positive(UPLOADS_PER_SESSION_ENV, 3 if public() else 0)


def upload_bytes_per_session() -> int:
    """The bytes one session's uploaded models may take on the server's disk, unpacked (its oldest go first):
    $TRANSFORMER_APP_UPLOAD_MB_PER_SESSION MB, else one upload's cap (``MAX_EXTRACTED_BYTES``, 300 MB) in public
    mode; 0 (no cap) outside it."""
    return _positive(UPLOAD_MB_PER_SESSION_ENV, MAX_EXTRACTED_BYTES // 2**20 if public() else 0) * 2**20
