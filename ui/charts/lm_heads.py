"""Charts for the heads of a decoder-only language model (``lm_head_summary``'s table): a layer x head grid per
score with its chance baseline and interval in the hover, and a map of the roles. Data in, figure out: nothing here
runs a model.

Rows are layers, a sliding-window layer named so on its row ("layer 0 · sliding, 4096 keys"); columns are query
heads, named with the key/value head they read under grouped-query attention ("h3 · kv1") and separated by a thin
line between key/value groups. A cell a role rests on carries ``CLAIM_MARK`` (the role's ``claim`` says why); a
score that is undefined (NaN: a sliding window shorter than the repeat) is written "undefined", never drawn as 0.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from . import CELL_FONT_PX, MARGIN, MAX_CELLS_PER_SIDE_WITH_TEXT, label

# score column -> (its name on the page, what it measures in one sentence)
SCORES = {
    "induction": ("induction (prefix matching)",
                  "the weight a query of the second repeat puts on the token right after its own token's earlier "
                  "occurrence: the look-up half of Olsson et al.'s induction head, which then copies that token."),
    "previous_token": ("previous token", "the weight each query puts on the token just before it."),
    "duplicate_token": ("duplicate token", "the weight a query puts on earlier copies of its own token."),
    "sink": ("sink", "the weight each query puts on the first token, whatever it holds: Xiao et al.'s attention "
                     "sink, where a head parks the weight it has no use for."),
    "copying": ("copying", "how the head's output, when it reads one token, ranks that token among the sequence's "
                           "other tokens in the logits (1: always above all of them; chance 0.5)."),
}
CHANCE = {"copying": "a head blind to the token it reads",
          **{name: "uniform attention over the visible keys" for name in SCORES if name != "copying"}}
# lm_head_roles: the scores each role rests on (its claim gives their numbers)
ROLE_SCORES = {"induction": ("induction", "copying"), "prefix-matching": ("induction",),
               "previous-token": ("previous_token",), "duplicate-token": ("duplicate_token",), "sink": ("sink",),
               "copying": ("copying",), "mixed": ()}
ROLE_COLOURS = {"induction": "#d62728", "prefix-matching": "#ff9896", "previous-token": "#1f77b4",
                "duplicate-token": "#9467bd", "sink": "#7f7f7f", "copying": "#2ca02c", "mixed": "#ff7f0e"}
CLAIM_MARK = "★"  # on a cell whose score the head's role rests on
UNDEFINED = "undefined"  # a NaN score's cell text (a large grid writes UNDEFINED_SHORT, its hover the reason)
UNDEFINED_SHORT = "–"
WRAP = 70  # characters per line of a claim in a hover box


def layer_labels(summary: pd.DataFrame) -> list[str]:
    """One label per layer, in order: "layer 0", or "layer 1 · sliding, 4096 keys" for a sliding-window layer."""
    layers = summary.drop_duplicates("layer").sort_values("layer")
    return [f"layer {int(r.layer)}" + (f" · sliding, {int(r.window)} keys" if r.layer_type == "sliding" else "")
            for r in layers.itertuples()]


def grouped(summary: pd.DataFrame) -> bool:
    """Whether several query heads share a key/value head (grouped-query or multi-query attention)."""
    return summary.kv_head.nunique() < summary["head"].nunique()


def head_labels(summary: pd.DataFrame) -> list[str]:
    """One label per query head: "h3", or "h3 · kv1" (the key/value head it reads) where heads share them."""
    heads = summary.drop_duplicates("head").sort_values("head")
    return [f"h{int(r.head)}" + (f" · kv{int(r.kv_head)}" if grouped(summary) else "") for r in heads.itertuples()]


def kv_groups(summary: pd.DataFrame) -> dict[int, list[int]]:
    """key/value head -> the query heads that read it (the same in every layer)."""
    heads = summary.drop_duplicates("head").sort_values("head")
    groups: dict[int, list[int]] = {}
    for r in heads.itertuples():
        groups.setdefault(int(r.kv_head), []).append(int(r.head))
    return groups


def lm_head_name(row: pd.Series | object, with_kv: bool = True) -> str:
    """A head as every sentence about it names it: "layer 1 (sliding, 4096 keys), head 3 (key/value head 1)"."""
    sliding = f" (sliding, {int(row.window)} keys)" if row.layer_type == "sliding" else ""
    kv = f" (key/value head {int(row.kv_head)})" if with_kv else ""
    return f"layer {int(row.layer)}{sliding}, head {int(row.head)}{kv}"


def claimed(summary: pd.DataFrame, score: str) -> pd.Series:
    """Per row, whether the head's role rests on ``score``."""
    return summary.role.map(lambda role: score in ROLE_SCORES.get(role, ())).astype(bool)


