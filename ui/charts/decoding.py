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

from transformer.text.ids import BOS_ID, EOS_ID

from . import MARGIN, heatmap, label, labels, positional_labels, to_numpy

Piece = Callable[[int], str]

CHOSEN_COLOR = "#d62728"
OTHER_COLOR = "#1f77b4"
OUTCOME_COLORS = {"root": "#7f7f7f", "kept": "#1f77b4", "finished": "#2ca02c", "pruned": "#c7c7c7"}


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


def decode_step_views(result: Any, *, row: int = 0, bos_id: int = BOS_ID) -> list[StepView]:
    """One ``StepView`` per output step of greedy decoding or sampling (``DecodeResult`` with
    ``record=True``), up to and including the step that chose EOS."""
    if not result.steps:
        raise ValueError("this decoding was run without record=True: no steps to show")
    views: list[StepView] = []
    prefix = [bos_id]
    for t, step in enumerate(result.steps):
        if not bool(step.active[row]):
            break
        token = int(step.token[row])
        views.append(StepView(t + 1, list(prefix), to_numpy(step.top_ids[row]).astype(np.int64),
                              to_numpy(step.top_probs[row]), token, float(step.token_prob[row]),
                              to_numpy(step.cross_attention[row])))
        prefix.append(token)
    return views


def beam_step_views(result: Any, *, bos_id: int = BOS_ID, eos_id: int = EOS_ID) -> list[StepView]:
    """One ``StepView`` per step along the best hypothesis of beam search (``BeamResult``, record=True).

    At step t the view is that of the live beam whose prefix the best hypothesis extends; the
    chosen token is the best hypothesis's next token (EOS at the end of a finished one).
    """
    best = result.best
    path = list(best.tokens) + ([eos_id] if best.finished else [])
    views: list[StepView] = []
    for t, token in enumerate(path):
        if t >= len(result.history):
            break
        step = result.history[t]
        if step.top_ids is None or step.cross_attention is None:
            raise ValueError("this beam search was run without record=True: no steps to show")
        prefix = tuple(best.tokens[:t])
        beam = next((i for i, b in enumerate(step.beams) if tuple(b.tokens) == prefix), None)
        if beam is None:
            raise ValueError(f"step {t + 1}: no live beam holds the best hypothesis's prefix")
        candidate = next((c for c in step.candidates if c.beam == beam and int(c.token) == token), None)
        prob = float(np.exp(candidate.token_log_prob)) if candidate is not None else float("nan")
        views.append(StepView(t + 1, [bos_id, *prefix], to_numpy(step.top_ids[beam]).astype(np.int64),
                              to_numpy(step.top_probs[beam]), token, prob, to_numpy(step.cross_attention[beam]),
                              note=f"beam {beam + 1} of {len(step.beams)}"))
    return views


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
                           title: str | None = None) -> go.Figure:
    """Where this step's query looks in the source: layers (head-averaged) or one layer's heads x source."""
    matrix, rows = step_attention(cross_attention, layer=layer)
    _check_source(matrix, src_tokens)
    what = "every layer (head mean)" if layer is None else f"heads of layer {layer}"
    return heatmap(matrix, list(src_tokens), rows, title=title or f"Cross-attention: {what}",
                   x_title="source token", y_title="layer" if layer is None else "head", colorscale="Blues",
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
                             *, layer: int | None = None, title: str | None = None) -> go.Figure:
    """Output tokens (rows, one per step) x source tokens: the alignment the decoder learned."""
    matrix = output_attention(steps_attention, layer=layer)
    where = "mean over layers and heads" if layer is None else f"layer {layer}, mean over heads"
    title = title or f"Cross-attention per output step ({where})"
    return heatmap(matrix, list(src_tokens), list(out_tokens), title=title,
                   x_title="source token", y_title="output token", colorscale="Blues", zmin=0.0, zmax=1.0,
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
    ))
    fig.update_layout(title=title, xaxis_title="step:token", yaxis_title="probability", yaxis_range=[0, 1.05],
                      xaxis_type="category", height=260, margin=MARGIN)
    return fig


# --- beam search: the search tree ----------------------------------------------------

TREE_COLUMNS = ["node", "parent", "depth", "token", "token_log_prob", "log_prob", "outcome", "beam_index",
                "text", "best"]


