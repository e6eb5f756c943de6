"""The logit lens: nostalgebraist 2020, "interpreting GPT: the logit lens".

Read every decoder layer's output as if it were the last: apply the decoder stack's final
LayerNorm (``model.decoder.norm``) and the generator, then log_softmax. For the last layer
this is exactly the model's own output. With post-LN (the paper's order) each layer already
ends in a LayerNorm, so the stack's final norm is an extra one on top; it is applied to
every layer alike, as the model applies it to the last.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..network.model import Transformer
from ..network.trace import Trace


def logit_lens(model: Transformer, src_ids: Tensor, tgt_ids: Tensor) -> Tensor:
    """src_ids (B, S), tgt_ids (B, T) decoder input -> log-probabilities (n_decoder_layers, B, T, V).

    ``tgt_ids`` is what the decoder reads (e.g. ``<s> y_1 ... y_n``); position t predicts token t+1.
    """
    trace = Trace()
    with torch.no_grad():
        model(src_ids, tgt_ids, trace=trace)
        layers = torch.stack([trace[f"decoder.{layer}.output"] for layer in range(model.config.n_decoder_layers)])
        return torch.log_softmax(model.generator(model.decoder.norm(layers)), dim=-1)  # (L, B, T, V)
