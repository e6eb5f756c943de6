"""Models trained in the app, kept across reloads: listed, renamed, deleted, downloaded, bounded in number.

Every run of the Training page writes a checkpoint folder under ``settings.runs_dir()`` (a name,
the time and a random suffix). Those folders are the record: a reloaded browser (a new session)
finds them again through ``saved_runs``, so a trained model is not lost with its session. A run's
display name lives in ``run.json`` beside the checkpoint (written atomically); renaming never
moves the folder, so the caches keyed by it stay valid. The menu's value and a link name a run by its run id
(``SavedRun.label``), which a rename leaves alone; what the app shows is its name (``run_names``), read from
run.json on every script run, so a rename shows at once in every menu of every session. The runs folder is
shared by every session of the server: this is a local teaching tool, and the Training page says so.
``bound_runs`` keeps at most ``MAX_RUNS`` of them, removing the oldest first, never one that is
still being written.

In public mode (``settings.public()``) a run belongs to the session that trained it: ``claim_run`` writes the
session's token (``ui.state.owner``) and a random link id into run.json before the training starts; only the
owner renames or deletes it (``rename_run``/``delete_run`` take ``owner``), others open it only through its
link id; ``make_room`` removes the session's own oldest runs beyond its quota and, for the server's bound
(``MAX_RUNS`` in all), only other sessions' runs older than ``OTHERS_KEPT_S``.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import secrets
import shutil
import tempfile
import time
import unicodedata
import zipfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from transformer.checkpoints.checkpoint import CONFIG_FILE, OPTIMIZER_FILE, WEIGHTS_FILE, read_config
from ui.state import settings
from ui.state.settings import runs_dir

RUN_FILE = "run.json"  # {"name": ..., "owner": session token, "link": link id}: the last two in public mode
MAX_RUNS = 20  # kept in runs_dir(); the oldest go first
MAX_NAME_CHARS = 60
OTHERS_KEPT_S = 3600.0  # public mode: another session's run is never removed to make room before this age
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
    owner: str = ""  # public mode: the token of the session that trained it ("" for a run from before)
    link_id: str = ""  # public mode: the unguessable id a link opens it by

    @property
    def label(self) -> str:
        """The model menu's value, which links carry: the run id, which no rename changes (what the app shows is
        ``run_names``)."""
        return self.run_id or run_id_of(self.folder)


def run_names(kept: list[SavedRun], reserved: Iterable[str] = ()) -> dict[Path, str]:
    """What every place that shows a run calls it (the model menu, the kept-runs table and its menu, a chart's
    legend, a toast), by folder: its name, with its run id only where another run of ``kept`` has the same name or
    the name is ``reserved`` (another model of the menu, e.g. the shipped "reverse"): "reverse (reverse-1127-1819)"."""
    counts = Counter(run.name for run in kept)
    taken = set(reserved)
    return {run.folder: run.name if counts[run.name] == 1 and run.name not in taken else f"{run.name} ({run.label})"
            for run in kept}


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
    """The run's size on disk, without the hidden folders a checkpoint is written into before it is swapped in
    (``.saving-*``): those come and go while another session's training saves, so a file counted here may be gone
    by the time it is measured, and is then skipped (the load test met it as "No such file or directory")."""
    total = 0
    for root, dirs, files in os.walk(folder):  # os.walk skips a folder that vanishes under it
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                continue
    return total / 2**20


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
            record = _record(folder)
            created = (folder / WEIGHTS_FILE).stat().st_mtime
        except (ValueError, OSError):
            continue  # not a run, or one being removed or rewritten by another session right now
        runs.append(SavedRun(folder.resolve(), str(record.get("name") or _default_name(folder)),
                             str(meta.get("task", "custom")), int(meta.get("parameters", 0)),
                             int(meta.get("step", 0)), created, _size_mb(folder),
                             owner=str(record.get("owner", "")), link_id=str(record.get("link", ""))))
    return sorted(_unique_ids(runs), key=lambda run: run.created, reverse=True)


def check_name(name: str) -> str:
    """A run name, stripped; ValueError for an empty or too long name or one with separators or control characters."""
    name = (name or "").strip()
    if not name:
        raise ValueError("a run needs a name")
    if len(name) > MAX_NAME_CHARS:
        raise ValueError(f"a run name has at most {MAX_NAME_CHARS} characters, this one {len(name)}")
    if any(c in name for c in "/\\"):
        raise ValueError("a run name cannot hold slashes")
    # control (Cc), format (Cf: the bidi overrides and isolates, zero-width characters), line and paragraph
    # separators, surrogates and private-use characters: a name that reads otherwise than it is, or breaks a line
    if any(unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp") for c in name):
        raise ValueError("a run name cannot hold control, direction or invisible characters")
    return name


def _record(folder: Path) -> dict:
    """The run's run.json as a dict ({} when missing or unreadable)."""
    try:
        record = json.loads((Path(folder) / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _write_record(folder: Path, record: dict) -> None:
    """Write run.json atomically (a reader never sees half of it)."""
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".run-", suffix=".json")
    with os.fdopen(handle, "wb") as file:
        file.write(json.dumps(record).encode("utf-8"))
    os.replace(temporary, folder / RUN_FILE)


def new_link_id() -> str:
    """An unguessable id for a run's link (``secrets.token_urlsafe``: 128 random bits)."""
    return secrets.token_urlsafe(16)


def claim_run(folder: Path, owner: str) -> str:
    """Before a run is trained into ``folder``: record its owner (a session token) and a new link id in
    run.json; returns the link id."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    link_id = new_link_id()
    _write_record(folder, {"owner": owner, "link": link_id})
    return link_id


def _check_owner(folder: Path, owner: str | None) -> None:
    """Public mode: only the session that trained a run may change it (a run from before public mode has no owner
    and belongs to no session)."""
    if settings.public() and (not owner or _record(folder).get("owner") != owner):
        raise ValueError("this run belongs to another session: it can be opened, not renamed or deleted")


def _inside_runs(folder: Path) -> Path:
    folder = Path(folder).resolve()
    if folder.parent != runs_dir().resolve():
        raise ValueError(f"{folder.name} is not a run of this app")
    return folder


def rename_run(folder: Path, name: str, *, owner: str | None = None) -> None:
    """Give a run another name (written to run.json atomically; the folder stays where it is). In public mode
    only its owner may (``owner``: the session's token)."""
    folder = _inside_runs(folder)
    _check_owner(folder, owner)
    _write_record(folder, {**_record(folder), "name": check_name(name)})


def delete_run(folder: Path, *, busy: Path | None = None, owner: str | None = None) -> None:
    """Remove a run's folder; refused for the run that is being written (``busy``) and, in public mode, for a
    run of another session."""
    folder = _inside_runs(folder)
    _check_owner(folder, owner)
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



def visible_runs(owner: str, linked: set[str]) -> list[SavedRun]:
    """The runs a session sees: every kept run outside public mode; in it, its own and those it opened by link."""
    kept = saved_runs()
    if not settings.public():
        return kept
    return [run for run in kept if (owner and run.owner == owner) or (run.link_id and run.link_id in linked)]


def make_room(owner: str, *, busy: Path | None = None, now: float | None = None, runs: int = 1) -> list[Path]:
    """Before a session starts a run (``runs`` of them: "Train both" starts two): outside public mode
    ``bound_runs()``. In public mode the session's own oldest runs beyond ``settings.runs_per_session() - runs``
    go, then, while the server holds more than ``MAX_RUNS - runs``, the oldest runs that are its own or older than
    ``OTHERS_KEPT_S``; ValueError when no room can be made (another session's recent work is never removed).
    Returns the removed folders."""
    if not settings.public():
        return bound_runs(keep=MAX_RUNS + 1 - runs, busy=busy)
    now = time.time() if now is None else now
    kept = [run for run in saved_runs() if busy is None or run.folder != Path(busy).resolve()]
    own = [run for run in kept if run.owner == owner]
    doomed = own[max(settings.runs_per_session() - runs, 0):]
    left = [run for run in kept if run not in doomed]
    room = MAX_RUNS + 1 - runs  # the server's runs before these start: at most this many less one
    for run in list(reversed(left)):  # oldest first
        if len(left) < room:
            break
        if run.owner == owner or now - run.created >= OTHERS_KEPT_S:
            doomed.append(run)
            left.remove(run)
    if len(left) >= room:
        raise ValueError(f"this server keeps at most {MAX_RUNS} runs and all of them are other people's recent "
                         "work: try again later")
    for run in doomed:
        shutil.rmtree(run.folder, ignore_errors=True)
    return [run.folder for run in doomed]
