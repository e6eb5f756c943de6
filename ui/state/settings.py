"""The names and limits the app's modules share: folders, environment variables, session_state and widget keys."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # ui/state/settings.py -> the repository
MODELS_DIR_ENV = "TRANSFORMER_APP_MODELS_DIR"  # a folder of checkpoint folders; default ROOT/pretrained
RUNS_DIR_ENV = "TRANSFORMER_APP_RUNS_DIR"  # where runs started on the Training page are written; default ROOT/runs/app
THREADS_ENV = "TRANSFORMER_APP_THREADS"  # torch CPU threads of the server process; default 1 (see ui/models/menu.py)

# Plain session_state keys: the choices, shared by every page of one browser session.
MODEL, TEXT, DEVICE = "model", "input_text", "device"
SESSION_MODELS = "session_models"  # label -> ModelEntry: models trained or uploaded in this session
LAST_TRAINED = "last_trained_model"  # the menu label of the latest run registered in this session
# Widget keys (tests use them to find the widgets).
MODEL_WIDGET, TEXT_WIDGET, EXAMPLE_WIDGET, DEVICE_WIDGET, UPLOAD_WIDGET = (
    "model_select", "text_input", "example_select", "device_select", "checkpoint_upload")
OPEN_WIDGET, OPEN_BUTTON = "open_folder_path", "open_folder_button"  # a model folder on the server's disk

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
