"""The Training page's policy and computations: the widgets' defaults, the run's config and folder, an uploaded
pairs file, and a run's snapshots (which models have them, and their cross-attention on one input, cached).

The run itself goes off the script thread in ``ui.models.training_job``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import streamlit as st
import torch

from transformer.checkpoints.checkpoint import list_snapshots
from transformer.network.trace import Trace
from transformer.pipeline import Pipeline, TranslationTrace, load_pretrained
from transformer.task_lm import TaskLMPipeline
from transformer.text import tasks
from transformer.text.ids import SPECIAL_PIECES
from transformer.text.pairs import DataError, load_pairs
from transformer.train import TrainConfig, check_config, learning_rate
from transformer.train.compare import decoder_twin
from ui.models import runs, training_job
from ui.models.menu import ModelEntry, available_models
from ui.models.training_compare import lm_source_attention
from ui.state.owner import session_id
from ui.state.settings import public, runs_dir
from ui.state.tempdirs import session_tempdir

DEFAULTS = TrainConfig()  # the widgets start at the trainer's tuned defaults
SPECIALS = list(SPECIAL_PIECES)  # the reserved pieces every vocabulary starts with
PAIRS_SLOT = "training pairs file"  # ui.state.tempdirs slot: a new upload replaces the file (and its folder)
MAX_PAIRS_MB = 5  # an uploaded pairs file: 20,000 pairs (what a run reads) of 250 bytes; 5 MB parse in ~0.25 s, ~30 MB
MAX_PAIRS_BYTES = MAX_PAIRS_MB * 2**20
UPLOAD = "train_upload_state"  # session_state: digest -> ("ok", path, n_pairs, first pair) or ("error", message)
N_HELD_OUT = 200  # validation and test pairs of a run started here
EVAL_SENTENCES = 100  # sentences decoded at each evaluation
MIN_EVAL_EVERY = 3.0  # seconds; a run evaluates about six times, at most this often


# --- before the run ----------------------------------------------------------------------------------


def read_upload(uploaded: Any) -> tuple:
    """Check an uploaded pairs file once (by content) and keep it as a file the trainer can read.

    Returns ("ok", path, number of pairs, first pair) or ("error", message). A file over ``MAX_PAIRS_BYTES`` is
    refused here, on the server, before it is parsed (the uploader's ``max_upload_size`` is the browser's check).
    """
    raw = uploaded.getvalue()
    if len(raw) > MAX_PAIRS_BYTES:
        return ("error", f"{uploaded.name} is {len(raw) / 2**20:.1f} MB; the limit is {MAX_PAIRS_MB} MB")
    digest = hashlib.sha256(raw).hexdigest()
    seen = st.session_state.setdefault(UPLOAD, {})
    if digest not in seen:  # parsed once per upload, not on every rerun
        try:
            pairs = load_pairs(raw, name=uploaded.name)
        except DataError as error:
            seen[digest] = ("error", str(error))
        else:
            seen[digest] = ("ok", "", len(pairs), pairs[0])
    result = seen[digest]
    if result[0] == "ok" and not Path(result[1]).is_file():  # the session's one pairs file: the last upload
        path = session_tempdir(PAIRS_SLOT, prefix="transformer-pairs-") / (Path(uploaded.name).name or "pairs.tsv")
        path.write_bytes(raw)
        result = seen[digest] = ("ok", str(path), *result[2:])
    return result


def task_example(task: str, src_lang: str, tgt_lang: str, options: dict) -> tuple[str, str]:
    """One (source, target) pair of a built-in task with these options; ValueError for a bad option."""
    return tasks.make_task(task, n_train=1, n_valid=0, n_test=0, src_lang=src_lang, tgt_lang=tgt_lang,
                           **options).train[0]


def make_config(*, max_seconds: float, **choices: Any) -> TrainConfig:
    """The run's config (an encoder-decoder's: ``for_architecture`` makes the decoder-only one): the page's
    choices, plus how much is held out and how often it evaluates."""
    return TrainConfig(**choices, n_valid=N_HELD_OUT, n_test=N_HELD_OUT, max_seconds=float(max_seconds),
                       eval_every=max(MIN_EVAL_EVERY, max_seconds / 6), eval_sentences=EVAL_SENTENCES,
                       # small runs: float16 snapshots, six of them, no optimizer state (a 3-s run was 30 MB)
                       snapshot_dtype="float16", max_snapshots=6, save_optimizer=False)


def for_architecture(config: TrainConfig, architecture: str) -> TrainConfig:
    """The page's encoder-decoder ``config`` (``n_layers`` per stack) as the architecture switch says: itself, or
    for "decoder" its ``decoder_twin`` (one stack of twice the layers, one joint vocabulary)."""
    return decoder_twin(config) if architecture == "decoder" else config


def config_problem(config: TrainConfig) -> str | None:
    """What is wrong with a config (a bad task option, a missing data file, ...), or None."""
    try:
        check_config(config)
    except ValueError as error:
        return str(error)
    return None


def learning_rate_fn(config: TrainConfig) -> Callable[[int], float]:
    """The learning rate the trainer uses at each step, for the schedule chart."""
    return lambda step: learning_rate(config, step)


def run_name(config: TrainConfig) -> str:
    """The model's name in the menu: the data file's stem, or the task (with its languages)."""
    decoder = "-decoder" if config.architecture == "decoder" else ""  # the twins side by side in the menu
    if config.data:
        return Path(config.data).stem + decoder
    langs = f"-{config.src_lang}-{config.tgt_lang}" if config.task in ("numbers", "dates") else ""
    return config.task + langs + decoder


def start_run(config: TrainConfig, *, with_twin: bool = False) -> training_job.TrainingJob:
    """Start this session's training run in the background, into a new folder under ``runs_dir()``; it waits in
    the server's queue while ``settings.max_trainings()`` others train (``training_job``). ``with_twin``: the
    encoder-decoder ``config`` in one joint vocabulary and then its decoder-only twin (``decoder_twin``), one after
    the other in one slot. ValueError when public mode can make no room for them (``runs.make_room``)."""
    if with_twin:
        config = dataclasses.replace(config, separate_vocab=False)  # twins read one vocabulary
    configs = [config, decoder_twin(config)] if with_twin else [config]
    named = []
    for run in configs:
        # Unique per run: every session of a server shares the process id, and two may start in the same second.
        out = runs_dir() / f"{run_name(run)}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"
        named.append((dataclasses.replace(run, out=str(out)), run_name(run)))
    previous = training_job.session_job()
    busy_out = getattr(previous.config, "out", None) if previous is not None and previous.running else None
    busy = Path(busy_out) if busy_out else None
    # the oldest kept runs go (these are not written yet): beyond runs.MAX_RUNS, or in public mode this
    # session's beyond its quota and never another session's recent one
    runs.make_room(session_id(), busy=busy, runs=len(named))
    if public():
        for run, _ in named:
            runs.claim_run(Path(run.out), session_id())  # run.json: this session owns it, and its link id
    (first, name), *then = named
    return training_job.start_session_job(first, name=name, then=then)


# --- after the run: snapshots --------------------------------------------------------------------------


def models_with_snapshots() -> list[tuple[ModelEntry, list[int]]]:
    """The menu's models that were saved with snapshots, each with the snapshots' steps."""
    return [(entry, steps) for entry in available_models()
            if entry.folder is not None and (steps := list_snapshots(entry.folder))]


@dataclass(frozen=True)
class SnapshotInput:
    """One input run on the final model: the fixed ids every snapshot reads, with their pieces."""

    src_ids: tuple[int, ...]
    tgt_ids: tuple[int, ...]  # <s> and the final model's greedy output (the decoder input)
    src_tokens: list[str]
    tgt_tokens: list[str]
    output_text: str


def snapshot_input(final: Pipeline | TaskLMPipeline, translation: TranslationTrace) -> SnapshotInput:
    """The ids and pieces the snapshots run on: an input and the final model's own output for it, as
    ``ui.compute.analysis.analyse`` traced it (cached and shared with the other pages: a fresh trace on every
    rerun was half of the Training page's warm rerun). A decoder-only run's sequence is cut where the source
    ends: ``src_ids`` the source tokens, ``tgt_ids`` the separator and the answer (what a decoder reads)."""
    if final.config.decoder_only:
        sequence = translation.trace["tgt.ids"][0].tolist()  # source tokens + <s> + answer, within max_len
        n_source = len(translation.src_ids) - 1  # the prompt less its separator
        pieces = [final.tokenizer.id_to_piece(i) for i in sequence]
        return SnapshotInput(tuple(sequence[:n_source]), tuple(sequence[n_source:]), pieces[:n_source],
                             pieces[n_source:], translation.output_text)
    tgt_ids = tuple(translation.decoder_ids[: final.config.max_len])
    return SnapshotInput(tuple(translation.src_ids), tgt_ids, list(translation.src_pieces),
                         [final.tgt_tokenizer.id_to_piece(i) for i in tgt_ids], translation.output_text)


@st.cache_data(max_entries=512, show_spinner=False)
def snapshot_cross_attention(folder: str, key: str, step: int, src_ids: tuple, tgt_ids: tuple) -> np.ndarray:
    """Cross-attention (L, H, T, S) of one snapshot on fixed ids; only this small array is cached. A decoder-only
    run's: its self-attention over ``src_ids + tgt_ids`` from the target's rows to the source's columns
    (``training_compare.lm_source_attention``)."""
    pipe = load_pretrained(folder, step=step)
    trace = Trace()
    layers = range(pipe.config.n_decoder_layers)
    with torch.inference_mode():
        if pipe.config.decoder_only:
            pipe.model.lm(torch.tensor([[*src_ids, *tgt_ids]]), trace=trace)
            return np.stack([lm_source_attention(trace.attention("decoder", layer)[0].double().numpy(),
                                                 len(src_ids)) for layer in layers])
        pipe.model(torch.tensor([src_ids]), torch.tensor([tgt_ids]), trace=trace)
    return np.stack([trace.attention("cross", layer)[0].double().numpy() for layer in layers])
