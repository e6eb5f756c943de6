"""Charts for attention heads: what each head does (``head_summary``), what switching heads off
costs (``pruning_curve``) and where activation patching restores the clean output
(``activation_patching``). Data in (their DataFrames), figure out: nothing here runs a model.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from . import MARGIN, heatmap

KIND_ORDER = ("encoder", "decoder", "cross")
KIND_NAMES = {"encoder": "encoder self-attention", "decoder": "decoder self-attention", "cross": "cross-attention"}
ROLE_COLOURS = {"positional": "#1f77b4", "alignment": "#2ca02c", "syntactic": "#9467bd", "agreement": "#d62728",
                "no-op": "#7f7f7f", "mixed": "#ff7f0e"}
# importance measure -> (head_summary's column, what it is, in a few words)
MEASURES = {"ablation": ("importance", "loss change when off"),
            "gradient": ("importance_gradient", "Michel et al.'s expected |∂loss/∂gate|")}


def head_rows(summary: pd.DataFrame) -> list[str]:
    """The grid's row labels, one per (kind, layer) in model order: "encoder 0", ..., "cross 1"."""
    pairs = summary[["kind", "layer"]].drop_duplicates()
    pairs = pairs.assign(order=pairs.kind.map(KIND_ORDER.index)).sort_values(["order", "layer"])
    return [f"{k} {layer}" for k, layer in zip(pairs.kind, pairs.layer, strict=True)]


def head_name(kind: str, layer: int, head: int) -> str:
    """A head as every sentence about it names it: "cross-attention layer 1, head 0"."""
    return f"{KIND_NAMES.get(kind, kind)} layer {int(layer)}, head {int(head)}"


def head_claims(summary: pd.DataFrame, limit: int = 6) -> list[str]:
    """The first ``limit`` heads' claims (``head_roles``'s sentence on what a role rests on), each led by the head
    it is about and its role, in markdown: "**cross-attention layer 1, head 0** (alignment): picks ...". """
    rows = summary[summary.claim.fillna("") != ""].head(limit)
    return [f"**{head_name(r.kind, r.layer, r.head)}** ({r.role}): {r.claim}" for r in rows.itertuples()]


def head_grid(summary: pd.DataFrame, by: str = "ablation") -> go.Figure:
    """Rows = kind and layer, columns = head; colour = role, marker size and text = importance by the ``by``
    measure ("ablation": the ``importance`` column, "gradient": ``importance_gradient``).

    Each point carries customdata [kind, layer, head], so a click selects that head.
    """
    column, what = MEASURES[by]
    rows = head_rows(summary)
    values = np.abs(summary[column].to_numpy(dtype=float))
    largest = float(np.nanmax(values)) if len(summary) and not np.isnan(values).all() else 0.0
    fig = go.Figure()
    for role, colour in ROLE_COLOURS.items():
        part = summary[summary.role == role]
        if part.empty:
            continue
        importance = part[column].to_numpy(dtype=float)
        size = np.nan_to_num(12 + 28 * np.abs(importance) / largest, nan=12.0) if largest > 0 else \
            np.full(len(part), 12.0)
        fig.add_trace(go.Scatter(
            x=part["head"].tolist(), y=[rows.index(f"{k} {layer}") for k, layer in zip(part.kind, part.layer,
                                                                                        strict=True)],
            mode="markers+text", name=role, marker=dict(color=colour, size=size, line=dict(width=0)),
            text=[f"{v:+.2f}" for v in importance], textposition="top center",
            customdata=np.array([part.kind, part.layer, part["head"], part.role_detail], dtype=object).T,
            hovertemplate="%{customdata[0]} layer %{customdata[1]} head %{customdata[2]}<br>"
                          f"role {role} %{{customdata[3]}}<br>importance %{{text}}<extra></extra>"))
    fig.update_xaxes(title_text="head", tickvals=sorted(summary["head"].unique().tolist()))
    fig.update_yaxes(title_text=None, tickvals=list(range(len(rows))), ticktext=rows, autorange="reversed")
    fig.update_layout(title=f"Attention heads: role (colour) and importance (size, {what})",
                      margin=MARGIN, height=200 + 60 * len(rows), clickmode="event+select")
    return fig


