"""The model menu: shipped checkpoint folders, this session's trained and uploaded models, and loading them (cached).

Every menu entry has a stable ``key``; the caches of ``ui.compute`` are keyed by it, with the language pair of a
multilingual model folded in (``cache_key``). Both model menus (this one and "Compare with") and every heading that
names a model say a Hugging Face model's family beside its label (``menu_text``: "nllb-200-distilled-600M · NLLB
(m2m_100)"); the label alone is what links carry. Other
modules add models with ``register_trained_model(name, pipeline_or_folder)``. A run of the
Training page (``ui.models.training_job``) ends in a thread that cannot touch ``st.session_state``:
``register_finished_training()``, called by the sidebar on the next script run of whatever
page is shown, puts it into the menu.
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path

import streamlit as st
import torch

from transformer.checkpoints.checkpoint import CONFIG_FILE, WEIGHTS_FILE, CheckpointError
from transformer.hub.families import display_name, family_of
from transformer.hub.folder import BIN_FILE, SAFETENSORS_INDEX, is_hf_folder, missing_files, model_type
from transformer.lm_pipeline import LMPipeline
from transformer.pipeline import Pipeline, load_pretrained
from ui.models import training_job
from ui.models.runs import SavedRun, run_names, saved_runs, visible_runs
from ui.state import owner, settings
from ui.state.settings import DEVICE, LAST_TRAINED, MODEL, SESSION_MODELS, TEXT, models_dir, torch_threads

# The server's torch threads, set once when the first page imports this module (never per call). The app's
# models are small, and on a shared machine with few cores torch's default of one thread per core is many
# times slower as soon as anything else runs: the Heads page's statistics on a tiny model took 0.8 s with
# one thread and 81 s with two while a training run used the other core (threads spin waiting for each other).
torch.set_num_threads(torch_threads())


# What loading a model folder may raise. Our readers say what is wrong with a CheckpointError (a ValueError),
# but a folder comes from anywhere (an upload, a path typed in), and a third-party reader may fail otherwise
# (torch's unpickler raises struct.error, KeyError or IndexError on a damaged pytorch_model.bin): the page says
# so in a message, never with a traceback.
LOAD_ERRORS = (Exception,)


def load_error_text(error: BaseException) -> str:
    """A loading error in words: our messages as they are, another library's with its exception's name."""
    kind = type(error)
    name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"
    text = str(error) or name
    return text if isinstance(error, ValueError | OSError | RuntimeError) else f"{name}: {text}"


@dataclass(frozen=True)
class ModelEntry:
    """One choice of the model menu. ``key`` is unique and stable: the caches are keyed by it."""

    label: str
    key: str
    origin: str  # "shipped", "trained", "uploaded" or "opened" (a folder on the server's disk)
    folder: Path | None = None
    pipeline: Pipeline | None = field(default=None, compare=False, repr=False)  # an in-memory model
    family: str = ""  # a Hugging Face folder's model_type ("m2m_100", "t5", ...); "" for ours
    name: str = field(default="", compare=False)  # what the app shows, where not the label (a kept run's name)


def family_in(folder: Path | None) -> str:
    """The ``model_type`` of a Hugging Face folder ("" for one of ours, no folder, or an unreadable config)."""
    return (model_type(folder) or "") if folder is not None else ""  # model_type reads config.json, never raises


def family_name(model_type: str) -> str:
    """A family in words, as every place that names a model says it (its ``Family.display_name``: "NLLB
    (m2m_100)"; an unknown type by its own name)."""
    return display_name(model_type)


def menu_text(entry: ModelEntry, text: str | None = None) -> str:
    """How the app names an entry to the user (the model menu, the "Compare with" menu, the headings of a second
    model): its label (or ``text``, e.g. "m at step 50"), and a Hugging Face model's family ("flan-t5-small · T5").
    Links and the menus' values carry the label alone."""
    text = (entry.name or entry.label) if text is None else text
    return f"{text} · {family_name(entry.family)}" if entry.family else text


def cache_key(key: str, pipeline: Pipeline | None) -> str:
    """An entry's key in the caches of ``ui.compute`` for this pipeline: with a multilingual model's language pair
    folded in ("folder:...|eng_Latn>fra_Latn"), so one session's translation into French never serves another's
    into German; the key itself for any other model."""
    if pipeline is None or is_decoder_only(pipeline) or pipeline.src_lang is None:
        return key
    return f"{key}|{pipeline.src_lang}>{pipeline.tgt_lang}"


STAMPED_FILES = (CONFIG_FILE, WEIGHTS_FILE, SAFETENSORS_INDEX, BIN_FILE)  # ours, and a Hugging Face folder's


def folder_stamp(folder: Path) -> str:
    """Changes when a model folder is rewritten, so a retrained (or re-downloaded) folder is reloaded: the
    config and whichever weights it holds (model.safetensors, a sharded index, or pytorch_model.bin)."""
    parts = []
    for name in STAMPED_FILES:
        try:
            stat = (folder / name).stat()
            parts.append(f"{stat.st_mtime_ns}-{stat.st_size}")
        except OSError:
            parts.append("missing")
    return "/".join(parts)


def shipped_models(directory: Path | None = None) -> list[ModelEntry]:
    """Every model folder (one holding config.json: our checkpoints and Hugging Face Marian folders alike)
    directly under ``directory``, by name. A broken one is listed too: choosing it says what is wrong."""
    directory = models_dir() if directory is None else directory
    if not directory.is_dir():
        return []
    folders = sorted(p for p in directory.iterdir() if p.is_dir() and (p / CONFIG_FILE).is_file())
    return [ModelEntry(p.name, f"folder:{p.resolve()}@{folder_stamp(p)}", "shipped", p.resolve(), family=family_in(p))
            for p in folders]


def _session_models() -> dict[str, ModelEntry]:
    return st.session_state.setdefault(SESSION_MODELS, {})


def session_menu_text(label: str) -> str:
    """``menu_text`` of the menu's model ``label`` (an upload, an opened folder or a run, said when it joins the
    menu as the menu will show it); the label itself when the menu has no such model."""
    entry = next((entry for entry in available_models() if entry.label == label), None)
    return menu_text(entry) if entry is not None else label


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
    kept = _kept_run(pipeline_or_folder) if origin == "trained" else None
    if kept is not None:  # a run of the Training page: the same label as in the kept list, which links carry
        label = kept.label
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
        check_model_folder(folder)
        entry = ModelEntry(label, f"folder:{folder}@{folder_stamp(folder)}", origin, folder, family=family_in(folder))
    _session_models()[label] = entry
    if select:
        select_model(label)
    return label


def _kept_run(pipeline_or_folder: Pipeline | str | os.PathLike) -> SavedRun | None:
    """The kept run (``ui.models.runs``) whose folder this is, or None (an in-memory model, another folder)."""
    if isinstance(pipeline_or_folder, Pipeline):
        return None
    folder = Path(pipeline_or_folder).resolve()
    return next((run for run in saved_runs() if run.folder == folder), None)


def check_model_folder(folder: Path) -> None:
    """Raise ``CheckpointError`` saying why ``folder`` is neither one of our checkpoint folders nor a Hugging
    Face Marian folder (a cheap look at its files; loading it checks the rest)."""
    if not folder.is_dir():
        raise CheckpointError(f"{folder} is not a folder" if folder.exists() else f"there is no folder {folder}")
    if not (folder / CONFIG_FILE).is_file():
        raise CheckpointError(f"{folder} is not a model folder: it has no {CONFIG_FILE}")
    if is_hf_folder(folder):
        try:
            family = family_of(model_type(folder))
        except ValueError as error:
            raise CheckpointError(f"{folder}: {error}") from None
        missing = missing_files(folder, family)
        if missing:
            raise CheckpointError(f"{folder}: a {family.model_type} folder needs {', '.join(missing)}")
    elif not (folder / WEIGHTS_FILE).is_file():
        raise CheckpointError(f"{folder} is not a checkpoint folder: it has no {WEIGHTS_FILE}")


# The one answer for a folder that is not there and one that is not allowed: which of the two it is, or where the
# server's folders are, is nothing a visitor should learn.
NOT_OPENABLE = ("there is no model folder by that path that this server opens (it opens the folders in its "
                f"models folder, its runs folder and those ${settings.OPEN_ROOTS_ENV} lists)")


def no_model_message() -> str:
    """What the page says when no model is listed: the ways to get one that this server offers (in public mode
    neither "Open a folder" nor the models folder's path, and an upload only where uploads are allowed)."""
    if settings.public():
        upload = ", or upload a checkpoint folder as a .zip in the sidebar" if settings.uploads_allowed() else ""
        return f"No model is available yet. Train one on the **Training** page{upload}."
    return ("No model is available yet. Train one on the **Training** page, upload a checkpoint folder "
            "as a .zip in the sidebar (or open a folder on the server, e.g. a Hugging Face opus-mt "
            f"one), or put model folders into `{settings.models_dir()}` "
            f"(or point ${settings.MODELS_DIR_ENV} at a folder of them).")


def open_folder(path_text: str, *, select: bool = True) -> str:
    """Make a model folder on the server's disk (ours or a Hugging Face Marian one) selectable; returns its
    menu label. ``CheckpointError`` (a ValueError) with the reason when the folder cannot be used: it is
    checked and loaded once here, so a bad folder never reaches the menu.

    Only a folder under ``settings.open_roots()`` opens (the models and runs folders and those listed in
    $TRANSFORMER_APP_OPEN_ROOTS), checked after resolving links and ``..``; a folder that is not there and one
    that is not allowed get the same message, and no message names a server path. Public mode opens none."""
    if settings.public():
        raise CheckpointError("opening a folder on the server is off on this public server")
    text = path_text.strip().strip('"').strip("'")
    if not text:
        raise CheckpointError("type the path of a model folder")
    shown = text if len(text) <= 80 else text[:80] + "..."
    folder = Path(text).expanduser()
    if not folder.is_absolute():
        folder = models_dir() / folder  # a name: a folder of the models directory
    folder = folder.resolve()
    if not folder.is_dir() or not any(folder.is_relative_to(root) for root in settings.open_roots()):
        raise CheckpointError(NOT_OPENABLE)
    try:
        check_model_folder(folder)
        preload(folder)
    except LOAD_ERRORS as error:  # said with the path as typed, never the server's
        raise CheckpointError(load_error_text(error).replace(str(folder), shown)) from None
    return register_trained_model(folder.name, folder, select=select, origin="opened")


def preload(folder: Path) -> Pipeline:
    """Load a folder before it joins the menu, on the session's device and into the cache the sidebar reads
    (so it is loaded once): a bad weight or tokenizer is a message before the folder is ever listed."""
    device = st.session_state.get(DEVICE)
    return _load_folder(str(folder), folder_stamp(folder), device if device in devices() else "cpu")


def describe(pipeline: Pipeline) -> str:
    """What a model is, in a few words: its task, or "Hugging Face NLLB (m2m_100) model <name>" (the family as the
    menus name it)."""
    meta = pipeline.meta
    if meta.get("source") == "huggingface":
        kind = family_name(meta["model_type"]) if meta.get("model_type") else "model"
        return f"Hugging Face {kind} model {meta.get('name', '')}".strip()
    if meta.get("data"):
        return "trained on a user's file"
    return f"task: {meta.get('task', 'unknown')}"


def is_decoder_only(pipeline: Pipeline | LMPipeline | None) -> bool:
    """Whether ``pipeline`` is a decoder-only language model (``LMPipeline``: GPT-2, Llama, Mistral, Qwen, Gemma):
    one stack, a prompt and its continuation, no encoder, no cross-attention, no source languages. Every place of
    the app that reads an encoder, a source tokenizer or a language pair asks this first."""
    return getattr(pipeline, "kind", None) == "decoder"  # a stand-in or an older pipeline without ``kind``: not one


def is_huggingface(pipeline: Pipeline) -> bool:
    """Whether the model was read from a Hugging Face folder (it has no training task nor training log)."""
    return pipeline.meta.get("source") == "huggingface"


def not_trainable_note(entry: ModelEntry | None, pipeline: Pipeline | None) -> None:
    """On the Training page: say that the selected model, when it comes from Hugging Face, is not trained here."""
    if entry is not None and pipeline is not None and is_huggingface(pipeline):
        st.info(f"The selected model, {menu_text(entry)}, comes from Hugging Face: it cannot be trained further here. "
                "What you train below is a new model, from scratch; the selected one stays as it is.")


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


def saved_run_models(shipped: list[ModelEntry] | None = None) -> list[ModelEntry]:
    """Runs trained in the app and kept in the runs folder (by any session, before any reload), newest first;
    in public mode only this session's and those it opened through a link (``runs.visible_runs``). Each is named
    as every place names it (``runs.run_names``: the run id only beside a name another run or a ``shipped`` model
    also has)."""
    kept = visible_runs(owner.session_id(), owner.linked_runs())
    names = run_names(kept, [entry.label for entry in (shipped_models() if shipped is None else shipped)])
    return [ModelEntry(run.label, f"folder:{run.folder}@{folder_stamp(run.folder)}", "trained", run.folder,
                       name=names[run.folder]) for run in kept]


def kept_run_names() -> dict[Path, str]:
    """The name of each run this session sees, by folder, as the model menu shows it (``saved_run_models``)."""
    return {entry.folder: entry.name for entry in saved_run_models() if entry.folder is not None}


RUN_LINK = "run:"  # public mode: a link's model value "run:<link id>" names a kept run by its unguessable id


def link_value(entry: ModelEntry | None) -> str | None:
    """What a link carries for the model: its label; in public mode a kept run's ``run:<link id>`` instead (its
    label, "reverse-1124-0933", is guessable and opens nothing for another session)."""
    if entry is None:
        return None
    if settings.public() and entry.folder is not None:
        run = _kept_run(entry.folder)
        if run is not None and run.link_id:
            return RUN_LINK + run.link_id
    return entry.label


def follow_run_link(value: str) -> str | None:
    """A link's ``run:<link id>``: the run joins this session's menu (read-only for it); returns its label, or
    None when no kept run has that id."""
    link_id = value[len(RUN_LINK):]
    run = next((run for run in saved_runs() if link_id and run.link_id == link_id), None)
    if run is None:
        return None
    owner.linked_runs().add(link_id)
    return run.label


def available_models() -> list[ModelEntry]:
    """The menu: shipped models, this session's trained and uploaded ones, then the runs kept from before."""
    shipped = shipped_models()
    runs = saved_run_models(shipped)
    names = {entry.folder: entry.name for entry in runs}  # a run trained in this session: its name now, too
    session = [replace(entry, name=names[entry.folder]) if entry.folder in names else entry
               for entry in _session_models().values()]
    in_session = {entry.folder for entry in session if entry.folder is not None}
    return [*shipped, *session, *(entry for entry in runs if entry.folder not in in_session)]


_RUN_ID = re.compile(r"-\d{4}-\d{4,6}\)?$")  # reverse-1124-0933, or "my name (reverse-1124-0933)"


def looks_like_run(name: str) -> bool:
    """Whether a link's model names a run trained here (its run id ends in month-day and hour-minute)."""
    return bool(_RUN_ID.search(name))


def find_label(entries: dict[str, ModelEntry], name: str) -> str:
    """The menu label a link's model name means: itself, or the renamed run that carries that run id."""
    if name in entries or not looks_like_run(name):
        return name
    run_id = name[name.rfind("(") + 1:-1] if name.endswith(")") else name
    return next((label for label in entries if label == run_id or label.endswith(f"({run_id})")), name)


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
