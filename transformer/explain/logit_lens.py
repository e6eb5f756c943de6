"""The logit lens: nostalgebraist 2020, "interpreting GPT: the logit lens".

Read every decoder layer's output as if it were the last: apply the decoder stack's final
LayerNorm (``model.decoder.norm``) and the generator, then log_softmax. For the last layer
this is exactly the model's own output. With post-LN (the paper's order) each layer already
ends in a LayerNorm, so the stack's final norm is an extra one on top; it is applied to
every layer alike, as the model applies it to the last.

``logit_lens_top`` keeps only each cell's top token, one layer at a time: the whole lens of one NLLB-600M
sentence of 37 target tokens is 12 layers x 37 rows x 256,206 ids (455 MB of float32, twice while the
log_softmax runs), where a chart of each layer's top next token needs 2 numbers a cell.
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


def logit_lens_top(model: Transformer, src_ids: Tensor, tgt_ids: Tensor) -> tuple[Tensor, Tensor]:
    """``logit_lens(...).max(dim=-1)`` without the whole lens: (top ids, their log-probabilities), each
    (n_decoder_layers, B, T-1). One layer's (B, T-1, V) at a time is held, never the (L, B, T-1, V).
    Raises ValueError as ``logit_lens`` does."""
    check_inputs(model, src_ids, tgt_ids, None)
    trace = Trace()
    ids, values = [], []
    with torch.no_grad():
        model(src_ids, tgt_ids[:, :-1], trace=trace)
        for layer in range(model.config.n_decoder_layers):
            states = model.decoder.norm(trace[f"decoder.{layer}.output"])  # (B, T-1, D)
            log_probs = torch.log_softmax(few_rows_linear(model.generator, states), dim=-1)  # (B, T-1, V)
            best = log_probs.max(dim=-1)
            ids.append(best.indices)
            values.append(best.values)
    return torch.stack(ids), torch.stack(values)  # (L, B, T-1) each
