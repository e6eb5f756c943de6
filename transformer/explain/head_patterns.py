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
- ``special`` = the weight on the special tokens among the keys, the "no-op" sink of Clark et al.
  2019, "What Does BERT Look At?": every token the model's tokenizer calls special (``special``: its
  ``Tokenizer.special_tokens()`` per side; ``</s>``, a multilingual model's source language code and the forced
  target code, ``<s>``, pad, ...), and for decoder self-attention the decoder's start at position 0 whatever its
  id (``</s>`` in BART, mBART and NLLB, ``<pad>`` in T5 and Marian); ``special_token`` names the special token
  that gets the most of that weight, as the tokenizer writes it;
- ``alignment`` (cross-attention, given the true alignment): the share of rows with a true
  source token whose most-attended source token is a true one;
- ``rel_<relation>`` (encoder self-attention, given dependency arcs): the share of dependents
  of that relation whose most-attended token is their head word (Clark et al. 2019, section 4);
- ``agree_<relation>`` (decoder self-attention, given the German arcs, for the relations whose two words
  agree in German: nsubj, det, det:poss, amod): the share of such arcs where the decoder row that predicts
  the later of the two words (its first piece) looks most at the earlier one. The causal mask decides the
  direction: the verb's row looks at a subject written before it, but the subject's row at a verb written
  before it (``schläft der Hund``); German writes article and adjectives first, so it is the noun's row that
  looks at them. Relation names: Universal Dependencies v2.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from ..network.config import SpecialIds
from ..network.masks import decoder_real
from ..network.trace import ATTENTION_KINDS, Trace
from .head_baselines import alignment_baseline, arc_baseline, bootstrap_interval

# One dependency arc: (dependent source position, head source position, relation).
Arc = tuple[int, int, str]
PATTERN_COLUMNS = ["entropy", "distance", "same", "previous", "next", "special"]
Special = tuple[Mapping[int, str], Mapping[int, str]]  # the (source, target) vocabulary's special tokens: id -> piece


def config_special_tokens(ids: SpecialIds) -> dict[int, str]:
    """The special tokens when no tokenizer is asked: the config's reserved ids, named by their roles and id
    ("eos (id 1)", "pad/bos (id 0)"), since the ids alone do not say how the tokenizer writes them."""
    roles: dict[int, list[str]] = {}
    for role, i in ids._asdict().items():
        roles.setdefault(i, []).append(role)
    return {i: f"{'/'.join(names)} (id {i})" for i, names in sorted(roles.items())}
AGREEMENT_RELATIONS = ("nsubj", "det", "det:poss", "amod")  # German words that agree in case, number, gender


def agreement_arcs(target_arcs: Sequence[Sequence[Arc]]) -> list[list[Arc]]:
    """German arcs on target positions (index into ``tgt_ids[:, 1:]``) -> decoder self-attention arcs
    (row, key, relation) of the AGREEMENT_RELATIONS: row = the position that predicts the later word, key = the
    decoder input position that holds the earlier word (its target index + 1, after ``<s>``)."""
    return [[(max(dep, head), min(dep, head) + 1, rel) for dep, head, rel in sentence if rel in AGREEMENT_RELATIONS]
            for sentence in target_arcs]