def beam_tree_frame(
    history: Sequence[Any], piece: Piece, *, best: Sequence[int] | None = None, include_pruned: bool = False,
    bos: str = "<s>", eos: str = "</s>",
) -> pd.DataFrame:
    """The search tree of beam search (``BeamResult.history``) as one row per node.

    The root is BOS; each candidate a step considered is a child of the beam it extends:
    "kept" candidates are the live hypotheses of the next step (``beam_index`` is their
    index in that step's ``beams``), "finished" ones ended with EOS (a ``Hypothesis``),
    "pruned" ones fell out of the beam (left out unless ``include_pruned``). ``best`` are
    the best hypothesis's tokens: the nodes on its path get ``best=True``.
    Columns: see TREE_COLUMNS; ``parent`` is -1 for the root.
    """
    rows: list[dict[str, Any]] = [dict(node=0, parent=-1, depth=0, token=bos, token_log_prob=0.0, log_prob=0.0,
                                       outcome="root", beam_index=0, text="", best=True)]
    prefixes: dict[int, tuple[int, ...]] = {0: ()}
    beam_nodes = [0]  # node id of each live beam of the current step
    best_tokens = tuple(best) if best is not None else None
    for t, step in enumerate(history):
        if len(beam_nodes) != len(step.beams):
            raise ValueError(f"step {t} has {len(step.beams)} beams but the previous step kept {len(beam_nodes)}")
        next_nodes: list[int] = []
        for candidate in step.candidates:
            if candidate.outcome == "pruned" and not include_pruned:
                continue
            parent = beam_nodes[candidate.beam]
            node = len(rows)
            finished = candidate.outcome == "finished"
            prefix = prefixes[parent] + (() if finished else (int(candidate.token),))
            prefixes[node] = prefix
            on_best = best_tokens is not None and candidate.outcome != "pruned" and (
                prefix == best_tokens if finished else best_tokens[: len(prefix)] == prefix)
            token = eos if finished else piece(int(candidate.token))
            rows.append(dict(node=node, parent=parent, depth=t + 1, token=token,
                             token_log_prob=float(candidate.token_log_prob), log_prob=float(candidate.log_prob),
                             outcome=candidate.outcome,
                             beam_index=len(next_nodes) if candidate.outcome == "kept" else -1,
                             text=" ".join([piece(i) for i in prefix] + ([eos] if finished else [])),
                             best=bool(on_best)))
            if candidate.outcome == "kept":
                next_nodes.append(node)
        beam_nodes = next_nodes
    frame = pd.DataFrame(rows, columns=TREE_COLUMNS)
    if best_tokens is not None:
        # only the one path that ends at the best hypothesis: a finished best ends at its EOS node
        ends = frame[(frame["outcome"] == "finished") & frame["best"]]
        if len(ends):
            frame["best"] = frame["node"].isin(_path_to_root(frame, int(ends["node"].iloc[0])))
    return frame


def _path_to_root(frame: pd.DataFrame, node: int) -> list[int]:
    parents = dict(zip(frame["node"], frame["parent"], strict=True))
    path = [node]
    while parents[path[-1]] != -1:
        path.append(int(parents[path[-1]]))
    return path


def _tree_layout(frame: pd.DataFrame) -> dict[int, float]:
    """y of each node: leaves in depth-first order one unit apart, a parent centred on its children."""
    children: dict[int, list[int]] = {}
    for node, parent in zip(frame["node"], frame["parent"], strict=True):
        if parent != -1:
            children.setdefault(int(parent), []).append(int(node))
    y: dict[int, float] = {}
    next_leaf = 0.0
    stack: list[tuple[int, bool]] = [(0, False)]
    while stack:  # iterative post-order, so deep trees need no recursion
        node, expanded = stack.pop()
        kids = children.get(node, [])
        if not kids:
            y[node] = next_leaf
            next_leaf += 1.0
        elif expanded:
            y[node] = (y[kids[0]] + y[kids[-1]]) / 2
        else:
            stack.append((node, True))
            stack.extend((kid, False) for kid in reversed(kids))
    return y


# The tree's geometry in pixels, so labels can be placed where they cannot overlap. The
# width is a conservative guess of the page's column (Streamlit gives charts the column's
# width, about 700 px on a laptop, more on a projector at full width).
TREE_WIDTH_PX = 700
TREE_ROW_PX = 34  # vertical room per leaf: a label line plus the marker and a gap
TREE_MAX_HEIGHT_PX = 1200
TREE_FONT_PX = 13
MARKER_PX = 11
TREE_MARGIN = dict(l=10, r=10, t=50, b=60)
_LABEL_PRIORITY = {"root": 0, "finished": 2, "kept": 3, "pruned": 4}  # the best path comes first (1)


def _char_px(font_px: float) -> float:
    """A generous average glyph width; tokens are short, so over-estimating costs little."""
    return 0.62 * font_px


def tree_geometry(n_rows: float, n_columns: int) -> dict[str, float]:
    """Figure height and pixels per y unit / per step for a tree of n_rows leaves and n_columns steps."""
    height = min(TREE_MAX_HEIGHT_PX, TREE_MARGIN["t"] + TREE_MARGIN["b"] + TREE_ROW_PX * max(n_rows, 1.0))
    plot_h = height - TREE_MARGIN["t"] - TREE_MARGIN["b"]
    plot_w = TREE_WIDTH_PX - TREE_MARGIN["l"] - TREE_MARGIN["r"]
    # the y axis spans [-0.5, n_rows - 0.5] and the x axis [-0.5, n_columns - 0.5]: one unit per row / step
    return dict(height=height, row_px=plot_h / max(n_rows, 1.0), column_px=plot_w / max(n_columns, 1))


