"""Relevancy maps: Chefer, Gur & Wolf 2021, "Generic Attention-model Explainability for
Interpreting Bi-Modal and Encoder-Decoder Transformers" (ICCV), the encoder-decoder rules.

Every attention layer contributes Ā = E_h[(∇A ⊙ A)^+], its weights A times the gradient
of the explained score f_t (inputs.py) with respect to them, positive part, head mean.
Starting from R^{ss} = I_S, R^{tt} = I_T, R^{ts} = 0:

    encoder self-attention:   R^{ss} += Ā^{ss} R^{ss}                          (eq. 6)
    decoder self-attention:   R^{tt} += Ā^{tt} R^{tt},  R^{ts} += Ā^{tt} R^{ts}  (eq. 6, 7)
    cross-attention:          R^{ts} += (R̄^{tt})^T Ā^{ts} R̄^{ss}                (eq. 10)

with R̄ = (R - I) / rowsum(R - I) + I (eqs. 8-9; rows whose R - I is zero stay I). The
rule R^{tt} += Ā^{ts} R^{st} (eq. 11) adds nothing here: the encoder never reads the
target, so R^{st} = 0. Row t of R^{ts} is ``source``, row t of R^{tt} is ``target``.

Each row needs the gradient of its own score: one forward of a sentence and one batched backward over its
R real rows give every row its Ā (``row_gradients.batched_row_gradients``; before, each row ran as its own copy of
the pair). The attention weights must stay in the autograd graph: ``Trace(keep_graph=True)`` records
them without detaching (the fast path is untouched; the traced path is the usual one).

Decoder-only (pairs.py: the prompt and the continuation as one sequence): one stack of self-attention, so the
rule is eq. 6 alone, R = I, R += Ā_l R per layer over the whole sequence (the paper's rule for a single-stream
transformer), and row t is R's row at position P - 1 + t, split into the prompt's columns and the
continuation's. Ā reads the weights after the softmax, so rotary positions, grouped-query attention, soft-capped
scores and sliding windows are all inside A and its gradient.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..network.config import TransformerConfig
from ..network.model import Transformer
from ..network.trace import Trace
from .inputs import Rows, by_sentence, scatter_rows
from .pairs import decoder_states, source_embedding, split
from .progress import Progress, within
from .row_gradients import batched_row_gradients, rows_per_backward, scores_and_directions


def weighted_attention(weights: Tensor, grad: Tensor) -> Tensor:
    """Ā = E_h[(∇A ⊙ A)^+]: weights and grad (N, H, Tq, Tk) -> (N, Tq, Tk)."""
    return (grad * weights).clamp(min=0).mean(dim=1)


def normalise_self(relevancy: Tensor) -> Tensor:
    """R̄ = (R - I) / rowsum(R - I) + I for (N, T, T); rows with nothing besides I stay I."""
    eye = torch.eye(relevancy.size(-1), dtype=relevancy.dtype, device=relevancy.device)
    hat = relevancy - eye
    total = hat.sum(dim=-1, keepdim=True)
    return torch.where(total > 0, hat / total.clamp(min=torch.finfo(hat.dtype).tiny), 0.0) + eye


def relevancy(
    model: Transformer, src_ids: Tensor, tgt_ids: Tensor, rows: Rows, progress: Progress | None = None
) -> tuple[Tensor, Tensor]:
    """-> source (B, T-1, S) = R^{ts}[t], target (B, T-1, T-1) = R^{tt}[t] per real row, one sentence at a time;
    ``progress`` (progress.py) is told before each batched backward, where a deadline stops the work."""
    length, batch = tgt_ids.size(1) - 1, src_ids.size(0)
    weight = source_embedding(model).weight
    source = torch.zeros(rows.row.numel(), src_ids.size(1), dtype=weight.dtype, device=weight.device)  # (N, S)
    target = torch.zeros(rows.row.numel(), length, dtype=weight.dtype, device=weight.device)  # (N, T-1)
    for b, index in by_sentence(rows):  # index: this sentence's real rows, (R,)
        other = rows.contrast[index] if rows.contrast is not None else None
        part = within(progress, b / batch, (b + 1) / batch, f"sentence {b + 1} of {batch}: " if batch > 1 else "")
        cams = _weighted_attention_per_row(model, src_ids[b:b + 1], tgt_ids[b:b + 1, :-1], rows.row[index],
                                           rows.target[index], other, part)
        propagate = _lm_propagate if model.config.decoder_only else _propagate
        source[index], target[index] = propagate(model.config, cams, rows.row[index], src_ids.size(1))
    return scatter_rows(source, rows, batch, length), scatter_rows(target, rows, batch, length)


def _attention_sites(config: TransformerConfig) -> list[str]:
    kinds = ("self_attn",) if config.decoder_only else ("self_attn", "cross_attn")
    return ([f"encoder.{layer}.self_attn.weights" for layer in range(config.n_encoder_layers)]
            + [f"decoder.{layer}.{kind}.weights" for layer in range(config.n_decoder_layers) for kind in kinds])


def _weighted_attention_per_row(model: Transformer, src: Tensor, tgt_in: Tensor, row: Tensor, target: Tensor,
                                contrast: Tensor | None, progress: Progress | None = None) -> dict[str, Tensor]:
    """One sentence (1, S), (1, T-1) and its R rows -> every attention site's Ā per row, (R, Tq, Tk)."""
    trace = Trace(keep_graph=True)
    names = _attention_sites(model.config)
    with torch.enable_grad():
        states = decoder_states(model, src, tgt_in, trace=trace)[:, row]  # (1, R, D)
        weights = [trace[name] for name in names]  # (1, H, Tq, Tk) each
        if not all(w.requires_grad for w in weights):
            raise ValueError("relevancy needs gradients of the attention weights, but the model's parameters "
                             "do not require grad")
        with torch.no_grad():
            direction = scores_and_directions(model.generator, states, target, contrast)[1]
        step = rows_per_backward(model.config, src.size(1), tgt_in.size(1))
        grads = batched_row_gradients(states, direction, tuple(weights), step, progress)  # (R, 1, H, Tq, Tk) each
    return {name: weighted_attention(w.detach(), g[:, 0]) for name, w, g in zip(names, weights, grads, strict=True)}


