"""The model menu: shipped checkpoint folders, this session's trained and uploaded models, and loading them (cached).

Every menu entry has a stable ``key``; the caches of ``ui.analysis`` are keyed by it. Other
modules add models with ``register_trained_model(name, pipeline_or_folder)``. A run of the
Training page (``ui.training_job``) ends in a thread that cannot touch ``st.session_state``:
``register_finished_training()``, called by the sidebar on the next script run of whatever
page is shown, puts it into the menu.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import streamlit as st
import torch

from transformer.checkpoint import CONFIG_FILE, WEIGHTS_FILE, CheckpointError
from transformer.pipeline import Pipeline, load_pretrained
from ui import training_job
from ui.runs import saved_runs
from ui.settings import LAST_TRAINED, MODEL, SESSION_MODELS, TEXT, models_dir, torch_threads

# The server's torch threads, set once when the first page imports this module (never per call). The app's
# models are small, and on a shared machine with few cores torch's default of one thread per core is many
# times slower as soon as anything else runs: the Heads page's statistics on a tiny model took 0.8 s with
# one thread and 81 s with two while a training run used the other core (threads spin waiting for each other).
torch.set_num_threads(torch_threads())


@dataclass(frozen=True)
class ModelEntry:
    """One choice of the model menu. ``key`` is unique and stable: the caches are keyed by it."""

    label: str
    key: str
    origin: str  # "shipped", "trained" or "uploaded"
    folder: Path | None = None
    pipeline: Pipeline | None = field(default=None, compare=False, repr=False)  # an in-memory model


def folder_stamp(folder: Path) -> str:
    """Changes when a checkpoint folder is rewritten, so a retrained folder is reloaded."""
    parts = []
    for name in (CONFIG_FILE, WEIGHTS_FILE):
        try:
            stat = (folder / name).stat()
            parts.append(f"{stat.st_mtime_ns}-{stat.st_size}")
        except OSError:
            parts.append("missing")
    return "/".join(parts)


def shipped_models(directory: Path | None = None) -> list[ModelEntry]:
    """Every checkpoint folder (one holding config.json) directly under ``directory``, by name."""
    directory = models_dir() if directory is None else directory
    if not directory.is_dir():
        return []
    folders = sorted(p for p in directory.iterdir() if p.is_dir() and (p / CONFIG_FILE).is_file())
    return [ModelEntry(p.name, f"folder:{p.resolve()}@{folder_stamp(p)}", "shipped", p.resolve()) for p in folders]


def _session_models() -> dict[str, ModelEntry]:
    return st.session_state.setdefault(SESSION_MODELS, {})


def register_trained_model(name: str, pipeline_or_folder: Pipeline | str | os.PathLike, *, select: bool = True,
                           origin: str = "trained") -> str:
    """Make a model trained (or uploaded) in this browser session selectable; returns its menu label.

    ``pipeline_or_folder``: an in-memory ``Pipeline`` (used as it is, on its own device) or a
    checkpoint folder (loaded, cached, on the sidebar's device). Registering a name again
    replaces the earlier model of that name. ``select=True`` makes it the current model and
    resets the input to one of its examples.
    """
    suffix = "trained here" if origin == "trained" else origin
    label = f"{name} ({suffix})"
    taken = _session_models()
    folder_of = Path(pipeline_or_folder).resolve() if not isinstance(pipeline_or_folder, Pipeline) else None
    n = 2
    while label in taken and (folder_of is None or taken[label].folder != folder_of) and origin == "trained":
        label = f"{name} ({suffix}, {n})"  # a second run of the same task is another model, not a replacement
        n += 1
    if isinstance(pipeline_or_folder, Pipeline):
        entry = ModelEntry(label, f"session:{uuid.uuid4().hex}", origin, pipeline=pipeline_or_folder)
    else:
        folder = Path(pipeline_or_folder).resolve()
        if not (folder / CONFIG_FILE).is_file():
            raise CheckpointError(f"{folder} is not a checkpoint folder (no {CONFIG_FILE})")
        entry = ModelEntry(label, f"folder:{folder}@{folder_stamp(folder)}", origin, folder)
    _session_models()[label] = entry
    if select:
        select_model(label)
    return label


def register_finished_training(*, select: bool = False) -> training_job.TrainingJob | None:
    """Register this session's training run once it has ended; returns the job if this call handled it.

    A finished or stopped run becomes a model of the menu (``job.registered_label``; current if
    ``select``); a checkpoint that cannot be loaded sets ``job.registration_error``; a failed run
    only gets marked. Either way it is handled once (``job.registered``).
    """
    job = training_job.session_job()
    if job is None or not job.done or job.registered:
        return None
    job.registered = True
    if job.status == training_job.FAILED or job.result is None:
        return job
    try:
        label = register_trained_model(job.name, job.result.out, select=select)
    except (CheckpointError, ValueError, OSError) as error:
        job.registration_error = str(error)
        return job
    job.registered_label = st.session_state[LAST_TRAINED] = label
    return job


def saved_run_models() -> list[ModelEntry]:
    """Runs trained in the app and kept in the runs folder (by any session, before any reload), newest first."""
    return [ModelEntry(run.label, f"folder:{run.folder}@{folder_stamp(run.folder)}", "trained", run.folder)
            for run in saved_runs()]


def available_models() -> list[ModelEntry]:
    """The menu: shipped models, this session's trained and uploaded ones, then the runs kept from before."""
    session = list(_session_models().values())
    in_session = {entry.folder for entry in session if entry.folder is not None}
    kept = [entry for entry in saved_run_models() if entry.folder not in in_session]
    return [*shipped_models(), *session, *kept]


def select_model(label: str) -> None:
    """Make ``label`` the current model; the next run puts its first example into the input."""
    st.session_state[MODEL] = label
    st.session_state[TEXT] = None


def devices() -> list[str]:
    return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]


@st.cache_resource(max_entries=8, show_spinner="Loading the model...")
def _load_folder(folder: str, stamp: str, device: str) -> Pipeline:
    """One Pipeline per (folder, version, device), shared by every session."""
    return load_pretrained(folder, device=device)


def load_pipeline(entry: ModelEntry, device: str) -> Pipeline:
    """The entry's pipeline: loaded from its folder (cached), or the in-memory one as it is."""
    if entry.pipeline is not None:
        return entry.pipeline
    assert entry.folder is not None
    return _load_folder(str(entry.folder), folder_stamp(entry.folder), device)
