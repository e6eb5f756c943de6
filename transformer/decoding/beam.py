"""Beam search: keep the ``beam_size`` most likely prefixes at every step, and record the search tree.

Two rules rank finished hypotheses and decide when a sentence's search is over (``length_norm``):

- ``"gnmt"`` (the default, our models'): ``score = log_prob / ((5 + |Y|) / 6) ** alpha``, the length penalty of
  Wu et al. 2016, "Google's Neural Machine Translation System" (section 7); without ``early_stopping`` the search
  goes on until no live beam can still reach the ``beam_size``-th best score (an exact bound);
- ``"hf"`` (Hugging Face folders): ``transformers``' rule (``GenerationMixin._beam_search``, formerly
  ``BeamHypotheses``): ``score = log_prob / |Y| ** alpha``, and its stopping heuristics for ``early_stopping``
  True / False / "never", so that beam search gives what ``generate(num_beams=K)`` gives.

In both, ``|Y|`` counts the generated tokens including EOS, the decoder's start id not counted (``transformers``:
``cur_len + 1 - decoder_prompt_len``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from numbers import Real
from typing import Literal

import torch
from torch import Tensor

from ..checks import check_int
from ..network.attention import KVCache
from ..network.model import Ablation, Transformer
from ..network.trace import Trace
from .common import deadline_of, excluded_pad, next_token_log_probs, out_of_time
from .context import Context, source_context
from .generate import eos_list
from .processors import GenerationRules, apply_processors
from .records import BeamCandidate, BeamResult, BeamState, BeamStep, Hypothesis

# One ranked extension of a beam: (total log_prob, parent beam, token, log p(token)).
Ranked = tuple[float, int, int, float]
# What a recorded step saw, for all B * beam_size rows: (top ids (B*K, k), their probs (B*K, k),
# cross-attention (B*K, L, H, S)).
Recorded = tuple[Tensor, Tensor, Tensor]


LengthNorm = Literal["gnmt", "hf"]
LENGTH_NORMS = ("gnmt", "hf")
EarlyStopping = bool | Literal["never"]


def gnmt_length_penalty(length: int, alpha: float) -> float:
    """lp(Y) = ((5 + |Y|) / 6) ** alpha (Wu et al. 2016); alpha = 0 turns it off."""
    return ((5 + length) / 6) ** alpha


def length_penalty_of(length: int, alpha: float, norm: LengthNorm = "gnmt") -> float:
    """What a hypothesis' log-probability is divided by: GNMT's ``((5 + length) / 6) ** alpha`` (``"gnmt"``), or
    ``transformers``' ``length ** alpha`` (``"hf"``); ``length``: generated tokens, EOS included."""
    return gnmt_length_penalty(length, alpha) if norm == "gnmt" else float(length) ** alpha


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
    early_stopping: EarlyStopping = False,  # the pipeline's default too: search on until no live prefix can win
    length_norm: LengthNorm = "gnmt",
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
    4. Stop when ``early_stopping=True`` and beam_size hypotheses are finished; otherwise when beam_size are
       finished and no live beam can beat the beam_size-th best score, by the bound ``length_norm`` names (below);
       or after ``max_len`` steps, when the live beams become hypotheses with ``finished=False`` (and compete
       with the finished ones, as at ``transformers``' ``max_length``).

    Live beams are ranked by log_prob; hypotheses by ``score = log_prob / lp(length)``, length = generated tokens
    including EOS (see ``Hypothesis``), lp by ``length_norm``:

    - ``"gnmt"`` (default): lp = ((5 + length) / 6) ** length_penalty (Wu et al. 2016). A live beam's bound is
      its log_prob (it can only fall) over the largest lp of the lengths it can still end at: exact, so
      ``early_stopping=False`` and ``"never"`` are the same search.
    - ``"hf"``: lp = length ** length_penalty, and ``transformers``' bounds: with ``early_stopping=False`` the best
      live log_prob over lp(its current length) (a heuristic: with length_penalty > 0 a longer hypothesis may
      still have won); with ``"never"`` over lp(max_len) when length_penalty > 0. ``generate(num_beams=K,
      length_penalty=a, early_stopping=e, max_new_tokens=max_len)`` gives the same best hypothesis.

    Returns every hypothesis (or the ``n_best`` best),
    best first, and the history of every step. With beam_size=1 and early_stopping the
    result is greedy decoding's. ``time_budget`` (seconds): no step starts after it has passed; the live
    beams then end as at ``max_len`` and each result says ``timed_out``. ``rules``: the model's forced and
    forbidden tokens (``processors.GenerationRules``), applied to each beam's log-probs before they are ranked, as
    ``transformers``' beam search applies its logits processors.
    """
    context = source_context(model, src_ids, max_len, record_top_k, bos_id, ablate)
    return search(context, beam_size=beam_size, max_len=max_len, length_penalty=length_penalty,
                  early_stopping=early_stopping, length_norm=length_norm, n_best=n_best,
                  eos_ids=eos_list(eos_id, model.config.eos_id), record=record, record_top_k=record_top_k,
                  time_budget=time_budget, rules=rules)


def search(context: Context, *, beam_size: int, max_len: int, length_penalty: float, early_stopping: EarlyStopping,
           length_norm: LengthNorm, n_best: int | None, eos_ids: Sequence[int], record: bool, record_top_k: int,
           time_budget: float | None, rules: GenerationRules | None) -> list[BeamResult]:
    """``beam_search`` from a ``context``: an encoder-decoder's source or a decoder-only model's prompt (every
    row's start ids, then its beam's tokens, are what the processors read). Any of ``eos_ids`` ends a hypothesis;
    each step ranks ``max(2, 1 + len(eos_ids)) * beam_size`` candidates, as ``transformers`` does, so that
    beam_size of them still go on when the first ones all end."""
    _check_beam_options(beam_size, length_penalty, n_best, early_stopping, length_norm)
    deadline = deadline_of(time_budget)
    pad_id = context.model.config.pad_id
    batch, beams = context.start.size(0), beam_size
    device = context.start.device
    rule = _Rule(float(length_penalty), length_norm, early_stopping, max_len)
    n_candidates = max(2, 1 + len(eos_ids)) * beams

    # Row b * beams + k of every tensor below is beam k of sentence b.
    context = context.expand(beams)
    cache = KVCache()
    ids = context.start  # (B*K, P + t): every row's start, then its beam's tokens
    beam_log_probs = torch.full((batch, beams), float("-inf"), device=device)  # -inf: an empty slot
    beam_log_probs[:, 0] = 0.0  # one live beam to start with, not beam_size copies of the start
    sentences = [_Sentence(live=[BeamState((), 0.0, None)]) for _ in range(batch)]
    processors = rules.processors(max_len, context.prompt_len) if rules is not None else []

    timed_out = False
    for step in range(max_len):
        if step and out_of_time(deadline):
            timed_out = True
            break
        trace = Trace() if record else None
        log_probs = next_token_log_probs(context.logits(ids, cache, trace), excluded_pad(pad_id, rules))  # (B*K, V)
        log_probs = apply_processors(processors, ids, log_probs)
        ranked = _rank_candidates(beam_log_probs, log_probs, beams, n_candidates)
        recorded = _record(log_probs, context.attention(trace, ids.size(1)), record_top_k) if record else None
        kept: list[list[BeamState]] = [[] for _ in range(batch)]  # the next step's beams per sentence
        for b, sentence in enumerate(sentences):
            if not sentence.done:
                kept[b] = _advance(sentence, ranked[b], _recorded_rows(recorded, b * beams, len(sentence.live)),
                                   beams=beams, eos_ids=frozenset(eos_ids), rule=rule, step=step)
        if all(sentence.done for sentence in sentences):
            break
        next_parent, next_token, next_log_probs = _next_beams(kept, beams, pad_id)
        # Every row continues from its parent: reorder the cached keys/values (and the ids) to match.
        index = (torch.arange(batch)[:, None] * beams + next_parent).view(-1).to(device)
        cache.reorder(index)
        ids = torch.cat([ids.index_select(0, index), next_token.view(-1, 1).to(device)], dim=1)
        beam_log_probs = next_log_probs.to(device)

    return [_result(sentence, rule, n_best, timed_out and not sentence.done) for sentence in sentences]


@dataclass(frozen=True)
class _Rule:
    """How hypotheses are scored and when a sentence's search is over (see ``beam_search``)."""

    alpha: float  # the length_penalty
    norm: LengthNorm
    early_stopping: EarlyStopping
    max_len: int

    def score(self, log_prob: float, length: int) -> float:
        return log_prob / length_penalty_of(length, self.alpha, self.norm)

    def live_bound_penalty(self, step: int) -> float:
        """What a live beam's log_prob is divided by to bound the score it can still reach, after ``step``
        (0-based: it holds step + 1 tokens)."""
        if self.norm == "gnmt":  # exact: the largest lp of the lengths step + 2 .. max_len (lp is monotonic)
            return max(gnmt_length_penalty(step + 2, self.alpha), gnmt_length_penalty(self.max_len, self.alpha))
        # transformers' _check_early_stop_heuristic: cur_len - decoder_prompt_len = step + 1 tokens, or
        # max_length - decoder_prompt_len = max_len under "never" with a positive penalty
        length = self.max_len if self.early_stopping == "never" and self.alpha > 0 else step + 1
        return float(length) ** self.alpha


def _check_beam_options(beam_size: int, length_penalty: float, n_best: int | None, early_stopping: EarlyStopping,
                        length_norm: LengthNorm) -> None:
    check_int("beam_size", beam_size, 1)
    if isinstance(length_penalty, bool) or not isinstance(length_penalty, Real) or not math.isfinite(length_penalty):
        raise ValueError(f"length_penalty must be a finite number, got {length_penalty!r}")
    if n_best is not None:
        check_int("n_best", n_best, 1)
    if not isinstance(early_stopping, bool) and early_stopping != "never":
        raise ValueError(f"early_stopping must be True, False or 'never', got {early_stopping!r}")
    if length_norm not in LENGTH_NORMS:
        raise ValueError(f"length_norm must be one of {', '.join(LENGTH_NORMS)}, got {length_norm!r}")


def _rank_candidates(beam_log_probs: Tensor, log_probs: Tensor, beams: int, n_candidates: int) -> list[list[Ranked]]:
    """Per sentence: the ``n_candidates`` best extensions over all its beams, best first.

    beam_log_probs: (B, K), -inf for an empty slot; log_probs: (B*K, V), each row's next token.
    """
    batch, vocab = beam_log_probs.size(0), log_probs.size(-1)
    totals = (beam_log_probs.view(-1, 1) + log_probs).view(batch, beams * vocab)  # (B, K*V)
    n_candidates = min(n_candidates, beams * vocab)
    top_totals, top_flat = totals.topk(n_candidates, dim=1)  # (B, 2K)
    top_parents, top_tokens = top_flat // vocab, top_flat % vocab
    token_log_probs = log_probs.view(batch, beams, vocab)[
        torch.arange(batch, device=log_probs.device)[:, None], top_parents, top_tokens
    ]  # (B, 2K)
    rows = zip(top_totals.tolist(), top_parents.tolist(), top_tokens.tolist(), token_log_probs.tolist(), strict=True)
    return [list(zip(*row, strict=True)) for row in rows]


def _record(log_probs: Tensor, attention: Tensor, record_top_k: int) -> Recorded:
    """Every row's ``record_top_k`` most likely next tokens and its newest attention over the source."""
    top_probs, top_ids = log_probs.exp().topk(min(record_top_k, log_probs.size(-1)), dim=-1)  # (B*K, k)
    return top_ids, top_probs, attention


def _recorded_rows(recorded: Recorded | None, first: int, n: int) -> Recorded | None:
    """Rows ``first`` .. ``first + n - 1`` of a recorded step: one sentence's live beams."""
    return None if recorded is None else tuple(part[first: first + n] for part in recorded)


def _advance(sentence: _Sentence, ranked: list[Ranked], recorded: Recorded | None, *, beams: int,
             eos_ids: frozenset[int], rule: _Rule, step: int) -> list[BeamState]:
    """Take one step of one sentence's search: sort its ranked candidates into kept, finished and
    pruned, log the step in its history, and return the beams it continues with."""
    kept, candidates, ended = _sort_candidates(sentence.live, ranked, beams, eos_ids, rule)
    top_ids, top_probs, attention = recorded if recorded is not None else (None, None, None)
    sentence.history.append(BeamStep(sentence.live, candidates, top_ids, top_probs, attention))
    sentence.finished += ended
    sentence.live = kept
    # At the last step the live beams end unfinished and compete with the finished ones (``_result``), as every
    # candidate of transformers' last step is finished by its max_length criterion.
    sentence.done = not kept or (step < rule.max_len - 1 and _search_is_over(sentence.finished, kept, beams, rule,
                                                                               step))
    return kept


def _sort_candidates(live: list[BeamState], ranked: list[Ranked], beams: int, eos_ids: frozenset[int],
                     rule: _Rule) -> tuple[list[BeamState], list[BeamCandidate], list[Hypothesis]]:
    """Go down the ranked candidates: (the next step's beams, every candidate with its outcome,
    the hypotheses that finished)."""
    kept: list[BeamState] = []
    candidates: list[BeamCandidate] = []
    ended: list[Hypothesis] = []
    for rank, (total, parent, token, token_log_prob) in enumerate(ranked):
        if total == float("-inf"):
            break  # only empty slots and PAD are left
        prefix = live[parent].tokens
        outcome = _outcome(rank, token, len(kept), beams, eos_ids)
        if outcome == "finished":
            ended.append(Hypothesis(prefix, total, rule.score(total, len(prefix) + 1), True))
        elif outcome == "kept":
            kept.append(BeamState((*prefix, token), total, parent))
        candidates.append(BeamCandidate(parent, token, token_log_prob, total, outcome))
    return kept, candidates, ended


def _outcome(rank: int, token: int, n_kept: int, beams: int, eos_ids: frozenset[int]) -> str:
    """What becomes of the candidate at ``rank`` (0-based) when ``n_kept`` beams are already kept."""
    if n_kept == beams:
        return "pruned"  # the next step is full
    if token in eos_ids:
        return "finished" if rank < beams else "pruned"  # EOS counts only among the first beam_size
    return "kept"


def _search_is_over(finished: list[Hypothesis], live: list[BeamState], beams: int, rule: _Rule, step: int) -> bool:
    """Whether one sentence's search can stop after ``step`` (0-based): beam_size hypotheses finished and, unless
    ``early_stopping=True``, no live beam's bound (``_Rule.live_bound_penalty``) above the beam_size-th best score
    (``transformers``: ``is_early_stop_heuristic_unsatisfied`` turns False)."""
    if len(finished) < beams:
        return False
    if rule.early_stopping is True:
        return True
    kth_best = sorted((h.score for h in finished), reverse=True)[beams - 1]
    bound = rule.live_bound_penalty(step)
    return all(state.log_prob / bound <= kth_best for state in live)


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


def _result(sentence: _Sentence, rule: _Rule, n_best: int | None, timed_out: bool = False) -> BeamResult:
    """The sentence's hypotheses, best score first; at max_len the live beams end here, unfinished."""
    hypotheses = list(sentence.finished)
    if not sentence.done:
        hypotheses += [Hypothesis(s.tokens, s.log_prob, rule.score(s.log_prob, len(s.tokens)), False)
                       for s in sentence.live]
    hypotheses.sort(key=lambda h: h.score, reverse=True)
    return BeamResult(hypotheses[:n_best] if n_best else hypotheses, sentence.history, timed_out)
