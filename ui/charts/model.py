"""Charts for the model page: the architecture of figure 1 with this model's real sizes,
parameters per part, and the comparison with torch.nn.Transformer.

Parameters of one layer (d = d_model, f = d_ff, biases included):
multi-head attention 4 (d^2 + d) (W^Q, W^K, W^V, W^O), feed-forward 2 d f + f + d,
LayerNorm 2 d; an encoder layer has one attention and two LayerNorms, a decoder layer two
attentions and three; each stack ends with one more LayerNorm.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from transformer.network.config import TransformerConfig

from . import MARGIN, to_numpy

PARTS = ("src_embed", "tgt_embed", "encoder", "decoder", "generator")


def architecture_table(config: TransformerConfig) -> pd.DataFrame:
    """The model's sizes under the paper's names, with what each one means."""
    c = config
    rows = [
        ("N (encoder)", c.n_encoder_layers, "encoder layers"),
        ("N (decoder)", c.n_decoder_layers, "decoder layers"),
        ("d_model", c.d_model, "width of every token vector between the sub-layers"),
        ("h", c.n_heads, "attention heads per attention sub-layer"),
        ("d_k = d_v", c.d_k, "width of one head's queries, keys and values (d_model / h)"),
        ("d_ff", c.d_ff, "inner width of the feed-forward network"),
        ("P_drop", c.dropout, "dropout rate while training (off when the app runs the model)"),
        ("source vocabulary", c.src_vocab_size, "token ids of the source side"),
        ("target vocabulary", c.tgt_vocab_size, "token ids of the target side"),
        ("max_len", c.max_len, "longest sequence the positional table covers"),
        ("LayerNorm", "pre-LN" if c.norm_first else "post-LN (paper)", "where each sub-layer's LayerNorm sits"),
        ("activation", c.activation, "non-linearity of the feed-forward network"),
        ("tied embeddings", c.tie_embeddings, "source/target embeddings and generator share one matrix"),
    ]
    return pd.DataFrame(rows, columns=["name", "value", "meaning"]).astype({"value": str})


def expected_parameters(config: TransformerConfig) -> dict[str, int]:
    """Parameters per part from the formulas above (tied weights counted once, in src_embed)."""
    c = config
    d, f = c.d_model, c.d_ff
    attention = 4 * (d * d + d)
    feed_forward = 2 * d * f + f + d
    norm = 2 * d
    encoder_layer = attention + feed_forward + 2 * norm
    decoder_layer = 2 * attention + feed_forward + 3 * norm
    return {
        "src_embed": c.src_vocab_size * d,
        "tgt_embed": 0 if c.tie_embeddings else c.tgt_vocab_size * d,
        "encoder": c.n_encoder_layers * encoder_layer + norm,
        "decoder": c.n_decoder_layers * decoder_layer + norm,
        "generator": c.tgt_vocab_size + (0 if c.tie_embeddings else c.tgt_vocab_size * d),
    }


_FORMULAS = {
    "src_embed": "V_src * d_model",
    "tgt_embed": "V_tgt * d_model (0 when tied)",
    "encoder": "N * (4(d^2+d) + 2 d d_ff + d_ff + d + 2*2d) + 2d",
    "decoder": "N * (2*4(d^2+d) + 2 d d_ff + d_ff + d + 3*2d) + 2d",
    "generator": "d_model * V_tgt + V_tgt (bias only when tied)",
}


def parameter_table(config: TransformerConfig, counts: Mapping[str, int]) -> pd.DataFrame:
    """Parameters per part as counted in the model (``count_parameters``) next to the formula."""
    expected = expected_parameters(config)
    total = sum(counts.values()) or 1
    frame = pd.DataFrame({
        "part": list(counts),
        "parameters": [int(v) for v in counts.values()],
        "share": [v / total for v in counts.values()],
        "formula": [_FORMULAS.get(k, "") for k in counts],
        "formula gives": [expected.get(k) for k in counts],
    })
    totals = pd.DataFrame({"part": ["total"], "parameters": [sum(counts.values())], "share": [1.0],
                           "formula": [""], "formula gives": [sum(expected.get(k, 0) for k in counts)]})
    return pd.concat([frame, totals], ignore_index=True)


def parameter_chart(counts: Mapping[str, int]) -> go.Figure:
    """Bars of the parameters per part."""
    fig = go.Figure(go.Bar(x=list(counts), y=list(counts.values()), text=[f"{v:,}" for v in counts.values()],
                           hovertemplate="%{x}: %{y:,} parameters<extra></extra>"))
    fig.update_layout(title="Parameters per part", yaxis_title="parameters", margin=MARGIN, height=320)
    return fig


def parity_summary(ours: Any, theirs: Any) -> dict[str, Any]:
    """How far two logit tensors of the same input are apart, and whether they predict the same tokens."""
    a, b = to_numpy(ours), to_numpy(theirs)
    if a.shape != b.shape:
        raise ValueError(f"logits of different shapes: {a.shape} vs {b.shape}")
    return {
        "max |difference|": float(np.abs(a - b).max()) if a.size else 0.0,
        "max |logit|": float(np.abs(a).max()) if a.size else 0.0,
        "same predicted tokens": bool((a.argmax(-1) == b.argmax(-1)).all()) if a.size else True,
    }


# --- the diagram of figure 1 -------------------------------------------------------------


DIAGRAM_FONT_PX = 14
DIAGRAM_LINE_CHARS = 24  # a box is about 2.2 of the 6.6 x units wide: ~200 px at the page's width


def _wrap(text: str, width: int = DIAGRAM_LINE_CHARS) -> str:
    """Break a box's text into lines of at most ``width`` characters (Plotly's <br>) at spaces."""
    lines: list[str] = []
    for word in text.split(" "):
        if lines and len(lines[-1]) + 1 + len(word.replace("&lt;", "<").replace("&gt;", ">")) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "<br>".join(lines)


def _box(x: float, y: float, text: str, color: str, width: float = 2.2, height: float = 0.8) -> tuple[dict, dict]:
    shape = dict(type="rect", x0=x - width / 2, x1=x + width / 2, y0=y - height / 2, y1=y + height / 2,
                 fillcolor=color, line=dict(color="#333", width=1), layer="below")
    return shape, dict(x=x, y=y, text=_wrap(text), showarrow=False, font=dict(size=DIAGRAM_FONT_PX, color="#111"))


def _arrow(x0: float, y0: float, x1: float, y1: float) -> dict:
    return dict(x=x1, y=y1, ax=x0, ay=y0, xref="x", yref="y", axref="x", ayref="y",
                showarrow=True, arrowhead=2, arrowwidth=1.2, arrowcolor="#555", text="")


def architecture_diagram(config: TransformerConfig) -> go.Figure:
    """Figure 1 of the paper drawn with this model's sizes: encoder left, decoder right."""
    c = config
    d = c.d_model
    add_norm = "Add & LayerNorm" if not c.norm_first else "LayerNorm before, Add after"
    attention = "#fdd0a2"  # light fills with near-black text: contrast above 12:1, also on a projector
    feed_forward = "#c6dbef"
    plain = "#f7f7f7"
    enc_x, dec_x = 0.0, 3.0
    encoder = [
        ("source ids (S)", plain),
        (f"Embedding {c.src_vocab_size}x{d} * sqrt({d}) + PE", plain),
        (f"Self-attention: {c.n_heads} heads, d_k {c.d_k}", attention),
        (add_norm, plain),
        (f"Feed-forward {d} -> {c.d_ff} -> {d} ({c.activation})", feed_forward),
        (add_norm, plain),
        (f"LayerNorm -> memory (S x {d})", plain),
    ]
    decoder = [
        ("decoder input ids: &lt;s&gt; y1 y2 ... (T)", plain),
        (f"Embedding {c.tgt_vocab_size}x{d} * sqrt({d}) + PE", plain),
        (f"Masked self-attention: {c.n_heads} heads", attention),
        (add_norm, plain),
        (f"Cross-attention: {c.n_heads} heads", attention),
        (add_norm, plain),
        (f"Feed-forward {d} -> {c.d_ff} -> {d} ({c.activation})", feed_forward),
        (add_norm, plain),
        ("LayerNorm", plain),
        (f"Linear {d} -> {c.tgt_vocab_size} (logits)", plain),
        ("softmax -> next-token probabilities", plain),
    ]
    # Shapes and annotations go in as two lists: adding them one by one is ten times slower.
    shapes: list[dict] = []
    notes: list[dict] = []
    for column, x in ((encoder, enc_x), (decoder, dec_x)):
        for i, (text, color) in enumerate(column):
            shape, note = _box(x, i, text, color)
            shapes.append(shape)
            notes.append(note)
            if i:
                notes.append(_arrow(x, i - 1 + 0.4, x, i - 0.4))
    # The stacked layers: a frame around each repeated block, labelled N x.
    for x, first, last, n, side in ((enc_x, 2, 5, c.n_encoder_layers, -1), (dec_x, 2, 7, c.n_decoder_layers, 1)):
        shapes.append(dict(type="rect", x0=x - 1.2, x1=x + 1.2, y0=first - 0.45, y1=last + 0.45,
                           line=dict(color="#888", dash="dot")))
        notes.append(dict(x=x + side * 1.25, y=(first + last) / 2, text=f"{n} x", showarrow=False,
                          xanchor="right" if side < 0 else "left", font=dict(size=14)))
    notes.append(_arrow(enc_x + 1.1, 6, dec_x - 1.1, 4))  # memory -> cross-attention keys and values
    fig = go.Figure(layout=dict(shapes=shapes, annotations=notes))
    fig.update_xaxes(visible=False, range=[-1.8, 4.8])
    fig.update_yaxes(visible=False, range=[-0.6, len(decoder) - 0.4])
    fig.update_layout(title="Architecture (figure 1 of the paper) with this model's sizes", margin=MARGIN,
                      height=820, showlegend=False, plot_bgcolor="white")
    return fig
