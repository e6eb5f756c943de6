"""The records decoding returns: greedy/sampling steps and results, beam-search hypotheses and search trees."""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor


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
    cross_attention: Tensor  # (B, L, H, S): this step's query over the source (a decoder-only model: the prompt)
    active: Tensor  # (B,) bool: whether the row was still generating (had not produced EOS before)


@dataclass(frozen=True)
class DecodeResult:
    """The output of greedy decoding or sampling for a batch of B source sentences."""

    tokens: list[list[int]]  # per row: generated ids, without BOS and EOS
    finished: list[bool]  # per row: True if EOS was produced within max_len
    log_probs: list[float]  # per row: sum of the model's log-probs of the generated tokens, EOS included
    ids: Tensor  # (B, P + T): the decoder input as generated: BOS (or the prompt, P ids), tokens, EOS, then PAD
    steps: list[DecodeStep] = field(default_factory=list)  # one per output step when record=True
    timed_out: bool = False  # True if the time budget stopped decoding before every row finished or reached max_len


@dataclass(frozen=True)
class Hypothesis:
    """One complete output of beam search.

    ``score = log_prob / lp(length)`` with beam search's ``length_norm``: the GNMT length penalty
    ``lp(length) = ((5 + length) / 6) ** alpha`` (default), or ``transformers``' ``length ** alpha`` ("hf"),
    where ``length`` counts the generated tokens including EOS (``len(tokens) + 1`` when finished,
    ``len(tokens)`` when max_len cut it off).
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
    timed_out: bool = False  # True if the time budget ended the search (its live beams became unfinished hypotheses)

    @property
    def best(self) -> Hypothesis:
        return self.hypotheses[0]
