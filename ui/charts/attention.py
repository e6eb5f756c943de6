"""Charts for the attention page: one head as a heatmap, all heads as small multiples,
one query's row, the scores before the softmax, and what switching heads off changes.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

Rows are queries, columns keys. Kinds: "encoder" (self-attention over the source),
"decoder" (masked self-attention over the decoder input), "cross" (decoder queries over
the source). Layers and heads are counted from 0, as in the trace's names.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from transformer.network.trace import ATTENTION_KINDS, Trace

from . import MARGIN, heatmap, heatmap_trace, label, labels, ticks, to_numpy

KIND_TITLES = {
    "encoder": "Encoder self-attention",
    "decoder": "Decoder masked self-attention",
    "cross": "Cross-attention (encoder-decoder)",
}
LM_KIND_TITLES = {"decoder": "Causal self-attention"}  # a decoder-only model: one stack, no source to attend to
GROUP_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def kv_heads_of(trace: Trace, kind: str, layer: int) -> list[int] | None:
    """Which key/value head each query head of (kind, layer) reads (grouped-query attention: the trace's
    ``.kv_heads``, h // (H / H_kv)), or None where every head has its own keys and values."""
    name = f"{ATTENTION_KINDS[kind][0]}.{layer}.{ATTENTION_KINDS[kind][1]}.kv_heads"
    return [int(g) for g in to_numpy(trace[name])] if name in trace else None


def kv_group_frame(kv_heads: Sequence[int]) -> pd.DataFrame:
    """One row per key/value head: the query heads that share its keys and values (GQA; one group: MQA)."""
    groups: dict[int, list[int]] = {}
    for head, group in enumerate(kv_heads):
        groups.setdefault(int(group), []).append(head)
    return pd.DataFrame({"key/value head": list(groups), "query heads": [", ".join(map(str, h)) for h in
                                                                         groups.values()],
                         "heads in the group": [len(h) for h in groups.values()]})


def window_edge(window: int, n_queries: int, n_keys: int) -> go.Scatter | None:
    """The edge of a sliding window on a (query, key) heatmap: query i sees keys i - window + 1 .. i, so a
    staircase runs between key i - window and i - window + 1 of every row it cuts; None where the window is longer
    than the sequence (it cuts nothing). Queries and keys are the same positions (self-attention)."""
    xs: list[float | None] = []
    ys: list[float | None] = []
    for i in range(window, min(n_queries, n_keys)):
        xs += [i - window + 0.5, i - window + 0.5]
        ys += [i - 0.5, i + 0.5]
    if not xs:
        return None
    return go.Scatter(x=xs, y=ys, mode="lines", line=dict(color="#d62728", width=2), hoverinfo="skip",
                      name=f"sliding window edge ({window})", showlegend=False)


def head_weights(trace: Trace, kind: str, layer: int, head: int | None = None, batch: int = 0) -> np.ndarray:
    """One head's attention weights (T_q, T_k) from a trace; ``head=None`` averages the heads."""
    weights = to_numpy(trace.attention(kind, layer)[batch])  # (H, T_q, T_k)
    return weights.mean(axis=0) if head is None else weights[head]


def layer_weights(trace: Trace, kind: str, layer: int, batch: int = 0) -> np.ndarray:
    """Every head's attention weights of one layer (H, T_q, T_k), for the head view."""
    return to_numpy(trace.attention(kind, layer)[batch])


def head_scores(trace: Trace, kind: str, layer: int, head: int, batch: int = 0) -> np.ndarray:
    """One head's scaled scores Q K^T / sqrt(d_k) before the softmax (T_q, T_k), masked cells -inf."""
    return to_numpy(trace.scores(kind, layer)[batch, head])


def attention_heatmap(
    weights: Any, query_tokens: Sequence[str], key_tokens: Sequence[str], *, title: str = "Attention weights",
    window: int | None = None,
) -> go.Figure:
    """Weights after the softmax, 0..1; each row sums to 1. ``window``: a sliding layer's, whose edge is drawn
    (``window_edge``: left of it the mask hides every key)."""
    fig = heatmap(weights, key_tokens, query_tokens, title=title, x_title="key", y_title="query",
                  colorscale="Blues", zmin=0.0, zmax=1.0, colorbar_title="weight")
    edge = window_edge(window, len(query_tokens), len(key_tokens)) if window else None
    if edge is not None:
        fig.add_trace(edge)
    return fig


def scores_heatmap(
    scores: Any, query_tokens: Sequence[str], key_tokens: Sequence[str], *, title: str = "Scores before softmax",
    zmax: float | None = None,
) -> go.Figure:
    """Scaled scores, centred on 0; masked cells (-inf) stay blank and read "-inf". ``zmax`` fixes the
    colour range to [-zmax, zmax] (two models' scores side by side on one scale)."""
    limits = dict(zmin=-zmax, zmax=zmax) if zmax else {}
    return heatmap(scores, key_tokens, query_tokens, title=title, x_title="key", y_title="query",
                   colorscale="RdBu_r", zmid=0.0, colorbar_title="score", **limits)


def common_score_range(*scores: Any) -> float:
    """The largest finite |score| of several matrices: one colour range for all of them."""
    finite = [np.abs(m[np.isfinite(m)]) for m in map(to_numpy, scores)]
    return float(max((f.max() for f in finite if f.size), default=1.0)) or 1.0


def head_grid(
    trace: Trace, kind: str, *, batch: int = 0, n_layers: int | None = None,
    query_tokens: Sequence[str] | None = None, key_tokens: Sequence[str] | None = None,
    windows: Sequence[int | None] | None = None,
) -> go.Figure:
    """Every layer (rows) x head (columns) of one kind of attention as small heatmaps on one colour scale.

    Heads with a crisp pattern (a diagonal, a single column) stand out at a glance. With the tokens,
    the first column names the queries and the bottom row the keys (at most GRID_TICKS each). Where query heads
    share key/value heads (GQA, the trace's ``.kv_heads``) each title names its group ("KV 0") in the group's
    colour; ``windows`` (per layer, None for a full layer) draws a sliding layer's window edge on its panels.
    """
    stack = ATTENTION_KINDS[kind][0]
    layers = n_layers if n_layers is not None else trace.n_layers(stack)
    n_heads = trace.attention(kind, 0).size(1)
    groups = [kv_heads_of(trace, kind, layer) for layer in range(layers)]
    titles = [f"L{layer} H{head}" + ("" if groups[layer] is None else f" · KV {groups[layer][head]}")
              + (f" · w{windows[layer]}" if windows and windows[layer] else "")
              for layer in range(layers) for head in range(n_heads)]
    fig = make_subplots(rows=layers, cols=n_heads, subplot_titles=titles,
                        horizontal_spacing=0.02, vertical_spacing=min(0.08, 0.3 / max(1, layers)))
    traces, rows, cols = [], [], []
    for layer in range(layers):
        weights = to_numpy(trace.attention(kind, layer)[batch])  # (H, T_q, T_k)
        t_q, t_k = weights.shape[1:]
        for head in range(n_heads):
            traces.append(heatmap_trace(weights[head], [str(k) for k in range(t_k)], [str(q) for q in range(t_q)],
                                        coloraxis="coloraxis"))  # numbered: hover by position, no names
            rows.append(layer + 1)
            cols.append(head + 1)
    fig.add_traces(traces, rows=rows, cols=cols)  # at once: one by one is several times slower
    for layer, window in enumerate(windows or []):
        edge = window_edge(window, *trace.attention(kind, layer).shape[2:]) if window else None
        for head in range(n_heads) if edge is not None else ():
            fig.add_trace(edge, row=layer + 1, col=head + 1)
    for title, (layer, head) in zip(fig.layout.annotations, [(la, h) for la in range(layers)
                                                             for h in range(n_heads)], strict=False):
        if groups[layer] is not None:  # a group's heads in one colour
            title.font = dict(color=GROUP_COLORS[groups[layer][head] % len(GROUP_COLORS)])
    fig.update_xaxes(showticklabels=False)
    fig.update_yaxes(showticklabels=False, autorange="reversed")
    if query_tokens is not None and key_tokens is not None:
        for layer in range(layers):  # the first column's y axes, the bottom row's x axes
            fig.update_yaxes(showticklabels=True, tickfont_size=10, **_grid_ticks(query_tokens), row=layer + 1, col=1)
        for head in range(n_heads):
            fig.update_xaxes(showticklabels=True, tickfont_size=10, tickangle=-90, **_grid_ticks(key_tokens),
                             row=layers, col=head + 1)
    fig.update_layout(coloraxis=dict(colorscale="Blues", cmin=0.0, cmax=1.0, colorbar=dict(title="weight")),
                      title=f"{KIND_TITLES[kind]}: all layers x heads", margin=MARGIN,
                      height=90 + 150 * layers)
    return fig


GRID_TICKS = 12  # token labels along one side of the all-heads grid: small panels fit no more


def _grid_ticks(tokens: Sequence[str]) -> dict[str, list]:
    step = max(1, -(-len(tokens) // GRID_TICKS))
    positions = list(range(0, len(tokens), step))
    return {"tickvals": positions, "ticktext": labels([tokens[i] for i in positions])}


def grid_frame(trace: Trace, kind: str, query_tokens: Sequence[str], key_tokens: Sequence[str],
               *, batch: int = 0) -> pd.DataFrame:
    """The numbers behind ``head_grid``: one row per (layer, head, query, key) with its weight."""
    stack = ATTENTION_KINDS[kind][0]
    frames = []
    for layer in range(trace.n_layers(stack)):
        weights = to_numpy(trace.attention(kind, layer)[batch])  # (H, T_q, T_k)
        h, t_q, t_k = weights.shape
        head, query, key = np.meshgrid(np.arange(h), np.arange(t_q), np.arange(t_k), indexing="ij")
        frames.append(pd.DataFrame({
            "layer": layer, "head": head.ravel(), "query": query.ravel(),
            "query token": np.asarray(list(query_tokens), dtype=object)[query.ravel()],
            "key": key.ravel(), "key token": np.asarray(list(key_tokens), dtype=object)[key.ravel()],
            "weight": weights.ravel(),
        }))
    return pd.concat(frames, ignore_index=True)


def query_row_chart(
    weights: Any, query_index: int, query_tokens: Sequence[str], key_tokens: Sequence[str]
) -> go.Figure:
    """Where one query looks: its row of the attention matrix as bars over the keys."""
    row = to_numpy(weights)[query_index]
    fig = go.Figure(go.Bar(x=list(range(len(key_tokens))), y=row, text=[f"{v:.2f}" for v in row],
                           customdata=labels(key_tokens),
                           hovertemplate="key %{customdata}<br>weight %{y:.3f}<extra></extra>"))
    fig.update_xaxes(**ticks(key_tokens), title_text="key")
    fig.update_layout(title=f"Attention of query {query_index} ({label(query_tokens[query_index])})",
                      yaxis_title="weight", yaxis_range=[0, 1.05], margin=MARGIN, height=320)
    return fig


# --- head ablation ----------------------------------------------------------------------

_HEAD_LABEL = re.compile(r"^(encoder|decoder|cross) L(\d+) H(\d+)$")


def head_labels(n_encoder_layers: int, n_decoder_layers: int, n_heads: int, *, cross: bool = True) -> list[str]:
    """Every head of the model, named like "cross L1 H2" (kind, layer, head); ``cross=False``: a decoder-only
    model, which has no cross-attention."""
    names = []
    kinds = (("encoder", n_encoder_layers), ("decoder", n_decoder_layers), ("cross", n_decoder_layers if cross else 0))
    for kind, layers in kinds:
        names += [f"{kind} L{layer} H{head}" for layer in range(layers) for head in range(n_heads)]
    return names


def parse_heads(names: Sequence[str]) -> dict[tuple[str, int], list[int]]:
    """["cross L1 H2", "cross L1 H0"] -> {("cross", 1): [0, 2]}: the ``ablate`` argument of the model."""
    ablate: dict[tuple[str, int], list[int]] = {}
    for name in names:
        match = _HEAD_LABEL.match(name.strip())
        if not match:
            raise ValueError(f"not a head label like 'cross L1 H2': {name!r}")
        kind, layer, head = match.group(1), int(match.group(2)), int(match.group(3))
        ablate.setdefault((kind, layer), []).append(head)
    return {key: sorted(set(heads)) for key, heads in ablate.items()}


def logit_change_frame(
    decoder_tokens: Sequence[str], base_logits: Any, ablated_logits: Any, vocab: Sequence[str]
) -> pd.DataFrame:
    """Per decoder position: the predicted next token and its probability, with all heads and
    with the chosen heads off, and the largest change of any logit.

    base_logits / ablated_logits: (T, V) for the same decoder input.
    """
    base, ablated = to_numpy(base_logits), to_numpy(ablated_logits)
    if base.shape != ablated.shape or base.ndim != 2 or base.shape[0] != len(decoder_tokens):
        raise ValueError(f"logits of shapes {base.shape} and {ablated.shape} for {len(decoder_tokens)} positions")

    def softmax(x: np.ndarray) -> np.ndarray:
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    p_base, p_ablated = softmax(base), softmax(ablated)
    top_base, top_ablated = base.argmax(axis=-1), ablated.argmax(axis=-1)
    rows = np.arange(len(decoder_tokens))
    return pd.DataFrame({
        "position": rows,
        "decoder input": list(decoder_tokens),
        "next token": [vocab[i] for i in top_base],
        "p": p_base[rows, top_base],
        "next token (ablated)": [vocab[i] for i in top_ablated],
        "p (ablated)": p_ablated[rows, top_ablated],
        "p of original token (ablated)": p_ablated[rows, top_base],
        "max |logit change|": np.abs(base - ablated).max(axis=-1),
        "changed": top_base != top_ablated,
    })
