"""The residual stream: what each sub-layer writes into it, next to what is already there.

Elhage et al. 2021, "A Mathematical Framework for Transformer Circuits": every sub-layer
reads the stream and adds its output to it. Per layer and position this reports
``update_norm`` = ‖Sublayer(·)‖, the sub-layer's output, and ``stream_norm`` = ‖x‖, the stream
that the residual connection adds it to, both read from one traced forward
(``Trace(sublayers=True)``: no hook on the shared model). With post-LN the sum is normalised
afterwards; the two norms still compare what is added with what it is added to. Padding
positions are left out. ``tgt_ids`` is ``<s> y </s>`` as ``attribute`` takes it; the decoder
reads ``tgt_ids[:, :-1]``, and its positions are those of ``attribute``'s rows.

A decoder-only model (pairs.py) has one stack, "decoder", with the sub-layers self_attn and feed_forward, over
its one sequence: positions 0 .. P-1 are the prompt's, P + j - 1 the continuation's token j (j = 1 .. T-2), so
``attribute``'s row t is position P - 1 + t (left padding left out).
"""

from __future__ import annotations

import pandas as pd
import torch
from torch import Tensor

from ..network.masks import decoder_real
from ..network.model import Transformer
from ..network.trace import Trace
from .inputs import check_inputs
from .pairs import lm_sequence, traced

SUBLAYERS = {"encoder": ("self_attn", "feed_forward"), "decoder": ("self_attn", "cross_attn", "feed_forward")}


def residual_stream(model: Transformer, src_ids: Tensor, tgt_ids: Tensor) -> pd.DataFrame:
    """src_ids (B, S), tgt_ids (B, T) = ``<s> y_1 ... y_n </s>`` -> one row per (batch, stack, layer, sublayer,
    position), positions 0..S-1 of the encoder and 0..T-2 of the decoder input ``tgt_ids[:, :-1]`` (padding left
    out): columns batch, stack, layer, sublayer, position, update_norm, stream_norm.

    Raises ValueError for the inputs ``attribute`` refuses (T < 2, mismatched shapes, a model in training mode)."""
    check_inputs(model, src_ids, tgt_ids, None)
    pad, decoder_only = model.config.pad_id, model.config.decoder_only
    with torch.no_grad():
        trace = traced(model, src_ids, tgt_ids, Trace(sublayers=True))
    stacks = {"decoder": ("self_attn", "feed_forward")} if decoder_only else SUBLAYERS
    captured = {(stack, layer, sublayer, what): trace[f"{stack}.{layer}.{sublayer}.{what}"].norm(dim=-1)  # (B, len)
                for stack in stacks for layer in range(getattr(model.config, f"n_{stack}_layers"))
                for sublayer in stacks[stack] for what in ("stream", "update")}
    if decoder_only:  # one sequence: the prompt's positions, then the continuation's (pairs.py)
        real = {"decoder": lm_sequence(src_ids, tgt_ids[:, :-1], pad)[0] != pad}
    else:
        real = {"encoder": src_ids != pad, "decoder": decoder_real(tgt_ids[:, :-1], pad)}
    rows = []
    for (stack, layer, sublayer, what), norms in captured.items():
        if what != "update":
            continue
        stream = captured[(stack, layer, sublayer, "stream")]
        for b, position in real[stack].nonzero().tolist():
            rows.append({"batch": b, "stack": stack, "layer": layer, "sublayer": sublayer, "position": position,
                         "update_norm": float(norms[b, position]), "stream_norm": float(stream[b, position])})
    return pd.DataFrame(rows, columns=["batch", "stack", "layer", "sublayer", "position", "update_norm",
                                       "stream_norm"])
