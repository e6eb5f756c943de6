"""Charts for the embeddings page: token embeddings, the sinusoidal positional encoding, their sum.

Section 3.4: the embedding of a token is multiplied by sqrt(d_model). Section 3.5:

    PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
    PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))

and the encoder's input is Embedding(token) * sqrt(d_model) + PE(pos). Marian (opus-mt) lays the same waves out
as all sines, then all cosines (``layout="marian"``) and may leave the embedding unscaled (``scaled=False``);
M2M100 / NLLB use fairseq's layout (``"fairseq"``), BART and mBART a learned table per stack (``"learned"``,
then a LayerNorm of the sum), T5 nothing at all (``"relative"``: a bias per head on the scores,
``ui.charts.positions``): the formulas, labels and titles here follow the model's own choice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from . import MARGIN, heatmap, heatmap_trace, positional_labels, ticks, to_numpy

NORM_NAMES = {"layer": "LayerNorm", "rms": "RMSNorm", "rms_float32": "RMSNorm", "rms_unit_offset": "RMSNorm (1 + w)"}
VECTOR_PARTS = ("embedding * sqrt(d_model)", "positional encoding", "sum: input of layer 0")

PE_LATEX = {  # the positional encoding in each layout of transformer.network.positional
    "interleaved": r"PE_{(pos,\,2i)} = \sin\!\left(pos / 10000^{2i/d_{model}}\right), \quad "
                   r"PE_{(pos,\,2i+1)} = \cos\!\left(pos / 10000^{2i/d_{model}}\right)",
    "marian": r"PE_{(pos,\,i)} = \sin\!\left(pos / 10000^{2i/d_{model}}\right), \quad "
              r"PE_{(pos,\,d_{model}/2+i)} = \cos\!\left(pos / 10000^{2i/d_{model}}\right), \quad i < d_{model}/2",
    "fairseq": r"PE_{(pos,\,i)} = \sin\!\left(p \cdot 10000^{-i/(d_{model}/2-1)}\right), \quad "
               r"PE_{(pos,\,d_{model}/2+i)} = \cos\!\left(p \cdot 10000^{-i/(d_{model}/2-1)}\right), \quad "
               r"p = pos + \mathrm{pad} + 1",
    "learned": r"PE_{pos} = P_{\,pos + %(offset)s} \quad (P: \text{a trained } (max\_len + %(offset)s) \times "
               r"d_{model} \text{ table per stack})",
    "learned_decoder": r"PE_{pos} = P_{\,pos} \quad (P: \text{a trained } max\_len \times d_{model} \text{ table, "
                       r"one stack})",
    "relative": r"\mathrm{score}_{h}(i, j) = q_i \cdot k_j + b_h\big(\mathrm{bucket}(j - i)\big), \qquad "
                r"x_{pos} = \mathrm{Embedding}(t_{pos}) \quad (\text{no } PE)",
    "rotary": r"q_m \leftarrow R_{\Theta, m}\, q_m,\; k_n \leftarrow R_{\Theta, n}\, k_n,\; \theta_i = "
              r"\theta^{-2i/d_k} \qquad x_{pos} = \mathrm{Embedding}(t_{pos}) \quad (\text{no } PE)",
}
NORM_LATEX = {"layer": r"\mathrm{LayerNorm}", "rms": r"\mathrm{RMSNorm}", "rms_float32": r"\mathrm{RMSNorm}",
              "rms_unit_offset": r"\mathrm{RMSNorm}"}


def pe_latex(layout: str, offset: int = 0) -> str:
    """The positional encoding of ``layout`` (``TransformerConfig.positional``) in LaTeX; ``offset``: the row of
    position 0 in a learned table."""
    return PE_LATEX[layout] % {"offset": offset} if layout == "learned" else PE_LATEX[layout]


def input_latex(scaled: bool, layout: str = "interleaved", norm: str | None = None) -> str:
    """The first layer's input: the token's embedding, times sqrt(d_model) where the model scales it, plus PE
    (none where positions are relative, T5), inside the embedding norm where the model has one (``norm``:
    "layer" or "rms", BART / mBART)."""
    total = r"\mathrm{Embedding}(t_{pos})" + (r" \cdot \sqrt{d_{model}}" if scaled else "")
    if layout not in ("relative", "rotary"):
        total += " + PE_{pos}"
    return r"x_{pos} = " + (rf"{NORM_LATEX[norm]}\left({total}\right)" if norm else total)


def wave(dim: int, d_model: int, layout: str = "interleaved") -> str:
    """Whether dimension ``dim`` of the table is a sine or a cosine, and of which wavelength index i."""
    if layout in ("marian", "fairseq"):
        half = (d_model + 1) // 2 if layout == "marian" else d_model // 2
        if dim >= 2 * half:
            return "zero (odd d_model)"
        return f"sin, i={dim}" if dim < half else f"cos, i={dim - half}"
    if layout == "learned":
        return "learned"
    return f"{'sin' if dim % 2 == 0 else 'cos'}, i={dim // 2}"


def positional_heatmap(table: Any, layout: str = "interleaved") -> go.Figure:
    """The (positions, d_model) table: fast waves on the first dimensions, slow ones on the last (in Marian's
    and fairseq's layouts twice: the sines, then the cosines); a learned table on its own symmetric scale."""
    pe = to_numpy(table)
    positions, dims = pe.shape
    limit = (float(np.abs(pe).max()) or 1.0) if layout == "learned" else 1.0
    title = "Learned position vectors" if layout == "learned" else "Sinusoidal positional encoding"
    return heatmap(pe, [str(d) for d in range(dims)], [str(p) for p in range(positions)],
                   title=title, x_title="dimension", y_title="position",
                   colorscale="RdBu_r", zmin=-limit, zmax=limit, show_values=False, height=520)


def positional_curves(table: Any, dims: Sequence[int], layout: str = "interleaved") -> go.Figure:
    """Chosen dimensions of the encoding as curves over the position. Each wavelength 2*pi*10000^(2i/d_model)
    has a sine and a cosine: dimensions 2i and 2i+1 in the paper's layout, i and d_model/2 + i in Marian's."""
    pe = to_numpy(table)
    positions = np.arange(pe.shape[0])
    fig = go.Figure()
    for d in dims:
        fig.add_trace(go.Scatter(x=positions, y=pe[:, d], mode="lines",
                                 name=f"dim {d} ({wave(d, pe.shape[1], layout)})"))
    fig.update_layout(title="Positional encoding of chosen dimensions", xaxis_title="position",
                      yaxis_title="PE(pos, dim)", margin=MARGIN, height=360,
                      yaxis_range=None if layout == "learned" else [-1.1, 1.1])
    return fig


def position_similarity(table: Any) -> go.Figure:
    """Dot products PE(p) . PE(q) of every pair of positions: largest on the diagonal, falling off
    with the distance |p - q| and depending (almost) only on it."""
    pe = to_numpy(table)
    similarity = pe @ pe.T  # (P, P)
    positions = [str(p) for p in range(pe.shape[0])]
    return heatmap(similarity, positions, positions, title="Similarity of positions: PE . PE^T",
                   x_title="position", y_title="position", colorscale="Viridis", show_values=False,
                   colorbar_title="dot product", height=520)


def token_vectors(embed: Any, pos: Any, total: Any, tokens: Sequence[str], scaled: bool = True,
                  norm: str | None = None) -> go.Figure:
    """Per token (rows): its embedding (times sqrt(d_model) where ``scaled``), its positional vector and their
    sum (inside the embedding norm ``norm`` where the model has one, BART / mBART), side by side.

    All three are (T, d_model). The embedding and the sum share one colour scale (the sum is
    the embedding moved by at most 1 per dimension); the positional vectors, whose values lie
    in [-1, 1] while a scaled embedding's reach sqrt(d_model) times further, get their own
    scale, or they would look washed out next to the others.
    """
    parts = [to_numpy(embed), to_numpy(pos), to_numpy(total)]
    rows, dims = parts[0].shape
    if any(p.shape != (rows, dims) for p in parts) or len(tokens) != rows:
        raise ValueError(f"expected three ({len(tokens)}, d_model) matrices, got {[p.shape for p in parts]}")
    limit = float(max(np.abs(parts[0]).max(), np.abs(parts[2]).max())) or 1.0
    pe_limit = float(np.abs(parts[1]).max()) or 1.0
    # short enough for a third of the page at 1280 px: the full names ran into each other there
    titles = ["embedding × √d_model" if scaled else "embedding", f"position (own scale ±{pe_limit:.2g})",
              f"{NORM_NAMES[norm]}(sum): layer 0 input" if norm else "sum: layer 0 input"]
    fig = make_subplots(rows=1, cols=3, shared_yaxes=True, subplot_titles=titles, horizontal_spacing=0.03)
    dim_labels = [str(d) for d in range(dims)]
    for col, part in enumerate(parts, start=1):
        fig.add_trace(heatmap_trace(part, dim_labels, list(tokens), x_title="dimension", y_title="token",
                                    coloraxis="coloraxis2" if col == 2 else "coloraxis"), row=1, col=col)
    fig.update_yaxes(**ticks(tokens), autorange="reversed")
    fig.update_yaxes(title_text="token", row=1, col=1)
    fig.update_xaxes(title_text="dimension")
    fig.update_layout(coloraxis=dict(colorscale="RdBu_r", cmin=-limit, cmax=limit,
                                     colorbar=dict(title="embedding, sum", x=1.0, len=0.45, y=0.75)),
                      coloraxis2=dict(colorscale="RdBu_r", cmin=-pe_limit, cmax=pe_limit,
                                      colorbar=dict(title="positional", x=1.0, len=0.45, y=0.22)),
                      title="Embedding + positional encoding = input of the first layer", margin=MARGIN,
                      height=min(800, 220 + 28 * rows))
    return fig


def vectors_frame(embed: Any, pos: Any, total: Any, tokens: Sequence[str], scaled: bool = True) -> pd.DataFrame:
    """The numbers behind ``token_vectors``: one row per (token, part), one column per dimension."""
    frames = []
    names = VECTOR_PARTS if scaled else ("embedding", *VECTOR_PARTS[1:])
    for name, part in zip(names, (embed, pos, total), strict=True):
        values = to_numpy(part)
        frame = pd.DataFrame(values, columns=[f"dim {d}" for d in range(values.shape[1])])
        frame.insert(0, "part", name)
        frame.insert(0, "token", positional_labels(tokens))
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def similarity_frame(table: Any) -> pd.DataFrame:
    """The numbers behind ``position_similarity``: PE . PE^T, positions by positions."""
    pe = to_numpy(table)
    index = pd.RangeIndex(pe.shape[0], name="position")
    return pd.DataFrame(pe @ pe.T, index=index, columns=list(index))


def table_frame(table: Any) -> pd.DataFrame:
    """The positional table as a CSV-ready frame: rows positions, columns dimensions."""
    pe = to_numpy(table)
    return pd.DataFrame(pe, index=pd.RangeIndex(pe.shape[0], name="position"),
                        columns=[f"dim {d}" for d in range(pe.shape[1])])