def score_matrix(summary: pd.DataFrame, score: str) -> np.ndarray:
    """The ``score`` column as a (layers, heads) matrix, NaN where undefined."""
    return summary.pivot(index="layer", columns="head", values=score).sort_index().sort_index(axis=1) \
        .to_numpy(dtype=float)


def _wrap(text: str) -> str:
    return "<br>".join(textwrap.wrap(label(text), WRAP))


def _score_hover(row: object, score: str, is_claimed: bool) -> str:
    name = SCORES[score][0]
    value = getattr(row, score)
    if pd.isna(value):
        why = f": {row.undefined}" if row.undefined else ""
        measured = _wrap(f"{name}: {UNDEFINED}{why}")
    else:
        low, high = getattr(row, f"{score}_low"), getattr(row, f"{score}_high")
        measured = f"{name}: {value:.3f} (95% interval {low:.3f}–{high:.3f})"
    chance = f"chance ({CHANCE[score]}): {getattr(row, f'{score}_baseline'):.3f}"
    role = f"role: {row.role}" + (f" {CLAIM_MARK} rests on this score" if is_claimed else "")
    claim = f"<br>{_wrap(row.claim)}" if row.claim else ""
    return f"{label(lm_head_name(row))}<br>{measured}<br>{chance}<br>{role}{claim}"


def _group_lines(fig: go.Figure, summary: pd.DataFrame) -> None:
    """A thin vertical line between key/value groups, where heads share them (and there is more than one)."""
    groups = kv_groups(summary)
    if not grouped(summary) or len(groups) < 2:
        return
    for heads in list(groups.values())[1:]:
        fig.add_vline(x=min(heads) - 0.5, line=dict(color="#444", width=1, dash="dot"))


def lm_score_grid(summary: pd.DataFrame, score: str) -> go.Figure:
    """Layer x head heatmap of one of ``SCORES`` (0 to 1); the hover gives the value with its 95% interval, its
    chance baseline, the role and its claim; ``CLAIM_MARK`` marks the cells a role rests on."""
    if score not in SCORES:
        raise ValueError(f"score must be one of {list(SCORES)}, got {score!r}")
    frame = summary.sort_values(["layer", "head"])
    z = score_matrix(frame, score)
    n_layers, n_heads = z.shape
    small = max(n_layers, n_heads) <= MAX_CELLS_PER_SIDE_WITH_TEXT
    marks = claimed(frame, score).to_numpy().reshape(n_layers, n_heads)
    rows = list(frame.itertuples())
    hover = np.array([_score_hover(r, score, m) for r, m in zip(rows, marks.ravel(), strict=True)],
                     dtype=object).reshape(n_layers, n_heads)
    text = np.empty((n_layers, n_heads), dtype=object)
    for (i, j), value in np.ndenumerate(z):
        mark = CLAIM_MARK if marks[i, j] else ""
        if np.isnan(value):
            text[i, j] = UNDEFINED if small else UNDEFINED_SHORT
        else:
            text[i, j] = f"{value:.2f}{mark}" if small else mark
    fig = go.Figure(go.Heatmap(
        z=z, x=list(range(n_heads)), y=list(range(n_layers)), zmin=0.0, zmax=1.0, colorscale="Blues",
        text=text, texttemplate="%{text}", textfont=dict(size=CELL_FONT_PX), customdata=hover,
        hovertemplate="%{customdata}<extra></extra>", xgap=1, ygap=1, colorbar=dict(title=SCORES[score][0])))
    _group_lines(fig, frame)
    fig.update_xaxes(title_text="head", tickvals=list(range(n_heads)), ticktext=head_labels(frame))
    fig.update_yaxes(title_text=None, tickvals=list(range(n_layers)), ticktext=layer_labels(frame),
                     autorange="reversed")
    fig.update_layout(title=f"{SCORES[score][0]}: per head ({CLAIM_MARK}: the head's role rests on it)",
                      margin=MARGIN, height=min(900, 200 + 30 * n_layers))
    return fig


