"""Turning next-token distributions into an output sentence: greedy, beam search, sampling.

The decoder input starts with BOS; at every step the model gives a distribution over the
next token given the source and the tokens so far, and generation stops at EOS or after
``max_len`` tokens. Every function here is batched: ``src_ids`` is (B, S), padded with the
model's ``pad_id``, and each row is decoded independently of the others.

Conventions shared by the three strategies:

- PAD is never generated: its logit is set to -inf before the softmax, so every
  probability and log-probability reported here is that of the model's distribution over
  the other tokens (``next_token_log_probs``). This keeps generated prefixes free of
  padding, which the cached decoder (no self-attention mask) relies on.
- Output ``tokens`` hold neither BOS nor EOS; ``finished`` says whether EOS was produced.
  A row that produced EOS is fed PAD afterwards and its output is ignored.
- ``log_prob`` of an output is the sum of log p(token) over the generated tokens
  *including* the final EOS when there is one, under the model's own (temperature 1)
  distribution.
- The model must be in eval mode (dropout off); the functions run under
  ``torch.inference_mode`` and never modify the model, so one model can serve many threads.

With a ``KVCache`` the decoder is fed only the newest token each step; the keys and values
of earlier positions (self-attention) and of the encoder output (cross-attention) are
reused rather than recomputed, which makes a step O(t) instead of O(t^2).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from numbers import Real

import torch
import torch.nn.functional as F
from torch import Tensor

from ..network.attention import KVCache
from ..network.model import Ablation, Transformer
from ..network.trace import Trace
from ..text.ids import BOS_ID, EOS_ID

# ---------------------------------------------------------------------------- records


@dataclass(frozen=True)
class DecodeStep:
    """What one output step of greedy decoding or sampling saw (B rows, k = ``record_top_k``).

    ``probs`` are those of the distribution the token was chosen from: the model's for
    greedy decoding; after temperature, top-k and top-p for sampling.
    """

    top_ids: Tensor  # (B, k) int64: the k most likely next tokens, most likely first
    top_probs: Tensor  # (B, k) float: their probabilities, sorted descending
    token: Tensor  # (B,) int64: the token chosen at this step (PAD for rows already finished)
    token_prob: Tensor  # (B,) float: probability of the chosen token
    cross_attention: Tensor  # (B, L, H, S): this step's query over the source, every decoder layer and head
    active: Tensor  # (B,) bool: whether the row was still generating (had not produced EOS before)


@dataclass(frozen=True)
class DecodeResult:
    """The output of greedy decoding or sampling for a batch of B source sentences."""

    tokens: list[list[int]]  # per row: generated ids, without BOS and EOS
    finished: list[bool]  # per row: True if EOS was produced within max_len
    log_probs: list[float]  # per row: sum of the model's log-probs of the generated tokens, EOS included
    ids: Tensor  # (B, 1 + T): the decoder input as generated: BOS, tokens, EOS, then PAD
    steps: list[DecodeStep] = field(default_factory=list)  # one per output step when record=True


@dataclass(frozen=True)
class Hypothesis:
    """One complete output of beam search.

    ``score = log_prob / lp(length)`` with the GNMT length penalty
    ``lp(length) = ((5 + length) / 6) ** alpha``, where ``length`` counts the generated
    tokens including EOS (``len(tokens) + 1`` when finished, ``len(tokens)`` when max_len
    cut it off).
    """

    tokens: tuple[int, ...]  # generated ids, without BOS and EOS
    log_prob: float  # sum of log-probs of the generated tokens, EOS included
    score: float  # log_prob / lp(length): what hypotheses are ranked by
    finished: bool  # True if it ended with EOS; False if max_len cut it off

    @property
    def length(self) -> int:
        """The length the penalty uses: generated tokens including EOS."""
        return len(self.tokens) + int(self.finished)


@dataclass(frozen=True)
class BeamState:
    """A live hypothesis at the start of a beam-search step: a node of the search tree."""

    tokens: tuple[int, ...]  # generated so far, without BOS
    log_prob: float  # sum of their log-probs: what live beams are ranked by
    parent: int | None  # index into the previous step's ``beams``; None at the first step


@dataclass(frozen=True)
class BeamCandidate:
    """One extension the search considered at a step: an edge of the search tree."""

    beam: int  # which of this step's ``beams`` it extends
    token: int
    token_log_prob: float  # log p(token | that beam's tokens, source)
    log_prob: float  # the beam's log_prob + token_log_prob
    outcome: str  # "kept" (a beam of the next step), "finished" (EOS: a Hypothesis) or "pruned"


@dataclass(frozen=True)
class BeamStep:
    """One step of beam search for one source sentence (n = live beams at this step)."""

    beams: list[BeamState]  # the live hypotheses extended at this step
    candidates: list[BeamCandidate]  # the 2 * beam_size best extensions over all beams, best first
    top_ids: Tensor | None = None  # (n, k) when record=True: each beam's k most likely next tokens
    top_probs: Tensor | None = None  # (n, k) when record=True: their probabilities
    cross_attention: Tensor | None = None  # (n, L, H, S) when record=True


@dataclass(frozen=True)
class BeamResult:
    """Beam search's answer for one source sentence."""

    hypotheses: list[Hypothesis]  # best score first (at most n_best)
    history: list[BeamStep]  # one per step: enough to draw the search tree

    @property
    def best(self) -> Hypothesis:
        return self.hypotheses[0]


