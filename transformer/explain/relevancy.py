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

Each row needs the gradient of its own score, so the N real rows run as N copies in one
forward (copy n keeps only row n's score): one backward gives every row its Ā.
The attention weights must stay in the autograd graph: ``Trace(keep_graph=True)`` records
them without detaching (the fast path is untouched; the traced path is the usual one).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..network.model import Transformer
from ..network.trace import Trace
from .inputs import Rows, row_scores, scatter_rows


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
    model: Transformer, src_ids: Tensor, tgt_ids: Tensor, rows: Rows
) -> tuple[Tensor, Tensor]:
    """-> source (B, T-1, S) = R^{ts}[t], target (B, T-1, T-1) = R^{tt}[t] per real row."""
    c = model.config
    src, tgt_in = src_ids[rows.batch], tgt_ids[rows.batch, :-1]  # (N, S), (N, T-1): one copy per row
    trace = Trace(keep_graph=True)
    names = ([f"encoder.{layer}.self_attn.weights" for layer in range(c.n_encoder_layers)]
             + [f"decoder.{layer}.{kind}.weights" for layer in range(c.n_decoder_layers)
                for kind in ("self_attn", "cross_attn")])
    with torch.enable_grad():
        logits = model(src, tgt_in, trace=trace)
        weights = [trace[name] for name in names]
        if not all(w.requires_grad for w in weights):
            raise ValueError("relevancy needs gradients of the attention weights, but the model's parameters "
                             "do not require grad")
        grads = torch.autograd.grad(row_scores(logits, rows.row, rows.target, rows.contrast).sum(), weights)
    cams = {name: weighted_attention(w.detach(), g) for name, w, g in zip(names, weights, grads, strict=True)}

    n, s, t = src.size(0), src.size(1), tgt_in.size(1)
    r_ss = torch.eye(s, dtype=logits.dtype, device=src.device).expand(n, s, s).clone()  # (N, S, S)
    for layer in range(c.n_encoder_layers):
        r_ss = r_ss + cams[f"encoder.{layer}.self_attn.weights"] @ r_ss
    r_tt = torch.eye(t, dtype=logits.dtype, device=src.device).expand(n, t, t).clone()  # (N, T-1, T-1)
    r_ts = logits.new_zeros(n, t, s)  # (N, T-1, S)
    r_ss_bar = normalise_self(r_ss)
    for layer in range(c.n_decoder_layers):
        a_tt = cams[f"decoder.{layer}.self_attn.weights"]
        r_tt = r_tt + a_tt @ r_tt
        r_ts = r_ts + a_tt @ r_ts
        r_ts = r_ts + normalise_self(r_tt).transpose(1, 2) @ cams[f"decoder.{layer}.cross_attn.weights"] @ r_ss_bar
    index = torch.arange(n, device=src.device)
    source = scatter_rows(r_ts[index, rows.row].detach(), rows, src_ids.size(0), t)  # (B, T-1, S)
    target = scatter_rows(r_tt[index, rows.row].detach(), rows, src_ids.size(0), t)  # (B, T-1, T-1)
    return source, target
