"""Charts for the Explain page on a decoder-only language model: each generated token explained by the prompt's
tokens (the source side) and by the tokens generated before it (the target side), every method side by side.

The data is ``ui.compute.explain.Explanation``'s for a language model: per method a ``source`` map (rows, P) over the
prompt and, where the method scores the target (``Method.target`` in the registry), a ``target`` map (rows, rows)
whose column 0 is the placeholder (the prompt's last token, already a prompt column: always 0) and column j >= 1 the
generated token c_j. ``joint_matrix`` lays the two side by side, (rows, P + rows - 1): the prompt, then c_1 ..
c_{rows-1}. Three kinds of cell hold no number, drawn blank and named on hover, never 0:

- ``UNDEFINED``: the method cannot define the row (ALTI+, value zeroing: the registry's ``undefined``);
- ``NOT_SCORED``: a method that scores the prompt only (no target side), over the continuation;
- ``NOT_READ``: a token generated after the one explained (right of the diagonal): the model had not written it.

Methods have different units, so wherever they share a scale each row is divided by its largest |value| over the
cells it scores, prompt and continuation together (``normalise_cells``): how the prompt's share compares with the
continuation's survives. Data in, figure or table out: nothing here runs a model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from . import MARGIN, MAX_HOVER_CELLS, heatmap_trace, labels, matrix_frame, ticks, to_numpy
from .explain import UNDEFINED, panel_grid
from .palette import bar_style

NOT_SCORED = "not scored (this method scores the prompt only)"
NOT_READ = "not read (generated after this token)"
COLUMNS = "prompt token | generated before"  # the x axis of every chart here


def joint_matrix(source: Any, target: Any | None) -> np.ndarray:
    """A method's (rows, P) prompt map and (rows, rows) target map (None: it scores the prompt only) -> (rows,
    P + rows - 1): the prompt's columns, then c_1 .. c_{rows-1}; NaN where ``cell_notes`` names no number."""
    prompt = to_numpy(source)
    rows = prompt.shape[0]
    generated = np.full((rows, max(rows - 1, 0)), np.nan)
    if target is not None:
        t = to_numpy(target)
        if t.shape != (rows, rows):
            raise ValueError(f"a target map of shape {t.shape} for {rows} rows: expected ({rows}, {rows})")
        generated = t[:, 1:].copy()
        generated[np.triu(np.ones_like(generated, dtype=bool))] = np.nan  # row t reads c_1 .. c_t only
    joint = np.concatenate([prompt, generated], axis=1)
    joint[np.isnan(prompt).any(axis=1)] = np.nan  # an undefined row is undefined everywhere
    return joint


def cell_notes(source: Any, target: Any | None) -> np.ndarray:
    """(rows, P + rows - 1) of ``joint_matrix``'s cells: "" where it holds a number, else why not (module
    docstring)."""
    prompt = to_numpy(source)
    rows, p = prompt.shape
    notes = np.full((rows, p + max(rows - 1, 0)), "", dtype=object)
    notes[:, p:] = NOT_SCORED if target is None else np.where(np.triu(np.ones((rows, rows - 1), dtype=bool)),
                                                              NOT_READ, "")
    notes[np.isnan(prompt).any(axis=1)] = UNDEFINED
    return notes


def normalise_cells(matrix: Any) -> np.ndarray:
    """Each row divided by its largest |value| over its numbers (NaN cells stay NaN; a row of zeros stays zero)."""
    z = to_numpy(matrix)
    finite = np.isfinite(z)
    scale = np.where(finite, np.abs(z), 0.0).max(axis=-1, keepdims=True)
    return np.divide(z, scale, out=np.where(finite, 0.0, np.nan), where=finite & (scale > 0))


def columns(prompt_tokens: Sequence[str], generated: Sequence[str]) -> list[str]:
    """The joint columns' labels: the prompt's tokens, then the generated tokens but the last (which no row reads)."""
    return [*prompt_tokens, *generated[:-1]]


