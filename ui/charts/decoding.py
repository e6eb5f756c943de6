"""Charts for the decoding page: pure functions, decoding records in, Plotly figure or pandas table out.

At output step t the decoder reads BOS y_1 .. y_{t-1} and the encoder's memory, and gives
P(y_t | y_<t, x) = softmax(W h_t): greedy takes the argmax, sampling draws from it
(reshaped by temperature, top-k and top-p), beam search keeps the ``beam_size`` best
prefixes by their summed log-probability. The records come from ``transformer.decoding``
(``DecodeStep`` per step of greedy/sampling, ``BeamStep`` per step of beam search); token
ids become labels through an ``id -> piece`` function, so nothing here needs a tokenizer
or a model, and nothing imports Streamlit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from . import MARGIN, heatmap, label, labels, positional_labels, to_numpy
from .beam_tree import (  # noqa: F401  (the search tree's chart lives in its own module; the page imports it here)
    CHOSEN_COLOR,
    MARKER_PX,
    OUTCOME_COLORS,
    TREE_COLUMNS,
    TREE_FONT_PX,
    beam_tree_chart,
    beam_tree_frame,
    tree_geometry,
    tree_labels,
)

Piece = Callable[[int], str]

OTHER_COLOR = "#1f77b4"


# --- the steps of one output, whatever the method ---------------------------------------


@dataclass(frozen=True)
class StepView:
    """What the decoder saw and did at one output step: the page's unit of stepping."""

    step: int  # 1-based output position t
    prefix_ids: list[int]  # the decoder input so far: BOS y_1 .. y_{t-1}
    top_ids: np.ndarray  # (k,) the most likely next tokens, most likely first
    top_probs: np.ndarray  # (k,) their probabilities
    chosen: int  # the token chosen at this step
    chosen_prob: float  # its probability
    cross_attention: np.ndarray  # (L, H, S) this step's query over the source, every layer and head
    note: str = ""  # e.g. which beam this is


def decode_step_views(result: Any, *, row: int = 0, prompt_len: int = 1) -> list[StepView]:
    """One ``StepView`` per output step of greedy decoding or sampling (``DecodeResult`` with
    ``record=True``), up to and including the step that chose EOS; every prefix starts with the
    start id the decoding used (``result.ids[row, 0]``: BOS, or the pad id of a Marian model), or with a decoder-only
    model's prompt (its first ``prompt_len`` ids)."""
    if not result.steps:
        raise ValueError("this decoding was run without record=True: no steps to show")
    views: list[StepView] = []
    prefix = [int(i) for i in result.ids[row, :prompt_len]]
    for t, step in enumerate(result.steps):
        if not bool(step.active[row]):
            break
        token = int(step.token[row])
        views.append(StepView(t + 1, list(prefix), to_numpy(step.top_ids[row]).astype(np.int64),
                              to_numpy(step.top_probs[row]), token, float(step.token_prob[row]),
                              to_numpy(step.cross_attention[row])))
        prefix.append(token)
    return views


def beam_step_views(result: Any, *, bos_id: int, eos_id: int | Sequence[int],
                    prompt: Sequence[int] | None = None) -> list[StepView]:
    """One ``StepView`` per step along the best hypothesis of beam search (``BeamResult``, record=True);
    ``bos_id``: the model's ``config.bos_id``; ``eos_id``: its end id, or every id that ends a hypothesis (a
    ``generation_config`` may list several); ``prompt``: a decoder-only model's prompt ids, which every prefix
    starts with instead of ``bos_id``.

    At step t the view is that of the live beam whose prefix the best hypothesis extends; the
    chosen token is the best hypothesis's next token (at the end of a finished one, the end id that finished it:
    the step's "finished" candidate of that beam whose log-prob is the hypothesis's).
    """
    best = result.best
    ends = [eos_id] if isinstance(eos_id, int) else list(eos_id)
    path = list(best.tokens) + ([_ending(result, ends)] if best.finished else [])
    views: list[StepView] = []
    for t, token in enumerate(path):
        if t >= len(result.history):
            break
        step = result.history[t]
        if step.top_ids is None or step.cross_attention is None:
            raise ValueError("this beam search was run without record=True: no steps to show")
        beam = _beam_of(step, tuple(best.tokens[:t]))
        if beam is None:
            raise ValueError(f"step {t + 1}: no live beam holds the best hypothesis's prefix")
        prefix = tuple(best.tokens[:t])
        candidate = next((c for c in step.candidates if c.beam == beam and int(c.token) == token), None)
        prob = float(np.exp(candidate.token_log_prob)) if candidate is not None else float("nan")
        start = list(prompt) if prompt is not None else [bos_id]
        views.append(StepView(t + 1, [*start, *prefix], to_numpy(step.top_ids[beam]).astype(np.int64),
                              to_numpy(step.top_probs[beam]), token, prob, to_numpy(step.cross_attention[beam]),
                              note=f"beam {beam + 1} of {len(step.beams)}"))
    return views


