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
  encoder output (memory) that cross-attention reads.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..network.model import Transformer
from ..network.trace import Trace
from .rollout import encoder_decoder_rollout


def traced(model: Transformer, src_ids: Tensor, tgt_ids: Tensor) -> Trace:
    """One teacher-forced forward on the decoder input tgt_ids[:, :-1], recorded up to the decoder's output: the
    maps read attention weights and the layers' inputs and outputs, never the logits, so the generator is not run
    (at NLLB size its 256,206 x 1024 projection of every row cost a third of the forward; the trace has no
    ``logits`` site)."""
    trace = Trace()
    with torch.no_grad():
        memory = model.encode(src_ids, trace=trace)
        model.decode_states(tgt_ids[:, :-1], memory, model.memory_mask(src_ids), trace=trace)
    return trace


def attention(model: Transformer, src_ids: Tensor, tgt_ids: Tensor) -> tuple[Tensor, Tensor]:
    """-> source (B, T-1, S), target (B, T-1, T-1): head means of the last layer's cross/self-attention."""
    trace = traced(model, src_ids, tgt_ids)
    last = model.config.n_decoder_layers - 1
    return trace.attention("cross", last).mean(dim=1), trace.attention("decoder", last).mean(dim=1)


def rollout(model: Transformer, src_ids: Tensor, tgt_ids: Tensor) -> tuple[Tensor, Tensor]:
    """-> source R^ts (B, T-1, S), target R^tt (B, T-1, T-1): the encoder-decoder rollout (rollout.py)."""
    return encoder_decoder_rollout(traced(model, src_ids, tgt_ids))


def value_vectors(model: Transformer, memory: Tensor) -> Tensor:
    """f_h(x_j) = (x_j W^V_h + b^V_h) W^O_h of the last cross-attention: memory (B, S, D) -> (B, H, S, D)."""
    attn = model.decoder.layers[-1].cross_attn
    d, n_heads, d_k = attn.d_model, attn.n_heads, attn.d_k
    w_v, b_v = attn.value_weights()  # the last third of the stacked W^Q, W^K, W^V (b^V zeros without biases)
    values = (memory @ w_v.T + b_v).view(memory.size(0), memory.size(1), n_heads, d_k)  # (B, S, H, d_k)
    w_o = attn.w_o.weight.view(d, n_heads, d_k)  # (D_out, H, d_k): head h owns input columns h*d_k:(h+1)*d_k
    return torch.einsum("bshk,ohk->bhso", values, w_o)  # (B, H, S, D)


def norm(model: Transformer, src_ids: Tensor, tgt_ids: Tensor) -> Tensor:
    """-> source (B, T-1, S) = ‖Σ_h α_{h,tj} f_h(x_j)‖ for the last decoder layer's cross-attention."""
    trace = traced(model, src_ids, tgt_ids)
    alpha = trace.attention("cross", model.config.n_decoder_layers - 1)  # (B, H, T-1, S)
    with torch.no_grad():
        vectors = value_vectors(model, trace["encoder.output"])  # (B, H, S, D)
        weighted = torch.einsum("bhts,bhsd->btsd", alpha, vectors)  # (B, T-1, S, D): Σ_h α f_h(x_j)
    return weighted.norm(dim=-1)