def lm_row_bars(sources: Mapping[str, Any], targets: Mapping[str, Any], prompt_tokens: Sequence[str],
                generated: Sequence[str], row: int) -> go.Figure:
    """One generated token's row for every method as grouped bars over the prompt's tokens and, past a dotted line,
    the tokens generated before it, each method ÷ its largest |value| there. A method that scores the prompt only
    has no bars past the line and says so in its legend; an undefined row has no bars at all."""
    p = len(prompt_tokens)
    x_tokens = [*prompt_tokens, *generated[:row]]
    fig = go.Figure()
    for method, source in sources.items():
        target = targets.get(method)
        values = normalise_cells(joint_matrix(source, target)[row:row + 1, :p + row])[0]
        if np.isnan(values[:p]).any():
            name = f"{method}: {UNDEFINED} for this token"  # no bars, not 0
        elif target is None and row > 0:
            name = f"{method}: prompt only"
        else:
            name = method
        fig.add_trace(go.Bar(x=list(range(len(x_tokens))), y=values, name=name, marker=bar_style(method),
                             customdata=labels(x_tokens),
                             hovertemplate=f"{method}<br>%{{customdata}}<br>%{{y:.3f}}<extra></extra>"))
    if row > 0:
        fig.add_vline(x=p - 0.5, line=dict(color="grey", dash="dot"), annotation_text="generated →",
                      annotation_position="top right")
    fig.update_xaxes(**ticks(x_tokens), title_text=COLUMNS)
    fig.update_yaxes(title_text="attribution ÷ row's max |value|", range=[-1.05, 1.05])
    fig.update_layout(barmode="group", margin=MARGIN, height=380,
                      title=f"Why generated token {row} ({labels([generated[row]])[0]}): each method over the prompt "
                            "and the tokens before it, ÷ its largest |value|")
    return fig


def lm_method_grid(sources: Mapping[str, Any], targets: Mapping[str, Any], prompt_tokens: Sequence[str],
                   generated: Sequence[str], *, columns_per_row: int = 4) -> go.Figure:
    """Small multiples of every method's generated (rows) × prompt and earlier tokens (columns) map on one colour
    scale (``normalise_cells``), a dotted line where the prompt ends. The blank cells read why on hover where the
    grid is small enough to name every cell (``MAX_HOVER_CELLS``); beyond, they have no hover (the page says
    what blank means)."""
    if not sources:
        raise ValueError("no attributions to draw")
    x_tokens = columns(prompt_tokens, generated)
    p = len(prompt_tokens)
    named = len(sources) * len(x_tokens) * len(generated) <= 2 * MAX_HOVER_CELLS
    titles, traces = [], []
    for method, source in sources.items():
        target = targets.get(method)
        joint = joint_matrix(source, target)
        if joint.shape != (len(generated), len(x_tokens)):
            raise ValueError(f"{method}: matrix {joint.shape} for {len(generated)} rows x {len(x_tokens)} columns")
        z = normalise_cells(joint)
        undefined = int(np.isnan(joint[:, :p]).any(axis=1).sum())
        titles.append(method + (f" ({undefined} rows {UNDEFINED})" if undefined else ""))  # prompt-only: the page says
        trace = heatmap_trace(z, x_tokens, generated, x_title="read", y_title="generated", coloraxis="coloraxis",
                              name_cells=named)
        if named:
            notes = cell_notes(source, target)
            trace.text = [[note or f"{v:.3f}" for v, note in zip(line, notes_line, strict=True)]
                          for line, notes_line in zip(z, notes, strict=True)]
            trace.hovertemplate = trace.hovertemplate.replace("%{z:.3f}", "%{text}")
        else:
            trace.hoverongaps = False
        traces.append(trace)
    fig = panel_grid(titles, traces, x_tokens, generated, columns=columns_per_row,
                     title="Every method: generated (rows) × prompt, then earlier tokens; each row ÷ its max |value|")
    if len(generated) > 1:
        fig.add_vline(x=p - 0.5, line=dict(color="grey", dash="dot", width=1), row="all", col="all")
    return fig


def lm_row_frame(sources: Mapping[str, Any], targets: Mapping[str, Any], prompt_tokens: Sequence[str],
                 generated: Sequence[str], row: int) -> pd.DataFrame:
    """One generated token's row for every method, unnormalised: methods (rows) x the prompt's tokens and the
    tokens generated before it (columns), NaN where a method gives no number (``cell_notes``)."""
    p = len(prompt_tokens)
    values = np.stack([joint_matrix(s, targets.get(m))[row, :p + row] for m, s in sources.items()])
    return matrix_frame(values, list(sources), [*prompt_tokens, *generated[:row]])


def lm_attribution_frame(source: Any, target: Any | None, prompt_tokens: Sequence[str],
                         generated: Sequence[str]) -> pd.DataFrame:
    """One method's ``joint_matrix`` as a table (for CSV download), rows and columns labelled "t:token"."""
    return matrix_frame(joint_matrix(source, target), list(generated), columns(prompt_tokens, generated))