# ---------------------------------------------------------------------------- helpers


def next_token_log_probs(logits: Tensor, pad_id: int) -> Tensor:
    """log softmax of ``logits`` (..., V) with PAD excluded (its log-prob is -inf)."""
    logits = logits.float().clone()
    logits[..., pad_id] = float("-inf")
    return F.log_softmax(logits, dim=-1)


def gnmt_length_penalty(length: int, alpha: float) -> float:
    """lp(Y) = ((5 + |Y|) / 6) ** alpha (Wu et al. 2016); alpha = 0 turns it off."""
    return ((5 + length) / 6) ** alpha


def _cross_attention_last(trace: Trace, n_layers: int) -> Tensor:
    """The newest query's cross-attention in every layer: (B, L, H, S)."""
    return torch.stack([trace.attention("cross", layer)[:, :, -1, :] for layer in range(n_layers)], dim=1)


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def _check_inputs(model: Transformer, src_ids: Tensor, max_len: int, record_top_k: int) -> None:
    if model.training:
        raise ValueError("decoding needs the model in eval mode (dropout off): call model.eval() first")
    if not isinstance(src_ids, Tensor) or src_ids.dim() != 2 or src_ids.dtype not in (torch.int64, torch.int32):
        raise ValueError("src_ids must be an integer tensor of shape (batch, source length)")
    if src_ids.size(0) == 0 or src_ids.size(1) == 0:
        raise ValueError(f"src_ids must hold at least one token per row, got shape {tuple(src_ids.shape)}")
    _check_int("max_len", max_len, 1)
    if max_len > model.config.max_len:
        raise ValueError(
            f"max_len ({max_len}) exceeds the model's positional table (max_len={model.config.max_len})"
        )
    _check_int("record_top_k", record_top_k, 1)


# ---------------------------------------------------------------------------- greedy and sampling

# Picks the next token from (B, V) log-probs: returns (tokens (B,), probs of the
# distribution chosen from (B, V)).
Chooser = Callable[[Tensor], tuple[Tensor, Tensor]]


def _greedy_choice(log_probs: Tensor) -> tuple[Tensor, Tensor]:
    return log_probs.argmax(dim=-1), log_probs.exp()


