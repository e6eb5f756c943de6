"""Beam search: keep the ``beam_size`` most likely prefixes at every step, and record the search tree."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Real

import torch
from torch import Tensor

from ..checks import check_int
from ..network.attention import KVCache
from ..network.model import Ablation, Transformer
from ..network.trace import Trace
from .common import check_inputs, cross_attention_last, deadline_of, next_token_log_probs, out_of_time
from .fast import decode_step
from .processors import GenerationRules, apply_processors
from .records import BeamCandidate, BeamResult, BeamState, BeamStep, Hypothesis

# One ranked extension of a beam: (total log_prob, parent beam, token, log p(token)).
Ranked = tuple[float, int, int, float]
# What a recorded step saw, for all B * beam_size rows: (top ids (B*K, k), their probs (B*K, k),
# cross-attention (B*K, L, H, S)).
Recorded = tuple[Tensor, Tensor, Tensor]


def gnmt_length_penalty(length: int, alpha: float) -> float:
    """lp(Y) = ((5 + |Y|) / 6) ** alpha (Wu et al. 2016); alpha = 0 turns it off."""
    return ((5 + length) / 6) ** alpha


@dataclass
class _Sentence:
    """One source sentence's search so far."""

    live: list[BeamState]  # the beams the next step extends
    finished: list[Hypothesis] = field(default_factory=list)
    history: list[BeamStep] = field(default_factory=list)
    done: bool = False


@torch.inference_mode()
def beam_search(
    model: Transformer,
    src_ids: Tensor,
    *,
    beam_size: int,
    max_len: int,
    length_penalty: float = 0.6,
    early_stopping: bool = False,  # the pipeline's default too: search on until no live prefix can win
    n_best: int | None = None,
    bos_id: int | None = None,
    eos_id: int | None = None,
    record: bool = False,
    record_top_k: int = 5,
    ablate: Ablation | None = None,
    time_budget: float | None = None,
    rules: GenerationRules | None = None,
) -> list[BeamResult]:
    """Keep the ``beam_size`` most likely prefixes at every step; one ``BeamResult`` per row.

    The algorithm, per source sentence (all B * beam_size prefixes run as one batch, the
    KVCache following each surviving prefix's parent with ``cache.reorder``):

    1. Start with one live beam, BOS, log_prob 0.
    2. Extend every live beam by every token; a candidate's log_prob is its beam's plus
       log p(token). Take the 2 * beam_size best candidates over all beams.
    3. Going down that list: a candidate ending in EOS becomes a finished ``Hypothesis``
       if it ranks among the first beam_size (else it is pruned); any other candidate
       becomes a live beam of the next step until there are beam_size of them.
    4. Stop when ``early_stopping`` and beam_size hypotheses are finished; without it,
       when beam_size are finished and no live beam can still reach a better score than
       the beam_size-th best (its log_prob can only fall); or after ``max_len`` steps,
       when the live beams become hypotheses with ``finished=False``.

    Live beams are ranked by log_prob; hypotheses by ``score = log_prob / lp(length)``
    with lp(length) = ((5 + length) / 6) ** length_penalty and length = generated tokens
    including EOS (see ``Hypothesis``). Returns every hypothesis (or the ``n_best`` best),
    best first, and the history of every step. With beam_size=1 and early_stopping the
    result is greedy decoding's. ``time_budget`` (seconds): no step starts after it has passed; the live
    beams then end as at ``max_len`` and each result says ``timed_out``. ``rules``: the model's forced and
    forbidden tokens (``processors.GenerationRules``), applied to each beam's log-probs before they are ranked, as
    ``transformers``' beam search applies its logits processors.
    """
    check_inputs(model, src_ids, max_len, record_top_k)
    _check_beam_options(beam_size, length_penalty, n_best)
    deadline = deadline_of(time_budget)
    pad_id = model.config.pad_id
    bos_id = model.config.bos_id if bos_id is None else bos_id  # the decoder's start id (Marian: the pad id)
    eos_id = model.config.eos_id if eos_id is None else eos_id
    n_layers = model.config.n_decoder_layers
    batch, beams = src_ids.size(0), beam_size
    device = src_ids.device
    alpha = float(length_penalty)

    # Row b * beams + k of every tensor below is beam k of sentence b.
    memory = model.encode(src_ids, ablate=ablate).repeat_interleave(beams, dim=0)  # (B*K, S, D)
    memory_mask = model.memory_mask(src_ids).repeat_interleave(beams, dim=0)  # (B*K, 1, 1, S)
    cache = KVCache()
    last = torch.full((batch * beams, 1), bos_id, dtype=torch.long, device=device)  # newest token per row
    beam_log_probs = torch.full((batch, beams), float("-inf"), device=device)  # -inf: an empty slot
    beam_log_probs[:, 0] = 0.0  # one live beam to start with, not beam_size copies of BOS
    sentences = [_Sentence(live=[BeamState((), 0.0, None)]) for _ in range(batch)]
    processors = rules.processors(max_len) if rules is not None else []

    timed_out = False
    for step in range(max_len):
        if step and out_of_time(deadline):
            timed_out = True
            break
        trace = Trace() if record else None
        logits = decode_step(model, last, memory, memory_mask, cache=cache, trace=trace, ablate=ablate)
        log_probs = next_token_log_probs(logits[:, -1], pad_id)  # (B*K, V)
        if processors:
            log_probs = apply_processors(processors, _prefixes(sentences, beams, step, bos_id, pad_id, device),
                                         log_probs)
        ranked = _rank_candidates(beam_log_probs, log_probs, beams)
        recorded = _record(log_probs, trace, record_top_k, n_layers) if record else None
        kept: list[list[BeamState]] = [[] for _ in range(batch)]  # the next step's beams per sentence
        for b, sentence in enumerate(sentences):
            if not sentence.done:
                kept[b] = _advance(sentence, ranked[b], _recorded_rows(recorded, b * beams, len(sentence.live)),
                                   beams=beams, eos_id=eos_id, alpha=alpha, early_stopping=early_stopping,
                                   step=step, max_len=max_len)
        if all(sentence.done for sentence in sentences):
            break
        next_parent, next_token, next_log_probs = _next_beams(kept, beams, pad_id)
        # Every row continues from its parent: reorder the cached keys/values to match.
        index = (torch.arange(batch)[:, None] * beams + next_parent).view(-1).to(device)
        cache.reorder(index)
        last = next_token.view(-1, 1).to(device)
        beam_log_probs = next_log_probs.to(device)

    return [_result(sentence, alpha, n_best, timed_out and not sentence.done) for sentence in sentences]