def _lm_propagate(config: TransformerConfig, cams: dict[str, Tensor], row: Tensor, src_len: int
                  ) -> tuple[Tensor, Tensor]:
    """A decoder-only model's one stack (module docstring): R = I, R += Ā_l R per layer over the whole sequence,
    each row's own R at its position P - 1 + t, split -> source (R, P), target (R, T-1)."""
    first = cams["decoder.0.self_attn.weights"]
    n, length, _ = first.shape
    relevance = torch.eye(length, dtype=first.dtype, device=first.device).expand(n, length, length).clone()
    for layer in range(config.n_decoder_layers):
        relevance = relevance + cams[f"decoder.{layer}.self_attn.weights"] @ relevance  # (R, L, L)
    index = torch.arange(n, device=first.device)
    mine = relevance[index, src_len - 1 + row]  # (R, L): row t's own, at position P - 1 + t (pairs.lm_rows)
    source, target = split(mine[:, None], src_len)
    return source[:, 0].detach(), target[:, 0].detach()


def _propagate(config: TransformerConfig, cams: dict[str, Tensor], row: Tensor, src_len: int = 0
               ) -> tuple[Tensor, Tensor]:
    """The rules above over one sentence's R rows (cams (R, Tq, Tk) per site) -> R^{ts}[t] (R, S), R^{tt}[t] (R, T-1)
    at each row's own t."""
    first = cams["decoder.0.cross_attn.weights"]
    n, t, s = first.shape
    dtype, device = first.dtype, first.device
    r_ss = torch.eye(s, dtype=dtype, device=device).expand(n, s, s).clone()  # (R, S, S)
    for layer in range(config.n_encoder_layers):
        r_ss = r_ss + cams[f"encoder.{layer}.self_attn.weights"] @ r_ss
    r_tt = torch.eye(t, dtype=dtype, device=device).expand(n, t, t).clone()  # (R, T-1, T-1)
    r_ts = first.new_zeros(n, t, s)  # (R, T-1, S)
    r_ss_bar = normalise_self(r_ss)
    for layer in range(config.n_decoder_layers):
        a_tt = cams[f"decoder.{layer}.self_attn.weights"]
        r_tt = r_tt + a_tt @ r_tt
        r_ts = r_ts + a_tt @ r_ts
        r_ts = r_ts + normalise_self(r_tt).transpose(1, 2) @ cams[f"decoder.{layer}.cross_attn.weights"] @ r_ss_bar
    index = torch.arange(n, device=device)
    return r_ts[index, row].detach(), r_tt[index, row].detach()
