"""A model's own positions, as the Embeddings page draws them: its table of position vectors (the sinusoid of its
layout, or a learned table per stack), or T5's relative buckets with each head's learned bias.

Read from the model itself (``model.positional.table``, each stack's ``relative_bias``), never rebuilt from a
formula, so the page shows what the model adds. Cached per model (``st.cache_resource``); the arrays are shared
by every session and never modified.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st
import torch

from transformer.network.relative_position import relative_bucket
from transformer.pipeline import Pipeline


@st.cache_resource(max_entries=16, show_spinner=False)
def _table(model_key: str, _pipeline: Pipeline, positions: int, side: str) -> np.ndarray:
    with torch.no_grad():
        return _pipeline.model.positional.table(positions, 0, side).detach().double().cpu().numpy()


def position_table(model_key: str, pipeline: Pipeline, positions: int, side: str = "src") -> np.ndarray:
    """The (positions, d_model) vectors the model adds at positions 0..positions-1 of ``side`` ("src" or "tgt":
    the encoder's or the decoder's; one table for both unless they are learned), as float64."""
    return _table(model_key, pipeline, positions, side)


@dataclass(frozen=True)
class RelativeBias:
    """T5's relative positions over distances -reach..reach (key - query)."""

    distances: np.ndarray  # (R,) int: key - query
    buckets: dict[str, np.ndarray]  # stack -> (R,) bucket id (float, NaN where the stack never reads a distance)
    bias: dict[str, np.ndarray]  # stack -> (H, R) each head's bias at each distance (NaN where never read)


@st.cache_resource(max_entries=8, show_spinner=False)
def _relative(model_key: str, _pipeline: Pipeline, reach: int) -> RelativeBias:
    c = _pipeline.config
    distances = torch.arange(-reach, reach + 1)  # (R,)
    buckets, bias = {}, {}
    for stack in ("encoder", "decoder"):
        table = getattr(_pipeline.model, stack).relative_bias  # RelativePositionBias: (buckets, H) table
        bucket = relative_bucket(distances, table.bidirectional, c.relative_buckets, c.relative_max_distance)
        with torch.no_grad():
            values = table.table(bucket).detach().double().cpu().numpy().T.copy()  # (R, H) -> (H, R)
        ids = bucket.double().numpy()
        if not table.bidirectional:  # a causal stack masks every key after its query: those distances never count
            future = distances.numpy() > 0
            ids[future] = np.nan
            values[:, future] = np.nan
        buckets[stack], bias[stack] = ids, values
    return RelativeBias(distances.numpy(), buckets, bias)


def relative_bias(model_key: str, pipeline: Pipeline, reach: int) -> RelativeBias:
    """The bucket of each distance -reach..reach and each head's bias there, per stack (a model with
    ``positional="relative"``, T5); ``ui.charts.positions.bucket_map`` and ``head_bias`` draw them."""
    if pipeline.config.positional != "relative":
        raise ValueError(f"the model's positions are {pipeline.config.positional!r}, not relative")
    return _relative(model_key, pipeline, reach)


def default_reach(max_distance: int) -> int:
    """How far the page's distance axis reaches by default: a quarter beyond the last bucket's start, so the
    flat tail where every distance shares one bucket shows."""
    return max(8, (5 * max_distance) // 4)


# --- rotary positions (RoPE) ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RotaryCurves:
    """A rotary model's rotations, computed with its own modules (``model.decoder.rotary``: the frequencies its
    attention uses, scaling included). ``inv_freq``: base name -> (d_k / 2,) θ_i per dimension pair ("full", and
    "sliding" where the window layers have a base of their own: Gemma-3); ``unscaled``: θ^(-2i/d_k) of the full
    base without the scaling (None where the model has none); ``rotated``: (P, d_k) the query q = (1, ..., 1) turned
    to positions 0..P-1; ``scores``: (P, P) the score q_m · k_n of that q and k = q at positions m (rows), n."""

    inv_freq: dict[str, np.ndarray]
    unscaled: np.ndarray | None
    rotated: np.ndarray
    scores: np.ndarray


@st.cache_resource(max_entries=16, show_spinner=False)
def _rotary(model_key: str, _pipeline: Pipeline, positions: int) -> RotaryCurves:
    from transformer.network.rotary import inverse_frequencies, rotate

    c = _pipeline.config
    modules = _pipeline.model.decoder.rotary  # ModuleDict: "full" (and "sliding"), as the layers use them
    inv_freq = {name: module.inv_freq.detach().double().cpu().numpy() for name, module in modules.items()}
    unscaled = (inverse_frequencies(c.d_k, c.rope_theta).double().numpy() if c.rope_scaling != "default" else None)
    with torch.no_grad():
        cos, sin = modules["full"](torch.arange(positions)[None], torch.float64)  # (1, P, d_k) each
        q = torch.ones(1, 1, positions, c.d_k, dtype=torch.float64)  # (B, H, P, d_k): one head, the same q
        turned = rotate(q, cos, sin)[0, 0]  # (P, d_k): q at each position
        scores = turned @ turned.T  # (P, P): q_m . k_n with k = q
    return RotaryCurves(inv_freq, unscaled, turned.numpy(), scores.numpy())


def rotary_curves(model_key: str, pipeline: Pipeline, positions: int) -> RotaryCurves:
    """The frequencies, a rotated query and the scores of a model with ``positional == "rotary"`` over positions
    0..``positions``-1 (``RotaryCurves``), computed with the model's own rotary modules."""
    if pipeline.config.positional != "rotary":
        raise ValueError(f"the model's positions are {pipeline.config.positional!r}, not rotary")
    return _rotary(model_key, pipeline, positions)
