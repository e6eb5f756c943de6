"""The residual stream: what each sub-layer writes into it, next to what is already there.

Elhage et al. 2021, "A Mathematical Framework for Transformer Circuits": every sub-layer
reads the stream and adds its output to it. Per layer and position this reports
``update_norm`` = ‖Sublayer(·)‖, the sub-layer's output (read by a forward hook on the
self_attn / cross_attn / feed_forward module), and ``stream_norm`` = ‖x‖, the stream that
the residual connection adds it to (a forward pre-hook on the SublayerConnection). With
post-LN the sum is normalised afterwards; the two norms still compare what is added with
what it is added to. Hooks are removed in a ``finally``; padding positions are left out.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import torch
from torch import Tensor, nn

from ..network.masks import decoder_real
from ..network.model import Transformer
from .views import private_view

SUBLAYERS = {"encoder": ("self_attn", "feed_forward"), "decoder": ("self_attn", "cross_attn", "feed_forward")}


def residual_stream(model: Transformer, src_ids: Tensor, tgt_ids: Tensor) -> pd.DataFrame:
    """src_ids (B, S), tgt_ids (B, T) decoder input -> one row per (batch, stack, layer, sublayer, position):
    columns batch, stack, layer, sublayer, position, update_norm, stream_norm."""
    model = private_view(model)  # its hooks must not reach other callers of the shared model (views.py)
    captured: dict[tuple[str, int, str, str], Tensor] = {}
    handles = []

    def keep(key: tuple[str, int, str, str], which: int):
        def hook(_module: nn.Module, args: tuple[Any, ...], output: Any = None) -> None:
            captured[key] = (output if which == 1 else args[0]).detach().norm(dim=-1)  # (B, len)
        return hook

    try:
        for stack in ("encoder", "decoder"):
            for index, layer in enumerate(getattr(model, stack).layers):
                for number, sublayer in enumerate(SUBLAYERS[stack], start=1):
                    connection = getattr(layer, f"sublayer{number}")
                    handles.append(connection.register_forward_pre_hook(keep((stack, index, sublayer, "stream"), 0)))
                    handles.append(getattr(layer, sublayer).register_forward_hook(
                        keep((stack, index, sublayer, "update"), 1)))
        with torch.no_grad():
            model(src_ids, tgt_ids)
    finally:
        for handle in handles:
            handle.remove()

    pad = model.config.pad_id
    real = {"encoder": src_ids != pad, "decoder": decoder_real(tgt_ids, pad)}
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
