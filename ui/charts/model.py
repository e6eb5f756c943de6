"""Charts for the model page: the sizes of figure 1 (the diagram itself is ``ui.sections.architecture``, SVG),
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
    final = norm if c.final_norm else 0  # a post-LN Marian model has no LayerNorm after its stacks
    return {
        "src_embed": c.src_vocab_size * d,
        "tgt_embed": 0 if c.tie_embeddings else c.tgt_vocab_size * d,
        "encoder": c.n_encoder_layers * encoder_layer + final,
        "decoder": c.n_decoder_layers * decoder_layer + final,
        "generator": c.tgt_vocab_size + (0 if c.generator_tied else c.tgt_vocab_size * d),
    }


_FORMULAS = {
    "src_embed": "V_src * d_model",
    "tgt_embed": "V_tgt * d_model (0 when tied)",
    "encoder": "N * (4(d^2+d) + 2 d d_ff + d_ff + d + 2*2d) + 2d (final LayerNorm, if any)",
    "decoder": "N * (2*4(d^2+d) + 2 d d_ff + d_ff + d + 3*2d) + 2d (final LayerNorm, if any)",
    "generator": "d_model * V_tgt + V_tgt (bias only when tied to an embedding)",
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