def _generate(
    model: Transformer,
    src_ids: Tensor,
    choose: Chooser,
    *,
    max_len: int,
    bos_id: int,
    eos_id: int | None,
    use_cache: bool,
    record: bool,
    record_top_k: int,
    ablate: Ablation | None,
) -> DecodeResult:
    """The loop greedy decoding and sampling share; ``choose`` is the only difference."""
    _check_inputs(model, src_ids, max_len, record_top_k)
    pad_id = model.config.pad_id
    batch = src_ids.size(0)
    device = src_ids.device

    memory = model.encode(src_ids, ablate=ablate)  # (B, S, D), computed once
    memory_mask = model.memory_mask(src_ids)  # (B, 1, 1, S)
    cache = KVCache() if use_cache else None

    ids = torch.full((batch, 1), bos_id, dtype=torch.long, device=device)  # (B, 1 + t)
    active = torch.ones(batch, dtype=torch.bool, device=device)
    log_prob_sums = torch.zeros(batch, dtype=torch.float32, device=device)
    steps: list[DecodeStep] = []

    for _ in range(max_len):
        trace = Trace() if record else None
        decoder_input = ids[:, -1:] if use_cache else ids  # only the newest token when cached
        logits = model.decode(decoder_input, memory, memory_mask, cache=cache, trace=trace, ablate=ablate)
        log_probs = next_token_log_probs(logits[:, -1], pad_id)  # (B, V)
        token, probs = choose(log_probs)
        token = torch.where(active, token, torch.full_like(token, pad_id))  # finished rows get PAD
        chosen_log_prob = log_probs.gather(1, token[:, None]).squeeze(1)
        log_prob_sums += torch.where(active, chosen_log_prob, torch.zeros_like(chosen_log_prob))
        if record:
            k = min(record_top_k, probs.size(-1))
            top_probs, top_ids = probs.topk(k, dim=-1)  # sorted descending
            steps.append(DecodeStep(
                top_ids=top_ids,
                top_probs=top_probs,
                token=token,
                token_prob=probs.gather(1, token[:, None]).squeeze(1),
                cross_attention=_cross_attention_last(trace, model.config.n_decoder_layers),
                active=active.clone(),
            ))
        ids = torch.cat([ids, token[:, None]], dim=1)
        if eos_id is not None:
            active = active & (token != eos_id)
            if not bool(active.any()):
                break

    tokens, finished = [], []
    for row in ids[:, 1:].tolist():
        ended = eos_id is not None and eos_id in row
        tokens.append(row[: row.index(eos_id)] if ended else [t for t in row if t != pad_id])
        finished.append(ended)
    return DecodeResult(tokens=tokens, finished=finished, log_probs=log_prob_sums.tolist(), ids=ids, steps=steps)


@torch.inference_mode()
def greedy_decode(
    model: Transformer,
    src_ids: Tensor,
    *,
    max_len: int,
    bos_id: int = BOS_ID,
    eos_id: int | None = EOS_ID,
    use_cache: bool = True,
    record: bool = False,
    record_top_k: int = 5,
    ablate: Ablation | None = None,
) -> DecodeResult:
    """Pick the most likely next token at every step.

    src_ids: (B, S) padded with PAD. ``max_len`` bounds the generated tokens (EOS included)
    and may not exceed ``model.config.max_len``. ``use_cache=False`` recomputes the whole
    prefix every step (same tokens, slower: kept for teaching and for the parity test).
    ``eos_id=None`` never stops early (benchmarks force a length that way). ``record=True``
    fills ``steps`` with one ``DecodeStep`` per output step; ``ablate`` switches off heads
    (see ``Transformer.forward``).
    """
    return _generate(model, src_ids, _greedy_choice, max_len=max_len, bos_id=bos_id, eos_id=eos_id,
                     use_cache=use_cache, record=record, record_top_k=record_top_k, ablate=ablate)