def _beam_of(step: Any, prefix: tuple[int, ...]) -> int | None:
    """The index of the live beam of ``step`` whose tokens are ``prefix`` (None: no such beam)."""
    return next((i for i, b in enumerate(step.beams) if tuple(b.tokens) == prefix), None)


def _ending(result: Any, ends: Sequence[int]) -> int:
    """The end id that finished ``result.best``: of the "finished" candidates of its last beam, the one whose log-prob
    is the hypothesis's (two end ids may both finish that beam at that step); the first of ``ends`` where the
    history does not reach that step."""
    best, t = result.best, len(result.best.tokens)
    if t >= len(result.history) or (beam := _beam_of(result.history[t], tuple(best.tokens))) is None:
        return ends[0]
    finished = [c for c in result.history[t].candidates
                if c.beam == beam and c.outcome == "finished" and int(c.token) in ends]
    return int(min(finished, key=lambda c: abs(c.log_prob - best.log_prob)).token) if finished else ends[0]


# --- one step: the next-token distribution ------------------------------------------


def top_k_frame(top_ids: Any, top_probs: Any, piece: Piece, chosen: int | None = None) -> pd.DataFrame:
    """The k most likely next tokens of one step, most likely first.

    top_ids, top_probs: (k,). Columns: rank, id, token, probability, chosen.
    """
    ids = [int(i) for i in to_numpy(top_ids).astype(np.int64)]
    probs = to_numpy(top_probs)
    if len(ids) != len(probs):
        raise ValueError(f"{len(ids)} ids but {len(probs)} probabilities")
    return pd.DataFrame({
        "rank": np.arange(1, len(ids) + 1),
        "id": ids,
        "token": [piece(i) for i in ids],
        "probability": probs,
        "chosen": [i == chosen for i in ids],
    })


def top_k_chart(frame: pd.DataFrame, *, title: str = "Next-token probabilities") -> go.Figure:
    """Horizontal bars, most likely on top; the token actually chosen is red."""
    names = [label(f"{t} ({i})") for t, i in zip(frame["token"], frame["id"], strict=True)]  # ids keep them apart
    colors = np.where(frame["chosen"], CHOSEN_COLOR, OTHER_COLOR) if len(frame) else []
    fig = go.Figure(go.Bar(
        x=frame["probability"], y=names, orientation="h", marker_color=colors,
        text=[f"{p:.3f}" for p in frame["probability"]], textposition="auto",
        hovertemplate="%{y}<br>p = %{x:.4f}<extra></extra>",
    ))
    fig.update_layout(title=title, xaxis_title="probability", xaxis_range=[0, 1], yaxis_autorange="reversed",
                      yaxis_type="category", height=max(220, 90 + 28 * len(frame)),
                      margin=MARGIN)
    return fig


# --- one step: cross-attention -------------------------------------------------------


def step_attention(cross_attention: Any, *, layer: int | None = None) -> tuple[np.ndarray, list[str]]:
    """One step's cross-attention (L, H, S) as a matrix with its row labels.

    ``layer=None``: one row per decoder layer, averaged over its heads ("layer 0", ...);
    ``layer=l``: one row per head of that layer ("head 0", ...). Every row sums to 1.
    """
    weights = to_numpy(cross_attention)
    if weights.ndim != 3:
        raise ValueError(f"expected cross-attention of shape (layers, heads, source), got {weights.shape}")
    n_layers, n_heads, _ = weights.shape
    if layer is None:
        return weights.mean(axis=1), [f"layer {i}" for i in range(n_layers)]
    if not 0 <= layer < n_layers:
        raise ValueError(f"layer must be in 0..{n_layers - 1}, got {layer}")
    return weights[layer], [f"head {h}" for h in range(n_heads)]


def step_attention_frame(cross_attention: Any, src_tokens: Sequence[str], *, layer: int | None = None
                         ) -> pd.DataFrame:
    """The numbers of ``step_attention`` as a table, source tokens ("0:a", ...) as columns (for CSV)."""
    matrix, rows = step_attention(cross_attention, layer=layer)
    _check_source(matrix, src_tokens)
    return pd.DataFrame(matrix, index=rows, columns=positional_labels(src_tokens))


