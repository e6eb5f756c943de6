"""Charts of each family's own position scheme, beside the paper's sinusoid (``ui.charts.embeddings``): what the
Embeddings page says and draws for learned tables, fairseq's sinusoid and T5's relative position buckets.

- Learned (BART, Lewis et al. 2020; mBART, Liu et al. 2020): a trained table per stack, position p at row
  p + 2 (``position_offset``: fairseq's two reserved rows), added to the embedding, then a LayerNorm.
- fairseq's sinusoid (M2M100, Fan et al. 2021; NLLB, NLLB Team 2022): the paper's waves (Vaswani et al. 2017,
  section 3.5) in tensor2tensor's layout, sines then cosines with frequencies 10000^(-i/(d/2-1)), positions
  counted from pad_id + 1.
- T5's relative buckets (Raffel et al. 2020, section 2.1; after Shaw et al. 2018, "Self-Attention with Relative
  Position Representations"): nothing is added to the embeddings; each head adds a learned scalar to its
  score for key j from query i, looked up by the bucket of the distance j - i. ``bucket_map`` draws the
  bucketing, ``head_bias`` each head's learned bias against the distance, ``input_bias`` the bias this input's
  heads add.

Every function takes plain arrays (``ui.compute.positions`` reads them from the model) and returns a figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.colors
import plotly.graph_objects as go

from . import MARGIN, heatmap, to_numpy

HEAD_COLOURS = plotly.colors.qualitative.Dark24  # one colour per head, the same in every panel (24 before one repeats)
STACKS = {"encoder": "encoder (bidirectional)", "decoder": "decoder (causal)"}

# The paper behind each scheme, shown under its formula.
CITATIONS = {
    "interleaved": "Vaswani et al. 2017, *Attention Is All You Need*, section 3.5.",
    "marian": "Vaswani et al. 2017, section 3.5, in Marian's layout (Junczys-Dowmunt et al. 2018).",
    "fairseq": "Vaswani et al. 2017, section 3.5, in fairseq's layout; M2M100: Fan et al. 2021, *Beyond "
               "English-Centric Multilingual Machine Translation*; NLLB: NLLB Team 2022.",
    "learned": "BART: Lewis et al. 2020, *BART: Denoising Sequence-to-Sequence Pre-training*; mBART: Liu et al. "
               "2020 (learned positions as in BERT and GPT, Devlin et al. 2019).",
    "relative": "T5: Raffel et al. 2020, *Exploring the Limits of Transfer Learning with a Unified Text-to-Text "
                "Transformer*, section 2.1; relative positions after Shaw et al. 2018, *Self-Attention with "
                "Relative Position Representations*.",
    "learned_decoder": "GPT-2: Radford et al. 2019, *Language Models are Unsupervised Multitask Learners* (learned "
                       "positions as in GPT, Radford et al. 2018).",
    "rotary": "Su et al. 2021, *RoFormer: Enhanced Transformer with Rotary Position Embedding*; Llama, Mistral, "
              "Qwen and Gemma use it.",
}

INTROS = {  # what the page says of each scheme, after "Attention by itself ignores the order of its inputs"
    "interleaved": "so a fixed *positional encoding* is added: sines and cosines whose wavelengths grow "
                   "geometrically from $2\\pi$ to $10000 \\cdot 2\\pi$ along the dimensions. For any offset k, "
                   "PE(pos + k) is a linear function of PE(pos), which makes relative positions easy to use.",
    "marian": "so a fixed *positional encoding* is added: the paper's sines and cosines, which this model "
              "(Marian) lays out as all the sines, then all the cosines, where the paper alternates them.",
    "fairseq": "so a fixed *positional encoding* is added: the paper's waves in fairseq's layout (all the sines, "
               "then all the cosines, frequencies $10000^{-i/(d/2-1)}$), with positions counted from the padding "
               "id + 1, so that the table's first rows (up to the padding id) are never a real position.",
    "learned": "so a *learned* vector per position is added: a trained table, one per stack (the encoder's and "
               "the decoder's differ). Its first {offset} rows are reserved (fairseq's habit), so position p "
               "reads row p + {offset}. A table covers only the positions it was trained on.",
    "learned_decoder": "so a *learned* vector per position is added: a trained table with one row per position, "
                       "position p at row p (GPT-2's wpe). The model has one stack, so one table serves the prompt "
                       "and the continuation alike; it covers only the positions it was trained on.",
    "relative": "but this model (T5) adds nothing to the embeddings. Instead every self-attention head adds a "
                "learned number to each score, chosen by how far the key is from the query: distances are put "
                "into buckets (exact for short ones, logarithmically wider up to a maximum distance, beyond "
                "which all share one), and each head has its own bias per bucket. The encoder's buckets count "
                "both directions; the decoder only looks back. One table per stack serves all its layers.",
    "rotary": "but this model adds nothing to the embeddings. Instead each head's query and key are turned by "
              "their position, pair of dimensions by pair of dimensions, each pair at its own speed "
              "$\\theta_i = \\theta^{-2i/d_k}$: the score of query m and key n then depends only on m - n.",
}


def distance_labels(distances: Any) -> list[str]:
    return [str(int(d)) for d in to_numpy(distances)]


def bucket_map(distances: Any, buckets: dict[str, Any]) -> go.Figure:
    """Relative distance (key - query) -> bucket id, one step line per stack: the encoder's bidirectional
    buckets (half for keys before the query, half for keys after) and the decoder's causal ones (keys after the
    query are masked: no bucket, a gap)."""
    x = to_numpy(distances)
    fig = go.Figure()
    for stack, values in buckets.items():
        fig.add_trace(go.Scatter(x=x, y=to_numpy(values), mode="lines+markers", line_shape="hv", name=STACKS[stack],
                                 marker_size=4, hovertemplate="key - query %{x}: bucket %{y}<extra></extra>"))
    # The legend right of the plot: hung below it (y = -0.25) it covered the x axis's title and left a gap under it.
    fig.update_layout(title="Which bucket each distance falls into", xaxis_title="relative distance: key - query",
                      yaxis_title="bucket id", margin=MARGIN, height=360, showlegend=True)
    return fig


def head_bias(distances: Any, bias: Any, stack: str) -> go.Figure:
    """One line per head: the bias it adds to a score, against the distance key - query (``bias``: (H, R), NaN
    where the stack never reads a distance). A head whose line peaks at 0 looks at the token itself, one that
    rises to the left looks back."""
    x, values = to_numpy(distances), to_numpy(bias)
    fig = go.Figure()
    for head, row in enumerate(values):  # a head's colour is its number's, so the stacks' panels share one legend
        fig.add_trace(go.Scatter(x=x, y=row, mode="lines", line_shape="hv", name=f"head {head}",
                                 legendgroup=f"head {head}", line_color=HEAD_COLOURS[head % len(HEAD_COLOURS)],
                                 hovertemplate=f"head {head}<br>key - query %{{x}}: bias %{{y:.3f}}<extra></extra>"))
    fig.update_layout(title=f"Each head's learned bias: {STACKS[stack]}", xaxis_title="relative distance: key - query",
                      yaxis_title="bias added to the score", margin=MARGIN, height=380, showlegend=True)
    return fig


def input_bias(bias: Any, queries: Sequence[str], keys: Sequence[str], head: int, stack: str) -> go.Figure:
    """The (T_q, T_k) bias one head adds to this input's scores (the ``{stack}.position_bias`` site); the
    decoder's cells above the diagonal are masked keys, drawn blank."""
    values = to_numpy(bias).copy()
    if stack == "decoder":
        values[np.triu_indices_from(values, k=1)] = np.nan
    return heatmap(values, list(keys), list(queries), title=f"Position bias of head {head}: {STACKS[stack]}",
                   colorscale="RdBu_r", zmid=0.0, colorbar_title="bias")