def pattern_rows(trace: Trace, src_ids: Tensor, dec_ids: Tensor, alignment: Tensor | None = None,
                 arcs: Sequence[Sequence[Arc]] | None = None, *, ids: SpecialIds,
                 target_arcs: Sequence[Sequence[Arc]] | None = None, out_rows: Tensor | None = None,
                 special: Special | None = None) -> list[dict]:
    """A trace of ``model(src_ids, dec_ids, trace=trace)`` -> one dict per (kind, layer, head) with
    kind, layer, head, the PATTERN_COLUMNS, ``alignment``, one ``rel_<relation>`` per relation and one
    ``agree_<relation>`` per agreement relation, then for each of those scores its 95% bootstrap interval over
    sentences (``<score>_low``, ``<score>_high``), and for alignment and each relation what position alone
    achieves (``<score>_baseline``; head_baselines.py).

    src_ids (B, S); dec_ids (B, T') the decoder input; alignment (B, T', S) bool, row t marking
    the true sources of the token decoder position t predicts; arcs: per sentence a list of
    (dependent, head, relation) source positions; ids: the model's special ids (``config.special_ids``);
    target_arcs: per sentence the German arcs on target positions t (the token ``dec_ids`` position t predicts).
    out_rows: (B,) each sentence's real output rows, those that predict a real target (its T - 1), which the
    alignment baseline's proportional diagonal spans; by default the real decoder inputs other than ``</s>``
    (``<s>`` and y, one per target token and ``</s>``: right unless a target lacks its ``</s>``).
    special: the (source, target) tokenizers' special tokens, id -> piece (``Tokenizer.special_tokens()``); by
    default the config's reserved ids (``config_special_tokens``). Each row also gets ``special_token``.
    """
    special = special or (config_special_tokens(ids), config_special_tokens(ids))
    relations = sorted({rel for sentence in arcs or () for _, _, rel in sentence})
    agreement = agreement_arcs(target_arcs) if target_arcs is not None else []
    agreeing = sorted({rel for sentence in agreement for _, _, rel in sentence})
    baselines: dict[str, float] = {f"agree_{rel}": arc_baseline(agreement, rel)[0] for rel in agreeing}
    if alignment is not None:
        if out_rows is None:
            out_rows = (decoder_real(dec_ids, ids.pad) & (dec_ids != ids.eos)).sum(-1)  # (B,)
        baselines["alignment"] = alignment_baseline(alignment.cpu(), (src_ids != ids.pad).cpu(), out_rows.cpu())[0]
    for rel in relations:
        baselines[f"rel_{rel}"] = arc_baseline(arcs, rel)[0]
    rows = []
    for kind in ATTENTION_KINDS:
        stack = "encoder" if kind == "encoder" else "decoder"
        for layer in range(trace.n_layers(stack)):
            weights = trace.attention(kind, layer).double().cpu()  # (B, H, Tq, Tk)
            n_heads = weights.size(1)
            # name -> (B, H), (B,); the special tokens and their weight per head
            counts, tokens = _patterns(kind, weights, src_ids.cpu(), dec_ids.cpu(), ids, special)
            sinks = sink_names(*tokens)
            if kind == "cross" and alignment is not None:
                counts["alignment"] = _alignment_counts(weights, alignment.cpu())
            if kind == "encoder":
                counts.update({f"rel_{rel}": _arc_counts(weights, arcs, rel) for rel in relations})
            if kind == "decoder":
                counts.update({f"agree_{rel}": _arc_counts(weights, agreement, rel) for rel in agreeing})
            scores = {name: _ratio(*pair) for name, pair in counts.items()}
            intervals = {name: bootstrap_interval(*pair) for name, pair in counts.items()}
            nan = torch.full((n_heads,), float("nan"), dtype=torch.float64)
            names = [*PATTERN_COLUMNS, "alignment", *(f"rel_{rel}" for rel in relations),
                     *(f"agree_{rel}" for rel in agreeing)]
            for head in range(n_heads):
                row = {"kind": kind, "layer": layer, "head": head}
                row.update({name: float(scores.get(name, nan)[head]) for name in names})
                row["special_token"] = sinks[head]
                for name in names:
                    low, high = intervals.get(name, (nan, nan))
                    row[f"{name}_low"], row[f"{name}_high"] = float(low[head]), float(high[head])
                    if name in baselines:
                        row[f"{name}_baseline"] = baselines[name]
                rows.append(row)
    return rows


def sink_names(names: list[str], weight: Tensor) -> list[str]:
    """Per head, the special token (of ``names``) that gets the most of its weight (K, H); "" where none gets any."""
    if not names:
        return [""] * weight.size(1)
    best, top = weight.max(0)  # (H,) each
    return [names[int(i)] if float(w) > 0 else "" for w, i in zip(best.tolist(), top.tolist(), strict=True)]


def _ratio(hits: Tensor, counts: Tensor) -> Tensor:
    """Summed hits over summed counts per head: (B, H), (B,) -> (H,); NaN where nothing was counted (no count, no
    hit: 0 / 0)."""
    return hits.double().sum(0) / counts.double().sum()


def _patterns(kind: str, weights: Tensor, src_ids: Tensor, dec_ids: Tensor, ids: SpecialIds, special: Special
              ) -> tuple[dict[str, tuple[Tensor, Tensor]], tuple[list[str], Tensor]]:
    """weights (B, H, Tq, Tk) -> each PATTERN_COLUMNS statistic as per-sentence sums over the real queries
    (B, H) and the number of real queries (B,), and the special tokens with the weight each gets per head (K, H)
    (``sink_names`` names each head's); cross-attention has no offsets or distance. Everything stays on the
    inputs' device."""
    real = (src_ids != ids.pad if kind == "encoder" else decoder_real(dec_ids, ids.pad)).to(weights.dtype)  # (B, Tq)
    key_ids = dec_ids if kind == "decoder" else src_ids
    n_real = real.sum(-1)  # (B,)

    def summed(per_query: Tensor) -> tuple[Tensor, Tensor]:  # (B, H, Tq) -> sums over the real queries (B, H)
        return (per_query * real[:, None, :]).sum(dim=2), n_real

    names = dict(special[1] if kind == "decoder" else special[0])
    if kind == "decoder":  # the start token at position 0 counts whatever its id (Marian's and T5's is the pad id)
        names.setdefault(ids.bos, config_special_tokens(ids).get(ids.bos, f"id {ids.bos}"))
    token_ids = torch.tensor(list(names), dtype=key_ids.dtype, device=key_ids.device)  # (K,)
    is_token = (key_ids[:, :, None] == token_ids).to(weights.dtype)  # (B, Tk, K)
    on_token = torch.einsum("bhqk,bkn->nbhq", weights, is_token)  # (K, B, H, Tq): each query's weight on each
    per_token = (on_token * real[None, :, None, :]).sum(-1)  # (K, B, H), over the real queries; on the device
    sinks = (list(names.values()), per_token.sum(1))  # the tokens and their weight per head (K, H): ``sink_names``
    stats = {"entropy": summed(-torch.special.xlogy(weights, weights).sum(-1)), "special": (per_token.sum(0), n_real)}
    if kind == "cross":
        return stats, sinks
    t = weights.size(-1)
    position = torch.arange(t, device=weights.device)
    offset = position[None, :] - position[:, None]  # (Tq, Tk): j - i
    for name, shift in (("same", 0), ("previous", -1), ("next", 1)):
        stats[name] = summed((weights * (offset == shift).to(weights.dtype)).sum(-1))
    stats["distance"] = summed((weights * offset.abs().to(weights.dtype)).sum(-1))
    return stats, sinks