def _role_hover(row: object) -> str:
    claim = f"<br>{_wrap(row.claim)}" if row.claim else ""
    return f"{label(lm_head_name(row))}<br>role: {row.role}{claim}"


def lm_role_grid(summary: pd.DataFrame) -> go.Figure:
    """Layer x head map of the roles (colour), sliding-window layers shaded and named on their row, key/value groups
    on the head axis. Each point's customdata starts [kind, layer, head], so a click selects that head."""
    frame = summary.sort_values(["layer", "head"])
    layers = layer_labels(frame)
    fig = go.Figure()
    for role, colour in ROLE_COLOURS.items():
        part = frame[frame.role == role]
        if part.empty:
            continue
        fig.add_trace(go.Scatter(
            x=part["head"].tolist(), y=part["layer"].tolist(), mode="markers", name=role,
            marker=dict(color=colour, size=18, symbol="square", line=dict(width=0)),
            customdata=np.array([part.kind, part.layer, part["head"], [_role_hover(r) for r in part.itertuples()]],
                                dtype=object).T,
            hovertemplate="%{customdata[3]}<extra></extra>"))
    for layer in frame.loc[frame.layer_type == "sliding", "layer"].unique():
        fig.add_hrect(y0=layer - 0.5, y1=layer + 0.5, fillcolor="#bbbbbb", opacity=0.25, line_width=0, layer="below")
    _group_lines(fig, frame)
    n_heads = frame["head"].nunique()
    fig.update_xaxes(title_text="head", tickvals=list(range(n_heads)), ticktext=head_labels(frame),
                     range=[-0.5, n_heads - 0.5])
    fig.update_yaxes(title_text=None, tickvals=list(range(len(layers))), ticktext=layers, autorange="reversed")
    fig.update_layout(title="Each head's role (grey rows: sliding-window layers)", margin=MARGIN,
                      height=min(900, 200 + 30 * len(layers)), clickmode="event+select")
    return fig


def lm_head_claims(summary: pd.DataFrame, limit: int = 8) -> list[str]:
    """The claims of the first ``limit`` heads with a role (induction first, in ``ROLE_COLOURS``' order, then by
    layer and head), each led by the head it describes and its role, in markdown:
    "**layer 1, head 3 (key/value head 1)** (induction): puts 62% of its weight ..."."""
    order = {role: i for i, role in enumerate(ROLE_COLOURS)}
    rows = summary[(summary.role != "mixed") & (summary.claim.fillna("") != "")]
    rows = rows.assign(order=rows.role.map(order)).sort_values(["order", "layer", "head"]).head(limit)
    return [f"**{lm_head_name(r)}** ({r.role}): {r.claim}" for r in rows.itertuples()]


def role_counts(summary: pd.DataFrame) -> pd.DataFrame:
    """How many heads have each role (every role listed, in ``ROLE_COLOURS``' order), with their layers."""
    rows = []
    for role in ROLE_COLOURS:
        part = summary[summary.role == role]
        rows.append({"role": role, "heads": len(part),
                     "layers": ", ".join(str(int(layer)) for layer in sorted(part.layer.unique()))})
    return pd.DataFrame(rows, columns=["role", "heads", "layers"])
