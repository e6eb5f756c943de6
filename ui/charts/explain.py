"""Charts for the explanation page: how each attribution method scores the source tokens,
how far the methods agree, how much of each prediction comes from the source (ALTI+), whether
a method's map survives randomizing the model, and what each decoder layer would already predict.

Attributions are (T-1, S) matrices from ``transformer.explain.attribute`` for one sentence:
row t explains output token t (the token after decoder position t), one column per source
token. Methods have different units (probabilities, norms, log-probability differences),
so wherever they share a colour scale each row is divided by its largest |value| first
(``normalise_rows``): signs and ranks survive, units do not; the titles say so.
Data in, figure or table out: nothing here runs a model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from . import CELL_FONT_PX, MARGIN, MAX_HOVER_CELLS, heatmap, heatmap_trace, labels, matrix_frame, ticks, to_numpy
from .palette import bar_style, line_style

UNDEFINED = "undefined"  # what a NaN cell (a row a method cannot define: ALTI+, value zeroing) reads, never 0


def normalise_rows(matrix: Any) -> np.ndarray:
    """Each row divided by its largest |value| (rows of zeros stay zero, undefined rows stay NaN): values in
    [-1, 1]."""
    z = to_numpy(matrix)
    undefined = np.isnan(z).any(axis=-1, keepdims=True)
    scale = np.abs(np.nan_to_num(z)).max(axis=-1, keepdims=True)
    out = np.divide(z, scale, out=np.zeros_like(z), where=scale > 0)
    return np.where(undefined, np.nan, out)


def undefined_rows(matrix: Any) -> np.ndarray:
    """(rows,) bool: the rows a method left undefined (NaN)."""
    return np.isnan(to_numpy(matrix)).any(axis=-1)


def token_row_bars(
    attributions: Mapping[str, Any], src_tokens: Sequence[str], output_token: str, row: int
) -> go.Figure:
    """One output token's row for every method as grouped bars over the source tokens (row-normalised)."""
    fig = go.Figure()
    for method, matrix in attributions.items():
        values = normalise_rows(to_numpy(matrix)[row][None, :])[0]
        if values.shape != (len(src_tokens),):
            raise ValueError(f"{method}: row of {values.shape[0]} values for {len(src_tokens)} source tokens")
        name = f"{method}: {UNDEFINED} for this token" if np.isnan(values).any() else method  # no bars, not 0
        fig.add_trace(go.Bar(x=list(range(len(src_tokens))), y=values, name=name, marker=bar_style(method),
                             customdata=labels(src_tokens),
                             hovertemplate=f"{method}<br>%{{customdata}}<br>%{{y:.3f}}<extra></extra>"))
    fig.update_xaxes(**ticks(src_tokens), title_text="source token")
    fig.update_yaxes(title_text="attribution ÷ row's max |value|", range=[-1.05, 1.05])
    fig.update_layout(barmode="group", margin=MARGIN, height=380,
                      title=f"Why output {row} ({labels([output_token])[0]}): each method, "
                            f"normalised by its largest |value|")
    return fig


def method_grid(
    attributions: Mapping[str, Any], src_tokens: Sequence[str], output_tokens: Sequence[str], *, columns: int = 4
) -> go.Figure:
    """Small multiples of every method's output × source matrix on one colour scale, rows normalised."""
    methods = list(attributions)
    if not methods:
        raise ValueError("no attributions to draw")
    titles = [f"{m} ({int(undefined_rows(attributions[m]).sum())} rows {UNDEFINED})"
              if undefined_rows(attributions[m]).any() else m for m in methods]
    named = len(methods) * len(src_tokens) * len(output_tokens) <= 2 * MAX_HOVER_CELLS  # tokens in hover, if cheap
    traces = []
    for method in methods:
        z = normalise_rows(attributions[method])
        if z.shape != (len(output_tokens), len(src_tokens)):
            raise ValueError(f"{method}: matrix {z.shape} for {len(output_tokens)} outputs x {len(src_tokens)} sources")
        trace = heatmap_trace(z, src_tokens, output_tokens, x_title="source", y_title="output",
                              coloraxis="coloraxis", name_cells=named)
        if np.isnan(z).any():  # a blank cell reads "undefined" on hover, never a number
            trace.text = [[UNDEFINED if np.isnan(v) else f"{v:.3f}" for v in line] for line in z]
            trace.hovertemplate = trace.hovertemplate.replace("%{z:.3f}", "%{text}")
        traces.append(trace)
    return panel_grid(titles, traces, src_tokens, output_tokens, columns=columns,
                      title="Every method, output (rows) x source (columns); each row ÷ its largest |value|, "
                            "so scales compare")