def _alignment_counts(weights: Tensor, alignment: Tensor) -> tuple[Tensor, Tensor]:
    """Cross weights (B, H, T', S) and alignment (B, T', S) -> per sentence and head the rows with a true source
    whose argmax source is true (B, H), and the rows with a true source (B,)."""
    rows = alignment.any(-1)  # (B, T')
    top = weights.argmax(-1)  # (B, H, T')
    hit = alignment[:, None].expand(-1, weights.size(1), -1, -1).gather(-1, top[..., None])[..., 0]  # (B, H, T')
    return (hit & rows[:, None]).sum(-1).double(), rows.sum(-1).double()


def _arc_counts(weights: Tensor, arcs: Sequence[Sequence[Arc]], relation: str) -> tuple[Tensor, Tensor]:
    """Encoder weights (B, H, S, S) -> per sentence and head ``relation``'s dependents whose argmax key is their
    head word (B, H), and the number of such dependents (B,)."""
    batch, n_heads = weights.shape[:2]
    hits = torch.zeros(batch, n_heads, dtype=torch.float64, device=weights.device)
    counts = torch.zeros(batch, dtype=torch.float64, device=weights.device)
    for b, sentence in enumerate(arcs):
        chosen = [(dep, head) for dep, head, rel in sentence if rel == relation]
        if chosen:
            dependent, head_word = (torch.tensor(column, device=weights.device) for column in zip(*chosen, strict=True))
            top = weights[b, :, dependent].argmax(-1)  # (H, n_arcs)
            hits[b] = (top == head_word[None, :]).double().sum(-1)
            counts[b] = len(chosen)
    return hits, counts


def check_annotations(src_ids: Tensor, tgt_ids: Tensor, alignment: Tensor | None,
                      arcs: Sequence[Sequence[Arc]] | None, pad_id: int,
                      target_arcs: Sequence[Sequence[Arc]] | None = None) -> None:
    """ValueError naming what is wrong with an alignment's shape or an arc's positions."""
    batch, s = src_ids.shape
    if alignment is not None:
        expected = (batch, tgt_ids.size(1) - 1, s)
        if not isinstance(alignment, Tensor) or alignment.dtype != torch.bool or tuple(alignment.shape) != expected:
            got = (f"{tuple(alignment.shape)} {alignment.dtype}" if isinstance(alignment, Tensor)
                   else type(alignment).__name__)
            raise ValueError(f"alignment must be a bool tensor of shape (B, T-1, S) = {expected}, got {got}")
    if arcs is not None:
        _check_arcs(arcs, src_ids, pad_id, "arcs", "source tokens")
    if target_arcs is not None:
        _check_arcs(target_arcs, tgt_ids[:, 1:], pad_id, "target_arcs", "target tokens (tgt_ids[:, 1:])")


def _check_arcs(arcs: Sequence[Sequence[Arc]], ids: Tensor, pad_id: int, name: str, what: str) -> None:
    """ValueError unless ``arcs`` holds one list of (dependent, head, relation) per row of ``ids`` (B, L), each
    position a real (non-padding) token."""
    batch, length = ids.shape
    if len(arcs) != batch:
        raise ValueError(f"{name} must hold one list per sentence: {batch} sentences, got {len(arcs)} lists")
    for b, sentence in enumerate(arcs):
        for arc in sentence:
            if len(arc) != 3:
                raise ValueError(f"an arc is (dependent, head, relation), got {arc!r} in sentence {b} of {name}")
            for position in arc[:2]:
                if not (isinstance(position, int) and 0 <= position < length) or ids[b, position] == pad_id:
                    raise ValueError(f"{name}: arc {arc!r} of sentence {b}: positions must be real {what} "
                                     f"in 0..{length - 1}")
