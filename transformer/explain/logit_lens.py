"""The logit lens: nostalgebraist 2020, "interpreting GPT: the logit lens".

Read every decoder layer's output as if it were the last: apply the decoder stack's final
LayerNorm (``model.decoder.norm``) and the generator, then log_softmax. For the last layer
this is exactly the model's own output. With post-LN (the paper's order) each layer already
ends in a LayerNorm, so the stack's final norm is an extra one on top; it is applied to
every layer alike, as the model applies it to the last; a soft-capped generator (Gemma-2) caps every layer's
logits alike too.

A decoder-only model (pairs.py) is read at its explained rows: row t is sequence position P - 1 + t, the
prompt's last position for t = 0, so the lens shows what each layer predicts for each generated token.

``logit_lens_top`` keeps only each cell's top token, one layer at a time: the whole lens of one NLLB-600M
sentence of 37 target tokens is 12 layers x 37 rows x 256,206 ids (455 MB of float32, twice while the
log_softmax runs), where a chart of each layer's top next token needs 2 numbers a cell.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..network.model import Transformer
from .inputs import check_inputs
from .pairs import rows_of, traced
from .row_gradients import generator_logits


def logit_lens(model: Transformer, src_ids: Tensor, tgt_ids: Tensor) -> Tensor:
    """src_ids (B, S), tgt_ids (B, T) = ``<s> y_1 ... y_n </s>`` as ``attribute`` takes them
    -> log-probabilities (n_decoder_layers, B, T-1, V).

    The decoder reads ``tgt_ids[:, :-1]``: row t is what each layer predicts after reading tgt_ids[:, :t+1], the
    distribution whose last-layer value at tgt_ids[:, t+1] is ``attribute``'s explained score of row t.
    Raises ValueError for the inputs ``attribute`` refuses (T < 2, mismatched shapes, a model in training mode).
    """
    check_inputs(model, src_ids, tgt_ids, None)
    with torch.no_grad():
        layers = torch.stack(_layer_outputs(model, src_ids, tgt_ids))  # (L, B, T-1, D)
        logits = generator_logits(model.generator, model.decoder.norm(layers))  # (L, B, T-1, V)
        return torch.log_softmax(logits, dim=-1)


def _layer_outputs(model: Transformer, src_ids: Tensor, tgt_ids: Tensor) -> list[Tensor]:
    """Every decoder layer's output at the explained rows, (B, T-1, D) each, from one traced forward (pairs.py)."""
    trace = traced(model, src_ids, tgt_ids)
    return [rows_of(model, trace[f"decoder.{layer}.output"], src_ids.size(1), tgt_ids.size(1) - 1)
            for layer in range(model.config.n_decoder_layers)]


def logit_lens_top(model: Transformer, src_ids: Tensor, tgt_ids: Tensor) -> tuple[Tensor, Tensor]:
    """``logit_lens(...).max(dim=-1)`` without the whole lens: (top ids, their log-probabilities), each
    (n_decoder_layers, B, T-1). One layer's (B, T-1, V) at a time is held, never the (L, B, T-1, V).
    Raises ValueError as ``logit_lens`` does."""
    check_inputs(model, src_ids, tgt_ids, None)
    ids, values = [], []
    with torch.no_grad():
        for output in _layer_outputs(model, src_ids, tgt_ids):
            states = model.decoder.norm(output)  # (B, T-1, D)
            log_probs = torch.log_softmax(generator_logits(model.generator, states), dim=-1)  # (B, T-1, V)
            best = log_probs.max(dim=-1)
            ids.append(best.indices)
            values.append(best.values)
    return torch.stack(ids), torch.stack(values)  # (L, B, T-1) each