def _check_sampling(temperature: float, top_k: int | None, top_p: float | None) -> None:
    if isinstance(temperature, bool) or not isinstance(temperature, Real) or not 0 < temperature < math.inf:
        raise ValueError(f"temperature must be a number > 0, got {temperature!r}")
    if top_k is not None:
        _check_int("top_k", top_k, 1)
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, Real) or not 0 < top_p <= 1):
        raise ValueError(f"top_p must be a number with 0 < top_p <= 1, got {top_p!r}")


def sampling_distribution(
    log_probs: Tensor, *, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> Tensor:
    """The distribution sampling draws from, (..., V) log-probs -> (..., V) probabilities.

    p_i proportional to exp(log p_i / temperature), then only the ``top_k`` most likely
    tokens kept, then only the smallest set of most likely tokens whose probability reaches
    ``top_p`` (nucleus sampling), renormalised after each cut.
    """
    _check_sampling(temperature, top_k, top_p)
    logits = log_probs / temperature
    if top_k is not None and top_k < logits.size(-1):
        kth = logits.topk(top_k, dim=-1).values[..., -1:]  # (..., 1): the k-th largest
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if top_p is not None and top_p < 1:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        # keep a token if the tokens before it have not reached top_p yet (the first always stays)
        drop_sorted = sorted_probs.cumsum(dim=-1) - sorted_probs >= top_p
        drop = drop_sorted.scatter(-1, order, drop_sorted)
        probs = probs.masked_fill(drop, 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


@torch.inference_mode()
def sample(
    model: Transformer,
    src_ids: Tensor,
    *,
    max_len: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    bos_id: int = BOS_ID,
    eos_id: int | None = EOS_ID,
    use_cache: bool = True,
    record: bool = False,
    record_top_k: int = 5,
    ablate: Ablation | None = None,
) -> DecodeResult:
    """Draw each next token from the model's distribution, reshaped by temperature, top-k, top-p.

    Reproducible: the same ``seed`` and the same batch give the same tokens (a private
    ``torch.Generator``; the global RNG is never touched). ``seed=None`` draws a fresh
    seed. ``top_k=1`` is greedy decoding. Raises ValueError unless temperature > 0,
    top_k >= 1 and 0 < top_p <= 1. The recorded ``probs`` are those of the reshaped
    distribution; ``log_probs`` of the result are the model's own (temperature 1).
    """
    _check_sampling(temperature, top_k, top_p)
    if seed is not None:
        _check_int("seed", seed, 0)
    generator = torch.Generator(device=src_ids.device)
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(seed)

    def choose(log_probs: Tensor) -> tuple[Tensor, Tensor]:
        probs = sampling_distribution(log_probs, temperature=temperature, top_k=top_k, top_p=top_p)
        return torch.multinomial(probs, 1, generator=generator).squeeze(1), probs

    return _generate(model, src_ids, choose, max_len=max_len, bos_id=bos_id, eos_id=eos_id,
                     use_cache=use_cache, record=record, record_top_k=record_top_k, ablate=ablate)


# ---------------------------------------------------------------------------- beam search


@torch.inference_mode()
def beam_search(
    model: Transformer,
    src_ids: Tensor,
    *,
    beam_size: int,
    max_len: int,
    length_penalty: float = 0.6,
    early_stopping: bool = True,
    n_best: int | None = None,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
    record: bool = False,
    record_top_k: int = 5,
    ablate: Ablation | None = None,
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
    result is greedy decoding's.
    """
    _check_inputs(model, src_ids, max_len, record_top_k)
    _check_int("beam_size", beam_size, 1)
    if isinstance(length_penalty, bool) or not isinstance(length_penalty, Real) or not math.isfinite(length_penalty):
        raise ValueError(f"length_penalty must be a finite number, got {length_penalty!r}")
    if n_best is not None:
        _check_int("n_best", n_best, 1)
    pad_id = model.config.pad_id
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

    live: list[list[BeamState]] = [[BeamState((), 0.0, None)] for _ in range(batch)]
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    history: list[list[BeamStep]] = [[] for _ in range(batch)]
    done = [False] * batch

    for step in range(max_len):
        trace = Trace() if record else None
        logits = model.decode(last, memory, memory_mask, cache=cache, trace=trace, ablate=ablate)
        log_probs = next_token_log_probs(logits[:, -1], pad_id)  # (B*K, V)
        vocab = log_probs.size(-1)
        totals = (beam_log_probs.view(-1, 1) + log_probs).view(batch, beams * vocab)  # (B, K*V)
        n_candidates = min(2 * beams, beams * vocab)
        top_totals, top_flat = totals.topk(n_candidates, dim=1)  # (B, 2K)
        top_parents, top_tokens = top_flat // vocab, top_flat % vocab
        token_log_probs = log_probs.view(batch, beams, vocab)[
            torch.arange(batch, device=device)[:, None], top_parents, top_tokens
        ]  # (B, 2K)
        if record:
            probs = log_probs.exp()
            rec_probs, rec_ids = probs.topk(min(record_top_k, vocab), dim=-1)  # (B*K, k)
            attention = _cross_attention_last(trace, n_layers)  # (B*K, L, H, S)

        next_parent = torch.zeros(batch, beams, dtype=torch.long)
        next_token = torch.full((batch, beams), pad_id, dtype=torch.long)
        next_log_probs = torch.full((batch, beams), float("-inf"))
        rows = zip(top_totals.tolist(), top_parents.tolist(), top_tokens.tolist(), token_log_probs.tolist(),
                   strict=True)
        for b, (totals_b, parents_b, tokens_b, token_lp_b) in enumerate(rows):
            if done[b]:
                continue
            kept: list[BeamState] = []
            candidates: list[BeamCandidate] = []
            for rank, (total, parent, token, token_lp) in enumerate(zip(totals_b, parents_b, tokens_b, token_lp_b,
                                                                         strict=True)):
                if total == float("-inf"):
                    break  # only empty slots and PAD are left
                prefix = live[b][parent].tokens
                if len(kept) == beams:
                    outcome = "pruned"
                elif token == eos_id:
                    if rank < beams:
                        length = len(prefix) + 1
                        finished[b].append(Hypothesis(prefix, total, total / gnmt_length_penalty(length, alpha), True))
                        outcome = "finished"
                    else:
                        outcome = "pruned"
                else:
                    next_parent[b, len(kept)] = parent
                    next_token[b, len(kept)] = token
                    next_log_probs[b, len(kept)] = total
                    kept.append(BeamState((*prefix, token), total, parent))
                    outcome = "kept"
                candidates.append(BeamCandidate(parent, token, token_lp, total, outcome))
            n_live = len(live[b])
            rows_b = slice(b * beams, b * beams + n_live)
            history[b].append(BeamStep(
                beams=live[b],
                candidates=candidates,
                top_ids=rec_ids[rows_b] if record else None,
                top_probs=rec_probs[rows_b] if record else None,
                cross_attention=attention[rows_b] if record else None,
            ))
            live[b] = kept
            done[b] = not kept or _search_is_over(finished[b], kept, beams, early_stopping, alpha, step, max_len)

        if all(done):
            break
        # Every row continues from its parent: reorder the cached keys/values to match.
        index = (torch.arange(batch)[:, None] * beams + next_parent).view(-1).to(device)
        cache.reorder(index)
        last = next_token.view(-1, 1).to(device)
        beam_log_probs = next_log_probs.to(device)

    results = []
    for b in range(batch):
        hypotheses = list(finished[b])
        if not done[b]:  # max_len reached: the live beams end here, unfinished
            hypotheses += [Hypothesis(s.tokens, s.log_prob, s.log_prob / gnmt_length_penalty(len(s.tokens), alpha),
                                      False) for s in live[b]]
        hypotheses.sort(key=lambda h: h.score, reverse=True)
        results.append(BeamResult(hypotheses[:n_best] if n_best else hypotheses, history[b]))
    return results


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
