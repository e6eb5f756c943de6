"""The search tree of beam search as a chart: one node per candidate, labels placed so they never overlap.

Pure functions, like the rest of ``ui.charts``: ``BeamResult.history`` in, a pandas frame and a Plotly
figure out (re-exported by ``ui.charts.decoding``, which the Decoding page uses).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from . import label, labels

Piece = Callable[[int], str]

CHOSEN_COLOR = "#d62728"
OUTCOME_COLORS = {"root": "#7f7f7f", "kept": "#1f77b4", "finished": "#2ca02c", "pruned": "#c7c7c7"}


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
# width, about 700 px at 1024 px with the sidebar open, more on a wider screen).
TREE_WIDTH_PX = 700
TREE_ROW_PX = 56  # vertical room per leaf: a label of two lines (token, log P) plus the marker and a gap
TREE_MAX_HEIGHT_PX = 1200
TREE_FONT_PX = 14
MARKER_PX = 11
MAX_LABEL_CHARS = 12  # a longer token is cut with "…" (its hover has it whole)
TREE_MARGIN = dict(l=10, r=10, t=50, b=60)
_LABEL_PRIORITY = {"root": 0, "finished": 2, "kept": 3, "pruned": 4}  # the best path comes first (1)

Box = tuple[float, float, float, float]  # left, right, top, bottom in px; x from step 0's centre, y from row 0's


def _char_px(font_px: float) -> float:
    """A generous average glyph width; tokens are short, so over-estimating costs little."""
    return 0.62 * font_px


def tree_geometry(n_rows: float, n_columns: int) -> dict[str, float]:
    """Figure height and pixels per y unit / per step for a tree of n_rows leaves and n_columns steps.

    The x axis spans [-1, n_columns]: a step's column, and half a column's room beyond the first and the last
    step for their labels (Plotly cuts text at the plot's edge); the y axis [n_rows - 0.5, -0.5]."""
    height = min(TREE_MAX_HEIGHT_PX, TREE_MARGIN["t"] + TREE_MARGIN["b"] + TREE_ROW_PX * max(n_rows, 1.0))
    plot_h = height - TREE_MARGIN["t"] - TREE_MARGIN["b"]
    plot_w = TREE_WIDTH_PX - TREE_MARGIN["l"] - TREE_MARGIN["r"]
    return dict(height=height, row_px=plot_h / max(n_rows, 1.0), column_px=plot_w / (max(n_columns, 1) + 1))


def tree_labels(frame: pd.DataFrame, y: dict[int, float], row_px: float, column_px: float,
                font_px: float = TREE_FONT_PX) -> dict[int, tuple[str, str]]:
    """The text shown at each node and where (``"top center"`` or ``"bottom center"``).

    Every node's marker and every placed label is a box of pixels; a label goes above its node, or below when
    above is taken or past the plot's edge (where Plotly would cut it), and is left out when neither is free (the
    node keeps its marker and its hover). A label may be wider than a step's column where its neighbours leave
    room, so that on a long sentence (columns of 25 px) a token is written whole, never cut to "…": only one of
    more than MAX_LABEL_CHARS characters is. Labels are placed greedily: the best hypothesis's path first, then
    finished, kept and pruned nodes, each top to bottom. A label is two lines, the token and the log-probability
    of the prefix it ends, or the token alone where two lines find no room. Nodes without a label get "".
    """
    marker = MARKER_PX / 2 + 1
    line = 1.3 * font_px + 1  # Plotly's line height (1.3 em), and a pixel between lines of neighbours
    rows = list(frame.itertuples(index=False))
    n_columns = int(frame["depth"].max()) + 1 if rows else 1
    bounds = (-column_px, n_columns * column_px, -0.5 * row_px, (max(y.values(), default=0.0) + 0.5) * row_px)
    placed: dict[int, list[Box]] = {}  # column -> the boxes reaching into it

    def columns(box: Box) -> range:
        return range(int(np.floor(box[0] / column_px + 0.5)), int(np.floor(box[1] / column_px + 0.5)) + 1)

    def free(box: Box) -> bool:
        inside = bounds[0] <= box[0] and box[1] <= bounds[1] and bounds[2] <= box[2] and box[3] <= bounds[3]
        return inside and not any(
            min(box[1], b[1]) - max(box[0], b[0]) > 0.5 and min(box[3], b[3]) - max(box[2], b[2]) > 0.5
            for c in columns(box) for b in placed.get(c, ()))

    def place(box: Box) -> None:
        for c in columns(box):
            placed.setdefault(c, []).append(box)

    for r in rows:
        x, p = int(r.depth) * column_px, y[r.node] * row_px
        place((x - marker, x + marker, p - marker, p + marker))
    order = sorted(rows, key=lambda r: (1 if (r.best and r.outcome != "root") else _LABEL_PRIORITY[r.outcome],
                                        y[r.node]))
    text: dict[int, tuple[str, str]] = {int(r.node): ("", "top center") for r in rows}
    for r in order:
        x, p = int(r.depth) * column_px, y[r.node] * row_px
        token = str(r.token)
        if len(token) > MAX_LABEL_CHARS:
            token = token[: MAX_LABEL_CHARS - 1] + "…"
        log_p = f"{float(r.log_prob):.1f}"
        choices = [[token]] if r.outcome == "root" else [[token, log_p], [token]]
        for lines in choices:
            width, height = max(map(len, lines)) * _char_px(font_px), len(lines) * line
            spot = next(((position, box) for position, box in (
                ("top center", (x - width / 2, x + width / 2, p - marker - height, p - marker)),
                ("bottom center", (x - width / 2, x + width / 2, p + marker, p + marker + height))) if free(box)),
                None)
            if spot is not None:
                place(spot[1])
                text[int(r.node)] = ("<br>".join([label(lines[0]), *lines[1:]]), spot[0])
                break
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
                      # ticks on the steps only: a tick at the range's ends (-1, n) sat on the plot's edge and
                      # made the browser grow the margin for half its label
                      xaxis=dict(tickvals=list(range(n_columns)), range=[-1, n_columns]),
                      yaxis=dict(visible=False, range=[n_rows - 0.5, -0.5]))
    return fig
