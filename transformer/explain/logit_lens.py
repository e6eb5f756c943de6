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

from ..decoding.fast import few_rows_linear
from ..network.model import Transformer
from ..network.trace import Trace
from .inputs import check_inputs


def logit_lens(model: Transformer, src_ids: Tensor, tgt_ids: Tensor) -> Tensor:
    """src_ids (B, S), tgt_ids (B, T) = ``<s> y_1 ... y_n </s>`` as ``attribute`` takes them
    -> log-probabilities (n_decoder_layers, B, T-1, V).

    The decoder reads ``tgt_ids[:, :-1]``: row t is what each layer predicts after reading tgt_ids[:, :t+1], the
    distribution whose last-layer value at tgt_ids[:, t+1] is ``attribute``'s explained score of row t.
    Raises ValueError for the inputs ``attribute`` refuses (T < 2, mismatched shapes, a model in training mode).
    """
    check_inputs(model, src_ids, tgt_ids, None)
    trace = Trace()
    with torch.no_grad():
        model(src_ids, tgt_ids[:, :-1], trace=trace)
        layers = torch.stack([trace[f"decoder.{layer}.output"] for layer in range(model.config.n_decoder_layers)])
        logits = few_rows_linear(model.generator, model.decoder.norm(layers))  # (L, B, T-1, V)
        return torch.log_softmax(logits, dim=-1)
