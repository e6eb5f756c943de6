"""Models trained in the app, kept across reloads: listed, renamed, deleted, downloaded, bounded in number.

Every run of the Training page writes a checkpoint folder under ``settings.runs_dir()`` (a name,
the time and a random suffix). Those folders are the record: a reloaded browser (a new session)
finds them again through ``saved_runs``, so a trained model is not lost with its session. A run's
display name lives in ``run.json`` beside the checkpoint (written atomically); renaming never
moves the folder, so the caches keyed by it stay valid. The runs folder is shared by every
session of the server: this is a local teaching tool, and the Training page says so.
``bound_runs`` keeps at most ``MAX_RUNS`` of them, removing the oldest first, never one that is
still being written.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from transformer.checkpoint import CONFIG_FILE, OPTIMIZER_FILE, WEIGHTS_FILE, read_config
from ui.state.settings import runs_dir

RUN_FILE = "run.json"  # {"name": ...}: what the menu calls the run
MAX_RUNS = 20  # kept in runs_dir(); the oldest go first
MAX_NAME_CHARS = 60
_FOLDER_TIME = re.compile(r"-(\d{8}-\d{6})-[0-9a-f]+$|-(\d{8}-\d{6})-\d{3}$")


@dataclass(frozen=True)
class SavedRun:
    """One finished run's folder, what to call it, and facts for the table."""

    folder: Path
    name: str
    task: str
    parameters: int
    steps: int
    created: float  # seconds since the epoch (the folder's modification time)
    megabytes: float
    run_id: str = ""  # "reverse-1124-0933": stable, from the folder (``run_id``); links name the run by it

    @property
    def label(self) -> str:
        """The model menu's label, which links carry: the run id, after the name a user gave it, if any."""
        run_id = self.run_id or run_id_of(self.folder)
        return run_id if self.name == _default_name(self.folder) else f"{self.name} ({run_id})"


def _default_name(folder: Path) -> str:
    """The name the Training page gave the run: its folder name without the time and the suffix."""
    return _FOLDER_TIME.sub("", folder.name) or folder.name


def run_id_of(folder: Path) -> str:
    """A run's stable name from its folder: the task or name, then the month-day and hour-minute it
    started (``reverse-20261124-093312-ab12cd34`` -> ``reverse-1124-0933``). It never changes, so a
    link that names it restores the run after a reload or a server restart."""
    match = _FOLDER_TIME.search(folder.name)
    if match is None:
        return folder.name
    stamp = match.group(1) or match.group(2)  # YYYYMMDD-HHMMSS
    return f"{_default_name(folder)}-{stamp[4:8]}-{stamp[9:13]}"


def _unique_ids(runs: list[SavedRun]) -> list[SavedRun]:
    """Two runs of one name started in the same minute: the later ones get the second too."""
    seen: set[str] = set()
    unique = []
    for run in sorted(runs, key=lambda r: (r.created, r.folder.name)):
        run_id = run_id_of(run.folder)
        if run_id in seen:
            match = _FOLDER_TIME.search(run.folder.name)
            run_id = f"{run_id}{(match.group(1) or match.group(2))[13:15]}" if match else run.folder.name
            if run_id in seen:
                run_id = run.folder.name
        seen.add(run_id)
        unique.append(dataclasses.replace(run, run_id=run_id))
    return unique


def _size_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20


def saved_runs(directory: Path | None = None) -> list[SavedRun]:
    """Every complete run (config.json and model.safetensors present) under ``directory``, newest first."""
    directory = runs_dir() if directory is None else directory
    if not directory.is_dir():
        return []
    runs = []
    for folder in directory.iterdir():
        if not (folder / CONFIG_FILE).is_file() or not (folder / WEIGHTS_FILE).is_file():
            continue  # still being written, or not a run
        try:
            config, meta = read_config(folder)
        except ValueError:
            continue
        name = _default_name(folder)
        try:
            name = str(json.loads((folder / RUN_FILE).read_text(encoding="utf-8"))["name"]) or name
        except (OSError, ValueError, KeyError, TypeError):
            pass
        runs.append(SavedRun(folder.resolve(), name, str(meta.get("task", "custom")), int(meta.get("parameters", 0)),
                             int(meta.get("step", 0)), (folder / WEIGHTS_FILE).stat().st_mtime, _size_mb(folder)))
    return sorted(_unique_ids(runs), key=lambda run: run.created, reverse=True)


def check_name(name: str) -> str:
    """A run name, stripped; ValueError for an empty or too long name or one with separators or control characters."""
    name = (name or "").strip()
    if not name:
        raise ValueError("a run needs a name")
    if len(name) > MAX_NAME_CHARS:
        raise ValueError(f"a run name has at most {MAX_NAME_CHARS} characters, this one {len(name)}")
    if any(c in name for c in "/\\") or any(ord(c) < 32 for c in name):
        raise ValueError("a run name cannot hold slashes or control characters")
    return name


def _inside_runs(folder: Path) -> Path:
    folder = Path(folder).resolve()
    if folder.parent != runs_dir().resolve():
        raise ValueError(f"{folder.name} is not a run of this app")
    return folder


def rename_run(folder: Path, name: str) -> None:
    """Give a run another name (written to run.json atomically; the folder stays where it is)."""
    folder = _inside_runs(folder)
    data = json.dumps({"name": check_name(name)}).encode("utf-8")
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".run-", suffix=".json")
    with os.fdopen(handle, "wb") as file:
        file.write(data)
    os.replace(temporary, folder / RUN_FILE)


def delete_run(folder: Path, *, busy: Path | None = None) -> None:
    """Remove a run's folder; refused for the run that is being written (``busy``)."""
    folder = _inside_runs(folder)
    if busy is not None and Path(busy).resolve() == folder:
        raise ValueError("this run is still training: stop it first")
    shutil.rmtree(folder)


def run_zip(folder: Path) -> bytes:
    """The run as a checkpoint zip the sidebar's upload accepts (without optimizer state and snapshots)."""
    folder = Path(folder)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.iterdir()):
            if path.is_file() and path.name not in (OPTIMIZER_FILE, RUN_FILE) and not path.name.startswith("."):
                archive.write(path, f"{folder.name}/{path.name}")
    return buffer.getvalue()


def bound_runs(directory: Path | None = None, *, keep: int = MAX_RUNS, busy: Path | None = None) -> list[Path]:
    """Remove the oldest complete runs beyond ``keep`` (never ``busy``); returns the removed folders."""
    removed = []
    for run in saved_runs(directory)[keep:]:
        if busy is not None and run.folder == Path(busy).resolve():
            continue
        shutil.rmtree(run.folder, ignore_errors=True)
        removed.append(run.folder)
    return removed