def step_attention_heatmap(cross_attention: Any, src_tokens: Sequence[str], *, layer: int | None = None,
                           title: str | None = None, key_title: str = "source token") -> go.Figure:
    """Where this step's query looks in the source: layers (head-averaged) or one layer's heads x source."""
    matrix, rows = step_attention(cross_attention, layer=layer)
    _check_source(matrix, src_tokens)
    what = "every layer (head mean)" if layer is None else f"heads of layer {layer}"
    return heatmap(matrix, list(src_tokens), rows, title=title or f"Cross-attention: {what}",
                   x_title=key_title, y_title="layer" if layer is None else "head", colorscale="Blues",
                   zmin=0.0, zmax=1.0, colorbar_title="weight")


def _check_source(matrix: np.ndarray, src_tokens: Sequence[str]) -> None:
    if matrix.shape[-1] != len(src_tokens):
        raise ValueError(f"{matrix.shape[-1]} source positions but {len(src_tokens)} source tokens")


def output_attention(steps_attention: Sequence[Any], *, layer: int | None = None) -> np.ndarray:
    """The cross-attention of every output step at once, (steps, S), averaged over heads.

    ``steps_attention`` holds each step's (L, H, S) weights; ``layer=None`` also averages the layers.
    """
    rows = []
    for weights in steps_attention:
        w = to_numpy(weights)  # (L, H, S)
        rows.append(w.mean(axis=(0, 1)) if layer is None else w[layer].mean(axis=0))
    if not rows:
        raise ValueError("no decoding steps to show")
    return np.stack(rows)


def output_attention_heatmap(steps_attention: Sequence[Any], src_tokens: Sequence[str], out_tokens: Sequence[str],
                             *, layer: int | None = None, title: str | None = None,
                             key_title: str = "source token") -> go.Figure:
    """Output tokens (rows, one per step) x source tokens: the alignment the decoder learned."""
    matrix = output_attention(steps_attention, layer=layer)
    where = "mean over layers and heads" if layer is None else f"layer {layer}, mean over heads"
    title = title or f"Cross-attention per output step ({where})"
    return heatmap(matrix, list(src_tokens), list(out_tokens), title=title,
                   x_title=key_title, y_title="output token", colorscale="Blues", zmin=0.0, zmax=1.0,
                   colorbar_title="weight")


# --- a whole greedy / sampled output -------------------------------------------------


def steps_frame(views: Sequence[StepView], piece: Piece) -> pd.DataFrame:
    """One row per output step (``StepView``s of any method): the chosen token, its probability,
    and the most likely other token. Columns: step, token, probability, runner_up, runner_up_probability."""
    records = []
    for view in views:
        others = [(int(i), float(p)) for i, p in zip(view.top_ids, view.top_probs, strict=True) if i != view.chosen]
        records.append({
            "step": view.step,
            "token": piece(view.chosen),
            "probability": view.chosen_prob,
            "runner_up": piece(others[0][0]) if others else "",
            "runner_up_probability": others[0][1] if others else float("nan"),
        })
    return pd.DataFrame(records, columns=["step", "token", "probability", "runner_up", "runner_up_probability"])


def confidence_chart(frame: pd.DataFrame, *, current: int | None = None, title: str = "Probability of each chosen token"
                     ) -> go.Figure:
    """Bars of the chosen token's probability at every step (from ``steps_frame``)."""
    colors = [CHOSEN_COLOR if current is not None and s == current else OTHER_COLOR for s in frame["step"]]
    fig = go.Figure(go.Bar(
        x=labels(f"{s}:{t}" for s, t in zip(frame["step"], frame["token"], strict=True)), y=frame["probability"],
        marker_color=colors, hovertemplate="step %{x}<br>p = %{y:.4f}<extra></extra>",
        customdata=[int(s) - 1 for s in frame["step"]],  # the output position, for a click (ui/state/selection.py)
    ))
    fig.update_layout(title=title, xaxis_title="step:token", clickmode="event+select",
                      yaxis_title="probability", yaxis_range=[0, 1.05],
                      xaxis_type="category", height=260, margin=MARGIN)
    return fig


def hypotheses_frame(hypotheses: Sequence[Any], piece: Piece, *, join: Callable[[Sequence[int]], str] | None = None
                     ) -> pd.DataFrame:
    """Beam search's finished hypotheses, best first: rank, text, tokens, log_prob, score, finished."""
    return pd.DataFrame([
        {"rank": i + 1, "text": join(h.tokens) if join else " ".join(piece(t) for t in h.tokens),
         "tokens": len(h.tokens), "log_prob": float(h.log_prob), "score": float(h.score),
         "finished": bool(h.finished)}
        for i, h in enumerate(hypotheses)
    ], columns=["rank", "text", "tokens", "log_prob", "score", "finished"])
