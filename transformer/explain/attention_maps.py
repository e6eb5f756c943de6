"""Attribution read off attention in one traced forward (no gradients).

- "attention": the head mean of the last decoder layer's cross-attention, mean_h A^{ts}_h.
- "rollout": attention rollout (Abnar & Zuidema 2020) through the whole encoder-decoder, every
  decoder self-attention and cross-attention layer included, by the propagation rules of Chefer
  et al. 2021 (rollout.py: ``encoder_decoder_rollout``): source R^ts (B, T-1, S) and target R^tt
  (B, T-1, T-1), each row of the two summing to 1.
- "norm": Kobayashi et al. 2020, "Attention is Not Only a Weight: Analyzing Transformers
  with Vector Norms": ‖Σ_h α_{h,tj} f_h(x_j)‖ with f_h(x) = (x W^V_h + b^V_h) W^O_h, the
  vector that source token j actually adds through the last decoder layer's
  cross-attention (the output bias b^O belongs to no token and is left out). x_j is the
  encoder output (memory) that cross-attention reads; f_h reads its group's value head under grouped-query
  attention (vectors.py).

A decoder-only model (pairs.py) has one stack: its last self-attention, its rollout through every layer
(``attention_rollout(trace, "decoder")``, the rule above per layer) and the norm of what each prompt token sends
through its last self-attention (x_j = the block's values input, RMSNorm(x_j) pre-LN; with Gemma's sandwich norm
each vector through that norm's linear map at the row, vectors.py, so that they add up to the update the block
writes), each at the explained rows and split into the prompt's and the continuation's columns.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..network.model import Transformer
from .pairs import lm_rows, split, traced
from .rollout import attention_rollout, encoder_decoder_rollout
from .vectors import frozen_norm, moved_vectors


def attention(model: Transformer, src_ids: Tensor, tgt_ids: Tensor) -> tuple[Tensor, Tensor]:
    """-> source (B, T-1, S), target (B, T-1, T-1): head means of the last layer's cross/self-attention (a
    decoder-only model: of its last self-attention, split)."""
    trace = traced(model, src_ids, tgt_ids)
    last = model.config.n_decoder_layers - 1
    if model.config.decoder_only:
        return _lm_rows(trace.attention("decoder", last).mean(dim=1), src_ids, tgt_ids)
    return trace.attention("cross", last).mean(dim=1), trace.attention("decoder", last).mean(dim=1)


def rollout(model: Transformer, src_ids: Tensor, tgt_ids: Tensor) -> tuple[Tensor, Tensor]:
    """-> source R^ts (B, T-1, S), target R^tt (B, T-1, T-1): the encoder-decoder rollout (rollout.py), or a
    decoder-only model's rollout through its one stack, split."""
    trace = traced(model, src_ids, tgt_ids)
    if model.config.decoder_only:
        return _lm_rows(attention_rollout(trace, "decoder"), src_ids, tgt_ids)
    return encoder_decoder_rollout(trace)


def norm(model: Transformer, src_ids: Tensor, tgt_ids: Tensor) -> Tensor:
    """-> source (B, T-1, S) = ‖Σ_h α_{h,tj} f_h(x_j)‖ for the last decoder layer's cross-attention (a decoder-only
    model: its self-attention's, over the prompt; with a sandwich norm, through it)."""
    trace = traced(model, src_ids, tgt_ids)
    last = model.config.n_decoder_layers - 1
    with torch.no_grad():
        if not model.config.decoder_only:
            attn = model.decoder.layers[last].cross_attn
            weighted = moved_vectors(attn, trace["encoder.output"], trace.attention("cross", last))  # (B, T-1, S, D)
            return weighted.norm(dim=-1)
        residual, attn = model.decoder.layers[last].self_attn_residual, model.decoder.layers[last].self_attn
        x = trace["tgt.input"] if last == 0 else trace[f"decoder.{last - 1}.output"]  # (B, L, D): the layer's input
        rows = lm_rows(src_ids.size(1), tgt_ids.size(1) - 1, x.device)
        values_in = residual.norm(x) if model.config.norm_first else x
        weighted = moved_vectors(attn, values_in, trace.attention("decoder", last)[:, :, rows])  # (B, T-1, L, D)
        if residual.post_norm is not None:  # Gemma: the update is normed before the residual sum (vectors.py)
            update = weighted.sum(dim=2) + attn.output_bias()
            weighted = frozen_norm(residual.post_norm, update)(weighted)
        return weighted[..., :src_ids.size(1), :].norm(dim=-1)


def _lm_rows(maps: Tensor, src_ids: Tensor, tgt_ids: Tensor) -> tuple[Tensor, Tensor]:
    """A decoder-only model's (B, L, L) map over its sequence -> source and target at the explained rows."""
    return split(maps[:, lm_rows(src_ids.size(1), tgt_ids.size(1) - 1, maps.device)], src_ids.size(1))