def _check_beam_options(beam_size: int, length_penalty: float, n_best: int | None) -> None:
    check_int("beam_size", beam_size, 1)
    if isinstance(length_penalty, bool) or not isinstance(length_penalty, Real) or not math.isfinite(length_penalty):
        raise ValueError(f"length_penalty must be a finite number, got {length_penalty!r}")
    if n_best is not None:
        check_int("n_best", n_best, 1)


def _prefixes(sentences: list[_Sentence], beams: int, step: int, bos_id: int, pad_id: int,
              device: torch.device) -> Tensor:
    """Every row's decoder ids so far, (B*K, 1 + step): the start id, then its live beam's tokens (padding for an
    empty slot or a finished sentence, whose rows are ignored)."""
    rows = []
    for sentence in sentences:
        for k in range(beams):
            live = sentence.live[k].tokens if k < len(sentence.live) and not sentence.done else ()
            rows.append([bos_id, *(live if len(live) == step else (pad_id,) * step)])
    return torch.tensor(rows, dtype=torch.long, device=device)


def _rank_candidates(beam_log_probs: Tensor, log_probs: Tensor, beams: int) -> list[list[Ranked]]:
    """Per sentence: the 2 * beams best extensions over all its beams, best first.

    beam_log_probs: (B, K), -inf for an empty slot; log_probs: (B*K, V), each row's next token.
    """
    batch, vocab = beam_log_probs.size(0), log_probs.size(-1)
    totals = (beam_log_probs.view(-1, 1) + log_probs).view(batch, beams * vocab)  # (B, K*V)
    n_candidates = min(2 * beams, beams * vocab)
    top_totals, top_flat = totals.topk(n_candidates, dim=1)  # (B, 2K)
    top_parents, top_tokens = top_flat // vocab, top_flat % vocab
    token_log_probs = log_probs.view(batch, beams, vocab)[
        torch.arange(batch, device=log_probs.device)[:, None], top_parents, top_tokens
    ]  # (B, 2K)
    rows = zip(top_totals.tolist(), top_parents.tolist(), top_tokens.tolist(), token_log_probs.tolist(), strict=True)
    return [list(zip(*row, strict=True)) for row in rows]


def _record(log_probs: Tensor, trace: Trace, record_top_k: int, n_layers: int) -> Recorded:
    """Every row's ``record_top_k`` most likely next tokens and its newest cross-attention."""
    top_probs, top_ids = log_probs.exp().topk(min(record_top_k, log_probs.size(-1)), dim=-1)  # (B*K, k)
    return top_ids, top_probs, cross_attention_last(trace, n_layers)


