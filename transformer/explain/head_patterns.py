"""What each attention head looks at, measured on a trace: the pattern half of ``head_summary``.

Per (kind, layer, head), averaged over the real (non-padding) query positions of the batch
(every (sentence, query) pair counts once):

- ``entropy`` = -sum_j a_ij log a_ij in nats (0 for a head that looks at one token; log n for
  one spread evenly over n keys);
- ``distance`` = sum_j a_ij |i - j|, how far the head looks (self-attention only: a decoder
  query and a source key have no common axis, so NaN for cross-attention);
- ``same`` / ``previous`` / ``next`` = a_ii, a_i,i-1, a_i,i+1: the positional heads of Voita et
  al. 2019, "Analyzing Multi-Head Self-Attention" (self-attention only; decoder ``next`` is 0
  by the causal mask);
- ``special`` = the weight on the sequence's boundary token, the "no-op" sink of Clark et al.
  2019, "What Does BERT Look At?": ``<s>`` (BOS) for decoder self-attention, whose keys start
  with it, and ``</s>`` (EOS) for encoder self-attention and cross-attention, whose keys (the
  source) end with it and hold no ``<s>``;
- ``alignment`` (cross-attention, given the true alignment): the share of rows with a true
  source token whose most-attended source token is a true one;
- ``rel_<relation>`` (encoder self-attention, given dependency arcs): the share of dependents
  of that relation whose most-attended token is their head word (Clark et al. 2019, section 4).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from ..network.config import SpecialIds
from ..network.masks import decoder_real
from ..network.trace import ATTENTION_KINDS, Trace

# One dependency arc: (dependent source position, head source position, relation).
Arc = tuple[int, int, str]
PATTERN_COLUMNS = ["entropy", "distance", "same", "previous", "next", "special"]


def pattern_rows(trace: Trace, src_ids: Tensor, dec_ids: Tensor, alignment: Tensor | None = None,
                 arcs: Sequence[Sequence[Arc]] | None = None, *, ids: SpecialIds) -> list[dict]:
    """A trace of ``model(src_ids, dec_ids, trace=trace)`` -> one dict per (kind, layer, head) with
    kind, layer, head, the PATTERN_COLUMNS, ``alignment`` and one ``rel_<relation>`` per relation.

    src_ids (B, S); dec_ids (B, T') the decoder input; alignment (B, T', S) bool, row t marking
    the true sources of the token decoder position t predicts; arcs: per sentence a list of
    (dependent, head, relation) source positions; ids: the model's special ids (``config.special_ids``).
    """
    relations = sorted({rel for sentence in arcs or () for _, _, rel in sentence})
    rows = []
    for kind in ATTENTION_KINDS:
        stack = "encoder" if kind == "encoder" else "decoder"
        for layer in range(trace.n_layers(stack)):
            weights = trace.attention(kind, layer).double()  # (B, H, Tq, Tk)
            stats = _patterns(kind, weights, src_ids, dec_ids, ids)
            aligned = (_alignment_share(weights, alignment) if kind == "cross" and alignment is not None
                       else torch.full((weights.size(1),), float("nan")))
            by_relation = {rel: _arc_share(weights, arcs, rel) if kind == "encoder"
                           else torch.full((weights.size(1),), float("nan")) for rel in relations}
            for head in range(weights.size(1)):
                rows.append({"kind": kind, "layer": layer, "head": head,
                             **{name: float(stats[name][head]) for name in PATTERN_COLUMNS},
                             "alignment": float(aligned[head]),
                             **{f"rel_{rel}": float(share[head]) for rel, share in by_relation.items()}})
    return rows


def _patterns(kind: str, weights: Tensor, src_ids: Tensor, dec_ids: Tensor, ids: SpecialIds) -> dict[str, Tensor]:
    """weights (B, H, Tq, Tk) -> each PATTERN_COLUMNS statistic per head (H,)."""
    real = (src_ids != ids.pad if kind == "encoder" else decoder_real(dec_ids, ids.pad)).to(weights.dtype)  # (B, Tq)
    key_ids = dec_ids if kind == "decoder" else src_ids

    def mean(per_query: Tensor) -> Tensor:  # (B, H, Tq) -> (H,): over the real queries
        return (per_query * real[:, None, :]).sum(dim=(0, 2)) / real.sum()

    if kind == "decoder":  # the start token: position 0 (its id may be the pad id, as in Marian models)
        boundary = torch.zeros_like(key_ids, dtype=weights.dtype)
        boundary[:, 0] = 1.0
    else:
        boundary = (key_ids == ids.eos).to(weights.dtype)  # (B, Tk)
    stats = {"entropy": mean(-torch.special.xlogy(weights, weights).sum(-1)),
             "special": mean((weights * boundary[:, None, None, :]).sum(-1))}
    if kind == "cross":
        nan = torch.full((weights.size(1),), float("nan"))
        return {"entropy": stats["entropy"], "distance": nan, "same": nan, "previous": nan, "next": nan,
                "special": stats["special"]}
    t = weights.size(-1)
    offset = torch.arange(t)[None, :] - torch.arange(t)[:, None]  # (Tq, Tk): j - i
    for name, shift in (("same", 0), ("previous", -1), ("next", 1)):
        stats[name] = mean((weights * (offset == shift).to(weights.dtype)).sum(-1))
    stats["distance"] = mean((weights * offset.abs().to(weights.dtype)).sum(-1))
    return stats


def _alignment_share(weights: Tensor, alignment: Tensor) -> Tensor:
    """Cross weights (B, H, T', S) and alignment (B, T', S) -> per head the share of rows with a
    true source whose argmax source is true (NaN when no row has one)."""
    rows = alignment.any(-1)  # (B, T')
    top = weights.argmax(-1)  # (B, H, T')
    hit = alignment[:, None].expand(-1, weights.size(1), -1, -1).gather(-1, top[..., None])[..., 0]  # (B, H, T')
    counted = rows.sum()
    if counted == 0:
        return torch.full((weights.size(1),), float("nan"))
    return (hit & rows[:, None]).sum(dim=(0, 2)).double() / counted


def _arc_share(weights: Tensor, arcs: Sequence[Sequence[Arc]], relation: str) -> Tensor:
    """Encoder weights (B, H, S, S) -> per head the share of ``relation``'s dependents whose
    argmax key is their head word."""
    chosen = [(b, dep, head) for b, sentence in enumerate(arcs) for dep, head, rel in sentence if rel == relation]
    batch, dependent, head_word = (torch.tensor(column) for column in zip(*chosen, strict=True))
    top = weights[batch, :, dependent].argmax(-1)  # (n_arcs, H)
    return (top == head_word[:, None]).double().mean(0)


def check_annotations(src_ids: Tensor, tgt_ids: Tensor, alignment: Tensor | None,
                      arcs: Sequence[Sequence[Arc]] | None, pad_id: int) -> None:
    """ValueError naming what is wrong with an alignment's shape or an arc's positions."""
    batch, s = src_ids.shape
    if alignment is not None:
        expected = (batch, tgt_ids.size(1) - 1, s)
        if not isinstance(alignment, Tensor) or alignment.dtype != torch.bool or tuple(alignment.shape) != expected:
            got = (f"{tuple(alignment.shape)} {alignment.dtype}" if isinstance(alignment, Tensor)
                   else type(alignment).__name__)
            raise ValueError(f"alignment must be a bool tensor of shape (B, T-1, S) = {expected}, got {got}")
    if arcs is not None:
        if len(arcs) != batch:
            raise ValueError(f"arcs must hold one list per sentence: {batch} sentences, got {len(arcs)} lists")
        for b, sentence in enumerate(arcs):
            for arc in sentence:
                if len(arc) != 3:
                    raise ValueError(f"an arc is (dependent, head, relation), got {arc!r} in sentence {b}")
                dep, head, _ = arc
                for position in (dep, head):
                    if not (isinstance(position, int) and 0 <= position < s) or src_ids[b, position] == pad_id:
                        raise ValueError(f"arc {arc!r} of sentence {b}: positions must be real source tokens "
                                         f"in 0..{s - 1}")
