"""The Explain page's faithfulness check: ERASER's comprehensiveness and sufficiency of every map on the analysed
input (``transformer.explain.faithfulness``, DeYoung et al. 2020; the soft variants of Zhao & Aletras 2023), beside a
random ranking, cached per model, device, input, map and integrated gradients' baseline.

It reads the maps the page already computed (``Explanation.source``) and runs only the perturbed forwards: on the
shipped models a fraction of a second per map, at opus-mt size seconds per map (docs/benchmarks.md), so the page
computes it when its section is shown, and on a large model only at a button. On a decoder-only language model the
prompt is the source: only the prompt is perturbed, the tokens generated before each row kept, and the prompt's
tokens its tokenizer calls special are never removed (``lm_explain.special_positions``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st
import torch

from transformer.explain import REGISTRY, Attribution, faithfulness, faithfulness_summary
from transformer.explain.pairs import source_embedding
from transformer.pipeline import Pipeline
from ui.compute import lm_explain
from ui.compute.analysis import Analysis
from ui.compute.explain import Explanation, explained_ids, label, split_view, used_baseline
from ui.compute.model_size import is_large
from ui.models.menu import is_decoder_only

REMOVED = {"unk": "replaced by the <unk> embedding", "pad": "replaced by the <pad> embedding",
           "zero": "replaced by the zero embedding"}


def special_positions(pipeline: Pipeline, src: torch.Tensor) -> torch.Tensor:
    """(1, S) bool: the source's special tokens, never removed: what the tokenizer puts before the text (BART's
    ``<s>``, a language code: ``Pipeline.source_prefix``) and ``</s>``; a language model's prompt's, those its
    tokenizer calls special (``lm_explain.special_positions``)."""
    if is_decoder_only(pipeline):
        return lm_explain.special_positions(pipeline, src)
    special = src == pipeline.config.eos_id
    special[:, :len(pipeline.source_prefix())] = True
    return special


@st.cache_resource(max_entries=512, show_spinner=False)
def _measure(model_key: str, device: str, text: str, key: str, baseline: str, _pipeline: Pipeline,
             _analysis: Analysis, _source: np.ndarray) -> pd.DataFrame | str:
    method, layer = split_view(key)
    options = {"baseline": baseline} if REGISTRY[method].baseline else {}
    if layer is not None:
        options["layer"] = layer
    src, tgt = explained_ids(_analysis, _pipeline.config.pad_id)
    src, tgt = src.to(_pipeline.device), tgt.to(_pipeline.device)
    weight = source_embedding(_pipeline.model).weight
    attribution = Attribution(method, torch.from_numpy(_source)[None].to(weight.device, weight.dtype),
                              options=options)
    try:
        return faithfulness(_pipeline.model, src, tgt, attribution, special=special_positions(_pipeline, src))
    except ValueError as error:
        return str(error)


def measures(model_key: str, device: str, pipeline: Pipeline, analysis: Analysis, result: Explanation,
             baseline: str) -> tuple[pd.DataFrame, dict[str, str]]:
    """Per map of ``result``: the summary of ``faithfulness_summary`` with the map's key, label and removal, sorted
    by comprehensiveness (best first); and the maps it could not measure, with why. ``baseline``: the page's
    choice for integrated gradients ("default": the one the map was made from, ``result.ig_baseline``)."""
    frames, errors = [], {}
    baseline = result.ig_baseline or used_baseline(pipeline, baseline)
    for key, source in result.source.items():
        takes_baseline = key in REGISTRY and REGISTRY[key].baseline
        table = _measure(model_key, device, analysis.text, key, baseline if takes_baseline else "",
                         pipeline, analysis, source)
        if isinstance(table, str):
            errors[key] = table
            continue
        summary = faithfulness_summary(table)
        summary.insert(0, "removal", table.removal.iloc[0])
        summary.insert(0, "map", label(key))
        summary.insert(0, "key", key)
        frames.append(summary)
    if not frames:
        return pd.DataFrame(), errors
    frame = pd.concat(frames, ignore_index=True)
    order = (frame[frame.measure == "comprehensiveness"].sort_values("method", ascending=False).key.tolist())
    frame["key"] = pd.Categorical(frame["key"], categories=order, ordered=True)
    return frame.sort_values("key", kind="stable").reset_index(drop=True), errors


def deferred(pipeline: Pipeline) -> bool:
    """Whether the page waits for a button: on a large model every map costs seconds."""
    return is_large(pipeline)