def pruning_chart(curve: pd.DataFrame, by: str = "ablation") -> go.Figure:
    """Exact match (left axis) and loss (right axis) against the number of heads switched off, least important
    first by the ``by`` measure (named in the title)."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    removed = ["none"] + [f"{k} {layer} h{h}" for k, layer, h in (heads[-1] for heads in curve.heads_off[1:])]
    fig.add_trace(go.Scatter(x=curve.n_heads_off, y=curve.exact_match, name="exact match", mode="lines+markers",
                             customdata=removed, hovertemplate="%{x} heads off (last: %{customdata})<br>"
                             "exact match %{y:.2f}<extra></extra>"), secondary_y=False)
    fig.add_trace(go.Scatter(x=curve.n_heads_off, y=curve.loss, name="loss", mode="lines", line=dict(dash="dot"),
                             hovertemplate="%{x} heads off<br>loss %{y:.3f}<extra></extra>"), secondary_y=True)
    fig.update_xaxes(title_text="heads switched off (least important first)")
    fig.update_yaxes(title_text="exact match", range=[0, 1.02], secondary_y=False)
    fig.update_yaxes(title_text="loss (nats)", secondary_y=True)
    fig.update_layout(title=f"Pruning heads, least important first by {by} ({MEASURES[by][1]})", margin=MARGIN)
    return fig


def layer_effects(patching: pd.DataFrame, stack: str) -> np.ndarray:
    """The effects of ``{stack}.{l}.output`` as a (layers, positions) matrix."""
    part = patching[(patching.component == "layer_output") & (patching.kind == stack)]
    if part.empty:
        raise ValueError(f"no {stack} layer outputs in this patching table")
    return part.pivot(index="layer", columns="position", values="effect").sort_index().to_numpy(dtype=float)


def patching_layers(patching: pd.DataFrame, stack: str, tokens: Sequence[str]) -> go.Figure:
    """Layer x position heatmap of the effect of patching ``{stack}.{l}.output`` (1 = restores the clean run)."""
    z = layer_effects(patching, stack)
    return heatmap(z, list(tokens), [f"layer {layer}" for layer in range(z.shape[0])],
                   title=f"Patching {stack} layer outputs", x_title="position", y_title="layer", colorscale="RdBu",
                   zmid=0, colorbar_title="effect")


def patching_heads(patching: pd.DataFrame, kind: str, layer: int, tokens: Sequence[str]) -> go.Figure:
    """Head x query position heatmap for one attention sub-layer."""
    part = patching[(patching.component == "head") & (patching.kind == kind) & (patching.layer == layer)]
    if part.empty:
        raise ValueError(f"no {kind} layer {layer} heads in this patching table")
    z = part.pivot(index="head", columns="position", values="effect").sort_index().to_numpy(dtype=float)
    return heatmap(z, list(tokens), [f"head {h}" for h in range(z.shape[0])],
                   title=f"Patching {kind} layer {layer} heads", x_title="query position", y_title="head",
                   colorscale="RdBu", zmid=0, colorbar_title="effect")


def patching_head_grid(patching: pd.DataFrame) -> go.Figure:
    """(kind, layer) x head grid of each head's largest effect over query positions (by |effect|)."""
    part = patching[patching.component == "head"].copy()
    part["key"] = part.kind + " " + part.layer.astype(str)
    strongest = part.loc[part.groupby(["key", "head"]).effect.apply(lambda e: e.abs().idxmax())]
    rows = head_rows(part)
    z = strongest.pivot(index="key", columns="head", values="effect").reindex(rows).to_numpy(dtype=float)
    return heatmap(z, [f"head {h}" for h in range(z.shape[1])], rows, title="Largest patching effect per head",
                   x_title="head", y_title="", colorscale="RdBu", zmid=0, colorbar_title="effect")
