"""The Training page's decoder-only run beside its encoder-decoder twin: which runs of the menu are twins, each
one's steps and seconds to 97% exact match read off its training log, and where each reads the source.

Twins are two of our checkpoints trained on the same recipe (task and data, tokenizer, width, heads, feed-forward,
schedule, seed: ``TWIN_FIELDS`` of their ``train_args``) at the same depth, counted in layers (the encoder-decoder's
two stacks of N against the decoder-only model's one stack of 2N: ``transformer.train.compare.decoder_twin``, what
the page's "Train both" trains). The figures come from ``compare.time_in_log``, which reads a log as
``compare.time_to_exact_match`` watches a run: the same numbers for the same run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import streamlit as st

from transformer.checkpoints.checkpoint import WEIGHTS_FILE, CheckpointError, read_config, read_log
from transformer.train.compare import time_in_log
from ui.models.menu import ModelEntry

TARGET = 0.97  # the exact match the page times each run to (bench/bench_architectures.py's default)
# What two runs must share to be twins (their budgets, evaluations and output folders may differ).
TWIN_FIELDS = ("task", "src_lang", "tgt_lang", "data", "task_options", "n_train", "tokenizer", "vocab_size",
               "separate_vocab", "positional", "d_model", "n_heads", "d_ff", "dropout", "tie_embeddings",
               "norm_first", "max_len", "schedule", "warmup", "lr_factor", "lr", "label_smoothing", "batch_tokens",
               "batch_sentences", "seed")
ARCHITECTURE_NAMES = {"encoder-decoder": "encoder-decoder", "decoder": "decoder-only"}


@dataclass(frozen=True)
class RunFacts:
    """One checkpoint of ours as the comparison reads it: its recipe, depth and size, and when it was written."""

    architecture: str  # "encoder-decoder" or "decoder"
    layers: str  # "2 + 2" (encoder + decoder) or "4"
    depth: int  # layers in all
    parameters: int
    key: str  # the recipe (``TWIN_FIELDS``) and the depth, as JSON: equal for twins
    written: float  # the weights' modification time


def twin_key(train_args: Mapping[str, Any], depth: int) -> str:
    """What twins share, as one string: the ``TWIN_FIELDS`` of a run's ``train_args`` and its depth in layers."""
    return json.dumps({**{name: train_args.get(name) for name in TWIN_FIELDS}, "depth": depth}, sort_keys=True,
                      default=str)


@st.cache_data(max_entries=256, show_spinner=False)
def _facts(key: str, folder: str) -> RunFacts | None:
    """The facts of one menu entry (``key`` carries the folder's version), None for a folder that is not a run of
    ours (a Hugging Face folder, a shipped model without ``train_args``, an unreadable one)."""
    try:
        config, meta = read_config(folder)
        written = (Path(folder) / WEIGHTS_FILE).stat().st_mtime
    except (CheckpointError, ValueError, OSError):
        return None
    train_args = meta.get("train_args")
    if meta.get("source") == "huggingface" or not isinstance(train_args, dict):
        return None
    encoder, decoder = config.n_encoder_layers, config.n_decoder_layers
    architecture = "decoder" if config.decoder_only else "encoder-decoder"
    layers = str(decoder) if config.decoder_only else f"{encoder} + {decoder}"
    return RunFacts(architecture, layers, encoder + decoder, int(meta.get("parameters", 0)),
                    twin_key(train_args, encoder + decoder), written)


def run_facts(entry: ModelEntry) -> RunFacts | None:
    """``RunFacts`` of a menu entry with a folder of ours, else None."""
    return _facts(entry.key, str(entry.folder)) if entry.folder is not None else None


def twin_pairs(entries: Sequence[ModelEntry]) -> list[tuple[ModelEntry, ModelEntry]]:
    """(encoder-decoder, decoder-only) twins among ``entries``, one pair per decoder-only run, newest first: its
    twin is the encoder-decoder run of the same key written closest in time (a "Train both" pair: just before)."""
    facts = {entry.key: run_facts(entry) for entry in entries}
    known = [(entry, facts[entry.key]) for entry in entries if facts[entry.key] is not None]
    pairs = []
    for decoder, mine in sorted(known, key=lambda e: -e[1].written):
        if mine.architecture != "decoder":
            continue
        twins = [(entry, f) for entry, f in known if f.architecture == "encoder-decoder" and f.key == mine.key]
        if twins:
            pairs.append((min(twins, key=lambda e: abs(e[1].written - mine.written))[0], decoder))
    return pairs


def time_to_target_row(name: str, facts: RunFacts, log: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One row of the comparison table: the run's architecture, size, and steps and seconds to ``TARGET`` read off
    its log (``compare.time_in_log``; None where it never got there) with its last validation exact match."""
    watch = time_in_log(log, TARGET)
    last = [float(r["exact_match"]) for r in log if r.get("phase") == "eval" and "exact_match" in r]
    return {"model": name, "architecture": ARCHITECTURE_NAMES[facts.architecture], "layers": facts.layers,
            "parameters": facts.parameters, f"steps to {TARGET:.0%}": watch.steps,
            f"training seconds to {TARGET:.0%}": None if watch.seconds is None else round(watch.seconds, 1),
            "with evaluations": None if watch.wall_seconds is None else round(watch.wall_seconds, 1),
            "last exact match": last[-1] if last else None}


def read_run_log(entry: ModelEntry) -> list[dict[str, Any]]:
    """The entry's training log ([] when it has none); CheckpointError for a damaged one."""
    return read_log(entry.folder) if entry.folder is not None else []


def lm_source_attention(weights: np.ndarray, n_source: int) -> np.ndarray:
    """A decoder-only model's self-attention (..., L, L) over ``source tokens + <s> + answer`` cut to what an
    encoder-decoder's cross-attention holds: the rows of the separator and the answer's tokens (each predicts the
    next answer token, as the decoder's rows do) over the columns of the ``n_source`` source tokens. A row sums to
    the share of its attention that reads the source (the rest reads the separator and the answer so far)."""
    return weights[..., n_source:, :n_source]