def panel_grid(titles: Sequence[str], traces: Sequence[go.Heatmap], x_tokens: Sequence[str],
               y_tokens: Sequence[str], *, columns: int, title: str) -> go.Figure:
    """Heatmap panels (``traces``, each on the shared ``coloraxis``, the row-normalised scale) in a grid of
    ``columns``, every panel over the same columns and rows: ``method_grid``'s layout, shared by the language
    model's grid (``lm_explain.lm_method_grid``)."""
    cols = min(columns, len(traces))
    n_rows = -(-len(traces) // cols)
    # Between two rows: the upper panels' x labels (upright where crowded, up to presentation mode's 14 px at a
    # generous 0.62 em a character) and the lower panels' titles (16 px); a fixed 12% ran them into each other.
    gap_px = 16 + 0.62 * 14 * max((len(str(t)) for t in x_tokens), default=1) + 1.3 * 16 + 8
    height = 120 + 260 * n_rows + int(gap_px) * (n_rows - 1)
    fig = make_subplots(rows=n_rows, cols=cols, subplot_titles=list(titles), horizontal_spacing=0.03,
                        vertical_spacing=min(0.9 / max(1, n_rows - 1), gap_px / (height - MARGIN["t"] - MARGIN["b"])))
    fig.add_traces(list(traces), rows=[i // cols + 1 for i in range(len(traces))],
                   cols=[i % cols + 1 for i in range(len(traces))])
    fig.update_xaxes(**ticks(x_tokens))
    fig.update_yaxes(**ticks(y_tokens), autorange="reversed")
    # Every panel has the same rows: only the first column writes them. Written beside every panel, the labels
    # stood over the left neighbour's last column (the panels are 3% of the width apart).
    for col in range(2, cols + 1):
        fig.update_yaxes(showticklabels=False, col=col)
    fig.update_layout(coloraxis=dict(colorscale="RdBu_r", cmin=-1.0, cmax=1.0, colorbar=dict(title="row-normalised")),
                      title=title, margin=MARGIN, height=height)
    return fig


def agreement_heatmap(table: pd.DataFrame) -> go.Figure:
    """The methods × methods table of Spearman's ρ from ``transformer.explain.agreement``."""
    names = [str(n) for n in table.index]
    return heatmap(table.to_numpy(dtype=float), names, names, title="Agreement between methods (Spearman's ρ)",
                   x_title="method", y_title="method", colorscale="RdBu_r", zmin=-1.0, zmax=1.0,
                   colorbar_title="ρ", show_values=True)


def logit_lens_grid(
    top_log_probs: Any, top_pieces: Any, positions: Sequence[str], *, title: str = "Logit lens",
    x_title: str = "decoder position (reads this token)"
) -> go.Figure:
    """Each layer's top next token of one sentence (``logit_lens_top``): its log-probability and its piece, both
    (n_layers, T) -> layer × position grid. Cell text = the piece, colour = its probability."""
    lp = to_numpy(top_log_probs)
    pieces = np.asarray(top_pieces, dtype=object)
    if lp.ndim != 2 or lp.shape[1] != len(positions) or pieces.shape != lp.shape:
        raise ValueError(f"log-probabilities {lp.shape} and pieces {pieces.shape} must both be (layers, "
                         f"{len(positions)} positions)")
    prob = np.exp(lp)  # (L, T)
    text = np.asarray(labels(list(pieces.ravel())), dtype=object).reshape(lp.shape)
    layers = [f"layer {layer}" for layer in range(lp.shape[0])]
    fig = go.Figure(go.Heatmap(
        z=prob, x=list(range(len(positions))), y=list(range(len(layers))), text=text, texttemplate="%{text}",
        textfont=dict(size=CELL_FONT_PX),
        customdata=np.broadcast_to(np.asarray(labels(positions), dtype=object), lp.shape),
        hovertemplate="%{y}: after %{customdata}<br>top %{text}: p = %{z:.3f}<extra></extra>",
        colorscale="Blues", zmin=0.0, zmax=1.0, colorbar=dict(title="p(top)"), xgap=1, ygap=1,
    ))
    fig.update_xaxes(**ticks(positions), title_text=x_title)
    fig.update_yaxes(tickvals=list(range(len(layers))), ticktext=layers, autorange="reversed")
    fig.update_layout(title=f"{title}: each layer's top next token and its probability", margin=MARGIN,
                      height=160 + 40 * len(layers))
    return fig


def attribution_frame(matrix: Any, src_tokens: Sequence[str], output_tokens: Sequence[str]) -> pd.DataFrame:
    """One method's numbers as a table (for CSV download), rows and columns labelled "t:token"."""
    return matrix_frame(matrix, list(output_tokens), list(src_tokens))


def row_frame(attributions: Mapping[str, Any], src_tokens: Sequence[str], row: int) -> pd.DataFrame:
    """One output token's row for every method, unnormalised: methods (rows) x source tokens (columns)."""
    values = np.stack([to_numpy(matrix)[row] for matrix in attributions.values()])  # (methods, S)
    return matrix_frame(values, list(attributions), list(src_tokens))


def residual_matrix(frame: pd.DataFrame, stack: str) -> tuple[np.ndarray, list[str]]:
    """``residual_stream``'s rows of one stack (batch 0) -> ((sub-layers, positions) ratio
    update_norm / stream_norm, the sub-layer labels "L0 self_attn", ... in the order they run)."""
    rows = frame[(frame["stack"] == stack) & (frame["batch"] == 0)]
    if rows.empty:
        raise ValueError(f"no residual-stream rows for the {stack}")
    ratio = rows.assign(ratio=rows["update_norm"] / rows["stream_norm"])
    order = rows[["layer", "sublayer"]].drop_duplicates()  # the order the hooks recorded them: the forward order
    table = ratio.pivot_table(index=["layer", "sublayer"], columns="position", values="ratio", sort=False)
    table = table.reindex(pd.MultiIndex.from_frame(order))
    return table.to_numpy(), [f"L{layer} {sublayer}" for layer, sublayer in table.index]


def residual_heatmap(frame: pd.DataFrame, stack: str, tokens: Sequence[str]) -> go.Figure:
    """How much each sub-layer adds to the residual stream at each position, relative to the stream itself."""
    matrix, names = residual_matrix(frame, stack)
    if matrix.shape[1] != len(tokens):
        raise ValueError(f"{matrix.shape[1]} positions for {len(tokens)} tokens")
    return heatmap(matrix, tokens, names, title=f"{stack.capitalize()}: ‖what the sub-layer adds‖ ÷ ‖the stream it "
                   "adds to‖", x_title="position", y_title="sub-layer", colorscale="Viridis", zmin=0.0,
                   colorbar_title="ratio", height=120 + 28 * len(names))


def source_share_chart(share: Any, output_tokens: Sequence[str], reason: str = "", *,
                       parts: tuple[str, str] = ("source", "target prefix"), rows: str = "output token") -> go.Figure:
    """ALTI+'s headline chart (Ferrando et al. 2022): per output token, the share of its prediction that comes from
    the source (a line), and above it, shaded up to 1, the share that comes from the target prefix. An undefined
    share (NaN) is a gap in the line and a grey "undefined" mark across the chart, its hover giving ``reason``.
    ``parts`` name the two sides and ``rows`` the tokens (a language model's: "prompt", "continuation so far",
    "generated token")."""
    source, prefix = parts
    values = to_numpy(share)
    if values.shape != (len(output_tokens),):
        raise ValueError(f"{values.shape} shares for {len(output_tokens)} output tokens")
    x = list(range(len(output_tokens)))
    text = labels(output_tokens)
    undefined = np.isnan(values)
    n_undefined = int(undefined.sum())
    marks = [go.Scatter(x=[i for i in x if undefined[i]], y=[0.5] * n_undefined, mode="markers+text",
                        marker=dict(symbol="x-thin-open", size=14, color="grey"), text=[UNDEFINED] * n_undefined,
                        textposition="top center", textfont=dict(color="grey"), name=UNDEFINED,
                        customdata=[text[i] for i in x if undefined[i]],
                        hovertemplate=f"%{{customdata}}: {UNDEFINED}" + (f" ({reason})" if reason else "") +
                        "<extra></extra>")] if undefined.any() else []
    fig = go.Figure([
        go.Scatter(x=x, y=values, mode="lines+markers", name=source, customdata=text,
                   hovertemplate=f"%{{customdata}}: {source} %{{y:.0%}}<extra></extra>"),
        go.Scatter(x=x, y=np.where(undefined, np.nan, 1.0), mode="lines", fill="tonexty", line=dict(width=0),
                   fillcolor="rgba(239, 85, 59, 0.25)", name=f"{prefix} (shaded)", customdata=1.0 - values,
                   hovertemplate=f"{prefix} %{{customdata:.0%}}<extra></extra>"),
        *marks,
    ])
    for i in np.flatnonzero(undefined):  # a grey band over the whole height: no share at all, not 50%
        fig.add_vrect(x0=i - 0.5, x1=i + 0.5, fillcolor="grey", opacity=0.15, line_width=0)
    fig.update_xaxes(**ticks(output_tokens), title_text=rows)
    fig.update_yaxes(range=[0.0, 1.0], tickformat=".0%", title_text="share of the prediction")
    fig.update_layout(title=f"Where each prediction comes from: the {source} (line) or the {prefix} (shaded)",
                      margin=MARGIN, height=340, hovermode="x unified")
    return fig


def randomization_chart(frame: pd.DataFrame, threshold: float = 0.5) -> go.Figure:
    """``randomization_check``'s table (Adebayo et al. 2018) -> Spearman's ρ with the trained model's map against the
    number of layers randomized, one line per method. A method whose map keeps ρ >= ``threshold`` with every layer
    randomized (``random_like``) is drawn dashed and named as not depending on what the model learned."""
    if frame.empty:
        raise ValueError("no randomization results to draw")
    steps = frame.drop_duplicates("layers_randomized").sort_values("layers_randomized")
    fig = go.Figure()
    for method, rows in frame.groupby("method", sort=False):
        rows = rows.sort_values("layers_randomized")
        random_like = bool(rows["random_like"].iloc[0])
        name = f"{method}: does not depend on what the model learned" if random_like else str(method)
        style = line_style(str(method))  # its colour and symbol; the dash says "does not depend"
        fig.add_trace(go.Scatter(
            x=rows["layers_randomized"], y=rows["rank_correlation"], mode="lines+markers", name=name,
            line=dict(color=style["line"]["color"], dash="dash" if random_like else "solid"), marker=style["marker"],
            customdata=rows["randomized"],
            hovertemplate=f"{method}<br>randomized: %{{customdata}}<br>ρ = %{{y:.2f}}<extra></extra>"))
    fig.add_hline(y=threshold, line=dict(color="grey", dash="dot"),
                  annotation_text=f"ρ = {threshold}", annotation_position="bottom right")
    fig.update_xaxes(tickvals=list(steps["layers_randomized"]),
                     ticktext=labels(["trained", *steps["randomized"].iloc[1:]]),
                     title_text="randomized, cascading from the output down (each step adds a layer)")
    fig.update_yaxes(range=[-1.05, 1.05], title_text="Spearman's ρ with the trained model's map")
    fig.update_layout(title="Randomization check: does the map change when the model's weights are random?",
                      margin=MARGIN, height=420)
    return fig


def ig_convergence_chart(frame: pd.DataFrame, tolerance: float, floor: float) -> go.Figure:
    """``Explanation.ig_convergence``'s table -> integrated gradients' |delta| / |f(x) - f(x')| per output token
    (Sundararajan et al. 2017's completeness, checked row by row), a bar per token, red where the row is not within
    tolerance (``tolerance`` of its gap plus ``floor``), a dotted line at ``tolerance``. A row whose gap is 0 has no
    ratio and no bar; its hover says "undefined"."""
    if frame.empty:
        raise ValueError("no output tokens to draw")
    x = list(range(len(frame)))
    ratio = frame["|delta| / |gap|"].to_numpy(dtype=float)
    within = frame["within tolerance"].to_numpy(dtype=bool)
    said = np.array(["undefined" if np.isnan(r) else f"{r:.1%}" for r in ratio], dtype=object)
    custom = np.stack([np.asarray(labels(list(frame["output token"])), dtype=object), frame["f(x) − f(x′)"],
                       frame["delta"], said, np.where(within, "within tolerance", "above tolerance")], axis=-1)
    fig = go.Figure(go.Bar(
        x=x, y=ratio, marker_color=np.where(within, "#636efa", "#ef553b"), customdata=custom,
        hovertemplate="%{customdata[0]}: f(x) − f(x′) = %{customdata[1]:.4f}, delta = %{customdata[2]:+.4f}"
                      "<br>|delta| / |gap| = %{customdata[3]} (%{customdata[4]})<extra></extra>"))
    fig.add_hline(y=tolerance, line=dict(color="grey", dash="dot"), annotation_text=f"{tolerance:.0%}",
                  annotation_position="top right")
    fig.update_xaxes(**ticks(list(frame["output token"])), title_text="output token")
    fig.update_yaxes(tickformat=".0%", rangemode="tozero", title_text="|delta| ÷ |f(x) − f(x′)|")
    fig.update_layout(title=f"Integrated gradients' convergence per output token: red above {tolerance:.0%} of "
                            f"its own gap (+{floor:g})", margin=MARGIN, height=320)
    return fig
