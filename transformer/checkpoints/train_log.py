"""The training log of a checkpoint folder: one JSON object per line, appended as training goes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .errors import CheckpointError

LOG_FILE = "train_log.jsonl"


def append_log(folder: str | os.PathLike, record: dict[str, Any]) -> None:
    """Add one line to the training log (one JSON object per line)."""
    with open(Path(folder) / LOG_FILE, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, default=_json_default) + "\n")


def read_log(folder: str | os.PathLike) -> list[dict[str, Any]]:
    """The training log's records in order; [] when there is no log.

    A last line cut short (the run was killed mid-write) is dropped; any other bad line
    raises ``CheckpointError``.
    """
    path = Path(folder) / LOG_FILE
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):
                break
            raise _log_error(f"{path}: line {number} is not valid JSON") from None
        if not isinstance(record, dict):
            raise _log_error(f"{path}: line {number} is not a JSON object")
        records.append(record)
    return records


def _log_error(message: str) -> ValueError:
    return CheckpointError(message)


def _json_default(value: Any) -> Any:
    """Paths and numpy/torch scalars in a record become plain JSON."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"cannot store {type(value).__name__} in the training log")