def _recorded_rows(recorded: Recorded | None, first: int, n: int) -> Recorded | None:
    """Rows ``first`` .. ``first + n - 1`` of a recorded step: one sentence's live beams."""
    return None if recorded is None else tuple(part[first: first + n] for part in recorded)


def _advance(sentence: _Sentence, ranked: list[Ranked], recorded: Recorded | None, *, beams: int, eos_id: int,
             alpha: float, early_stopping: bool, step: int, max_len: int) -> list[BeamState]:
    """Take one step of one sentence's search: sort its ranked candidates into kept, finished and
    pruned, log the step in its history, and return the beams it continues with."""
    kept, candidates, ended = _sort_candidates(sentence.live, ranked, beams, eos_id, alpha)
    top_ids, top_probs, attention = recorded if recorded is not None else (None, None, None)
    sentence.history.append(BeamStep(sentence.live, candidates, top_ids, top_probs, attention))
    sentence.finished += ended
    sentence.live = kept
    sentence.done = not kept or _search_is_over(sentence.finished, kept, beams, early_stopping, alpha, step, max_len)
    return kept


def _sort_candidates(live: list[BeamState], ranked: list[Ranked], beams: int, eos_id: int,
                     alpha: float) -> tuple[list[BeamState], list[BeamCandidate], list[Hypothesis]]:
    """Go down the ranked candidates: (the next step's beams, every candidate with its outcome,
    the hypotheses that finished)."""
    kept: list[BeamState] = []
    candidates: list[BeamCandidate] = []
    ended: list[Hypothesis] = []
    for rank, (total, parent, token, token_log_prob) in enumerate(ranked):
        if total == float("-inf"):
            break  # only empty slots and PAD are left
        prefix = live[parent].tokens
        outcome = _outcome(rank, token, len(kept), beams, eos_id)
        if outcome == "finished":
            ended.append(Hypothesis(prefix, total, total / gnmt_length_penalty(len(prefix) + 1, alpha), True))
        elif outcome == "kept":
            kept.append(BeamState((*prefix, token), total, parent))
        candidates.append(BeamCandidate(parent, token, token_log_prob, total, outcome))
    return kept, candidates, ended


def _outcome(rank: int, token: int, n_kept: int, beams: int, eos_id: int) -> str:
    """What becomes of the candidate at ``rank`` (0-based) when ``n_kept`` beams are already kept."""
    if n_kept == beams:
        return "pruned"  # the next step is full
    if token == eos_id:
        return "finished" if rank < beams else "pruned"  # EOS counts only among the first beam_size
    return "kept"


def _search_is_over(finished: list[Hypothesis], live: list[BeamState], beams: int, early_stopping: bool,
                    alpha: float, step: int, max_len: int) -> bool:
    """Whether one sentence's search can stop after ``step`` (0-based)."""
    if len(finished) < beams:
        return False
    if early_stopping:
        return True
    # A live beam's log_prob only falls as it grows, so its best possible score is its
    # log_prob over the largest penalty among the lengths it can still end at.
    kth_best = sorted((h.score for h in finished), reverse=True)[beams - 1]
    best_lp = max(gnmt_length_penalty(step + 2, alpha), gnmt_length_penalty(max_len, alpha))
    return all(state.log_prob / best_lp <= kth_best for state in live)


def _next_beams(kept: list[list[BeamState]], beams: int, pad_id: int) -> tuple[Tensor, Tensor, Tensor]:
    """The next step's (parent, token, log_prob) per slot, each (B, K); empty slots get
    parent 0, PAD and -inf."""
    batch = len(kept)
    parent = torch.zeros(batch, beams, dtype=torch.long)
    token = torch.full((batch, beams), pad_id, dtype=torch.long)
    log_prob = torch.full((batch, beams), float("-inf"))
    for b, states in enumerate(kept):
        for k, state in enumerate(states):
            parent[b, k], token[b, k], log_prob[b, k] = state.parent, state.tokens[-1], state.log_prob
    return parent, token, log_prob


def _result(sentence: _Sentence, alpha: float, n_best: int | None, timed_out: bool = False) -> BeamResult:
    """The sentence's hypotheses, best score first; at max_len the live beams end here, unfinished."""
    hypotheses = list(sentence.finished)
    if not sentence.done:
        hypotheses += [Hypothesis(s.tokens, s.log_prob, s.log_prob / gnmt_length_penalty(len(s.tokens), alpha),
                                  False) for s in sentence.live]
    hypotheses.sort(key=lambda h: h.score, reverse=True)
    return BeamResult(hypotheses[:n_best] if n_best else hypotheses, sentence.history, timed_out)