def tree_labels(frame: pd.DataFrame, y: dict[int, float], row_px: float, column_px: float,
                font_px: float = TREE_FONT_PX) -> dict[int, tuple[str, str]]:
    """The text shown at each node and where (``"top center"`` or ``"bottom center"``).

    In one step column every node's marker and every placed label occupy a band of
    pixels; a label goes above its node, or below when above is taken, and is left out
    when neither band is free (the node keeps its marker and its hover). Labels are placed
    greedily: the best hypothesis's path first, then finished, kept and pruned nodes, each
    top to bottom. A label wider than a step column is shortened with an ellipsis, so
    labels of neighbouring columns cannot touch either. Nodes without a label get "".
    """
    marker = MARKER_PX / 2 + 1
    height = font_px + 3
    max_chars = max(1, int(column_px / _char_px(font_px)))
    rows = list(frame.itertuples(index=False))
    taken: dict[int, list[tuple[float, float]]] = {}  # depth -> occupied pixel bands (top, bottom)
    for r in rows:
        p = y[r.node] * row_px
        taken.setdefault(int(r.depth), []).append((p - marker, p + marker))
    order = sorted(rows, key=lambda r: (1 if (r.best and r.outcome != "root") else _LABEL_PRIORITY[r.outcome],
                                        y[r.node]))
    text: dict[int, tuple[str, str]] = {int(r.node): ("", "top center") for r in rows}
    for r in order:
        p = y[r.node] * row_px
        bands = taken[int(r.depth)]
        free = [(position, band) for position, band in (("top center", (p - marker - height, p - marker)),
                                                        ("bottom center", (p + marker, p + marker + height)))
                if all(band[1] <= lo + 0.5 or band[0] >= hi - 0.5 for lo, hi in bands)]
        if not free:
            continue
        position, band = free[0]
        bands.append(band)
        token = str(r.token)
        if len(token) > max_chars:
            token = token[: max(1, max_chars - 1)] + "…"
        text[int(r.node)] = (label(token), position)
    return text


def beam_tree_chart(frame: pd.DataFrame, *, title: str = "Beam search tree") -> go.Figure:
    """The search tree left to right: x = step, one marker per node, labelled with its token.

    Edges on the best hypothesis's path are red and thick; node colours tell kept (blue),
    finished with EOS (green) and pruned (grey). Labels never overlap (``tree_labels``):
    where there is no room the node keeps only its marker; hover shows every node's
    prefix and log-probabilities, and the table under the chart has the numbers.
    """
    y = _tree_layout(frame)
    depth = dict(zip(frame["node"], frame["depth"], strict=True))
    best = dict(zip(frame["node"], frame["best"], strict=True))
    n_rows = max(y.values()) + 1 if y else 1.0
    n_columns = int(frame["depth"].max()) + 1 if len(frame) else 1
    geometry = tree_geometry(n_rows, n_columns)
    text = tree_labels(frame, y, geometry["row_px"], geometry["column_px"])
    fig = go.Figure()
    for on_best, color, width in ((False, "#bbbbbb", 1), (True, CHOSEN_COLOR, 3)):
        xs: list[float | None] = []
        ys: list[float | None] = []
        for node, parent in zip(frame["node"], frame["parent"], strict=True):
            if parent == -1 or bool(best[node] and best[parent]) != on_best:
                continue
            xs += [depth[parent], depth[node], None]
            ys += [y[parent], y[node], None]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(color=color, width=width), hoverinfo="skip",
                                 name="best path" if on_best else "edges", showlegend=on_best))
    for outcome, color in OUTCOME_COLORS.items():
        part = frame[frame["outcome"] == outcome]
        if part.empty:
            continue
        fig.add_trace(go.Scatter(
            x=part["depth"], y=[y[n] for n in part["node"]], mode="markers+text", name=outcome,
            text=[text[int(n)][0] for n in part["node"]], textfont=dict(size=TREE_FONT_PX),
            textposition=[text[int(n)][1] for n in part["node"]],
            marker=dict(size=MARKER_PX, color=color, line=dict(width=1, color="white")),
            customdata=np.stack([labels(part["text"]), part["token_log_prob"], part["log_prob"]], axis=-1),
            hovertemplate="%{customdata[0]}<br>log p(token) = %{customdata[1]:.3f}"
                          "<br>log p(prefix) = %{customdata[2]:.3f}<extra></extra>",
        ))
    fig.update_layout(title=title, xaxis_title="step", height=int(geometry["height"]), margin=TREE_MARGIN,
                      legend=dict(orientation="h", y=-0.08, yanchor="top"),
                      xaxis=dict(dtick=1, range=[-0.5, n_columns - 0.5]),
                      yaxis=dict(visible=False, range=[n_rows - 0.5, -0.5]))
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
