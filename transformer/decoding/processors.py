"""Logits processors: the per-family rules of ``transformers``' ``generate`` that force or forbid a next token
(forced first and last tokens, bad words, no repeated n-gram, a minimum length).

Each takes the decoder's ids so far, ``prefix`` (N, 1 + t) with the decoder start at position 0, and the
next-token scores (N, V), and returns new scores: a forbidden token gets -inf, a forced step gets -inf everywhere
but 0 on the forced token. The three decoders apply them after the log-softmax, where ``transformers`` applies
them in beam search (in greedy decoding and sampling it applies them to the raw logits, which the log-softmax only
shifts by a constant per row: the argmax and the renormalised sampling distribution are the same). Each mirrors
the ``transformers`` class named in its docstring, argument for argument; ``tests/test_decoding_processors.py``
checks them against it on random scores.

``GenerationRules`` gathers what a model's ``generation_config.json`` (and, for a multilingual model, the chosen
target language) asks for, and gives the processors for one decoding of ``max_len`` generated tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

NEG_INF = float("-inf")


def _force(scores: Tensor, token_id: int) -> Tensor:
    """-inf everywhere but 0 on ``token_id``, for every row of ``scores`` (N, V)."""
    forced = torch.full_like(scores, NEG_INF)
    forced[:, token_id] = 0.0
    return forced


class ForcedBOS:
    """The first generated token (after the decoder start) is ``bos_id``: BART's ``<s>``, the target language code
    of mBART-50 and NLLB. ``transformers.ForcedBOSTokenLogitsProcessor``."""

    def __init__(self, bos_id: int) -> None:
        self.bos_id = int(bos_id)

    def __call__(self, prefix: Tensor, scores: Tensor) -> Tensor:
        return _force(scores, self.bos_id) if prefix.size(1) == 1 else scores


class ForcedEOS:
    """The last token a decoding may produce is ``eos_id``: forced when the ids so far (decoder start included)
    number ``max_length - 1``. ``transformers.ForcedEOSTokenLogitsProcessor`` (``max_length`` counts the decoder
    start, as there: a decoding of N generated tokens has ``max_length = N + 1``)."""

    def __init__(self, max_length: int, eos_id: int) -> None:
        self.max_length, self.eos_id = int(max_length), int(eos_id)

    def __call__(self, prefix: Tensor, scores: Tensor) -> Tensor:
        return _force(scores, self.eos_id) if prefix.size(1) == self.max_length - 1 else scores


class NoBadWords:
    """Never complete a forbidden sequence: a sequence of one token is never generated; a longer one's last token
    is forbidden wherever the ids so far end with the rest of it. A sequence that is just the eos id is dropped
    (``transformers`` would otherwise never let a decoding end). ``transformers.NoBadWordsLogitsProcessor``.

    The longer sequences are matched all at once, whatever their number: their heads (all but the last id) sit
    right-aligned in one (K, L) table, and each step compares the last L ids of every row with all K heads in one
    operation, (N, K, L), instead of a loop over the sequences (160 k of them made every step take seconds). The
    caller bounds K and L (``hub.generation``'s caps on ``bad_words_ids``)."""

    def __init__(self, bad_words_ids: Sequence[Sequence[int]], eos_id: int | Sequence[int] | None = None) -> None:
        words = [tuple(int(i) for i in word) for word in bad_words_ids]
        if not words or any(not word or min(word) < 0 for word in words):
            raise ValueError(f"bad_words_ids must be a non-empty list of non-empty lists of ids >= 0, got "
                             f"{bad_words_ids!r:.200}")
        words = [word for word in words if word not in {(e,) for e in _ids(eos_id)}]
        self.single = sorted({word[0] for word in words if len(word) == 1})
        longer = sorted({word for word in words if len(word) > 1})
        width = max((len(word) - 1 for word in longer), default=0)
        self.heads = torch.full((len(longer), width), -1, dtype=torch.long)  # (K, L); -1: nothing to match there
        for k, word in enumerate(longer):
            self.heads[k, width - len(word) + 1:] = torch.tensor(word[:-1])
        # the forbidden last ids, each once (K -> U), so that a scatter over them never writes one id twice
        self.last, self.which = torch.tensor([word[-1] for word in longer], dtype=torch.long).unique(
            return_inverse=True)

    def __call__(self, prefix: Tensor, scores: Tensor) -> Tensor:
        if not self.single and not len(self.heads):
            return scores
        banned = torch.zeros_like(scores, dtype=torch.bool)  # (N, V)
        if self.single:
            banned[:, self.single] = True
        if len(self.heads):
            heads, width = self.heads.to(prefix.device), self.heads.size(1)
            # the last `width` ids of every row, -2 (matching no id, unlike the heads' -1) before the first
            tail = prefix[:, -width:] if prefix.size(1) >= width else torch.cat(
                [prefix.new_full((prefix.size(0), width - prefix.size(1)), -2), prefix], dim=1)  # (N, L)
            matches = ((tail[:, None, :] == heads[None]) | (heads[None] == -1)).all(dim=-1)  # (N, K)
            hits = torch.zeros(prefix.size(0), len(self.last), device=prefix.device)  # (N, U)
            hits.index_add_(1, self.which.to(prefix.device), matches.to(hits.dtype))
            banned[:, self.last.to(prefix.device)] |= hits > 0
        return scores.masked_fill(banned, NEG_INF)


class NoRepeatNGram:
    """Never repeat an n-gram: a token is forbidden where it would complete an ``ngram_size``-gram the ids so far
    (the decoder start included) already hold. Fairseq's ``--no-repeat-ngram-size`` (Paulus et al. 2018, "A Deep
    Reinforced Model for Abstractive Summarization", blocking repeated trigrams);
    ``transformers.NoRepeatNGramLogitsProcessor``, which bart-base's generation_config.json asks for (size 3)."""

    def __init__(self, ngram_size: int) -> None:
        if isinstance(ngram_size, bool) or not isinstance(ngram_size, int) or ngram_size < 1:
            raise ValueError(f"no_repeat_ngram_size must be an int >= 1, got {ngram_size!r}")
        self.n = ngram_size

    def __call__(self, prefix: Tensor, scores: Tensor) -> Tensor:
        length, n = prefix.size(1), self.n
        if length + 1 < n:
            return scores
        banned = torch.zeros_like(scores, dtype=torch.bool)  # (N, V)
        for row, ids in enumerate(prefix.tolist()):
            tail = ids[length - n + 1:] if n > 1 else []  # the n - 1 ids a next token would complete an n-gram of
            for start in range(length - n + 1):
                if ids[start:start + n - 1] == tail:
                    banned[row, ids[start + n - 1]] = True
        return scores.masked_fill(banned, NEG_INF)


class MinLength:
    """No end before ``min_length`` ids: ``eos_id`` (or each of several) is forbidden while the ids so far (the
    decoder start included, as ``transformers`` counts them; a decoder-only model's prompt included) number fewer.
    ``transformers.MinLengthLogitsProcessor``; with ``min_length`` = prompt length + n,
    ``MinNewTokensLengthLogitsProcessor(prompt length, n, eos)``, which forbids the same ids at the same steps."""

    def __init__(self, min_length: int, eos_id: int | Sequence[int]) -> None:
        self.min_length, self.eos_ids = int(min_length), list(_ids(eos_id))

    def __call__(self, prefix: Tensor, scores: Tensor) -> Tensor:
        if prefix.size(1) >= self.min_length:
            return scores
        scores = scores.clone()
        scores[:, self.eos_ids] = NEG_INF
        return scores


Processor = ForcedBOS | ForcedEOS | NoBadWords | NoRepeatNGram | MinLength


@dataclass(frozen=True)
class GenerationRules:
    """What a model asks of every decoding: the token forced first, the one forced at the length bound, the
    sequences never generated, no repeated n-gram, no end before a length. ``None`` / empty / 0: no such rule
    (our own checkpoints and Marian have none)."""

    forced_bos_id: int | None = None
    forced_eos_id: int | None = None
    bad_words_ids: tuple[tuple[int, ...], ...] = ()
    eos_id: int | tuple[int, ...] | None = None  # the id(s) that end; a bad word that is just one is dropped
    no_repeat_ngram_size: int = 0
    min_length: int = 0  # counts the decoder start, as transformers' min_length does
    # PAD a candidate next token: True for a Hugging Face folder, whose generate() keeps it in the distribution
    # (T5's PAD, its decoder start, keeps real probability); our own checkpoints leave it out (decoding.common)
    pad_allowed: bool = False

    def processors(self, max_len: int, start_len: int = 1) -> list[Processor]:
        """The processors of one decoding of at most ``max_len`` generated tokens after ``start_len`` start ids (the
        decoder start; a decoder-only model's prompt), in ``transformers``' order
        (``GenerationMixin._get_logits_processor``: n-grams, bad words, min length, forced BOS, forced EOS)."""
        found: list[Processor] = []
        if self.no_repeat_ngram_size > 0:
            found.append(NoRepeatNGram(self.no_repeat_ngram_size))
        if self.bad_words_ids:
            found.append(NoBadWords(self.bad_words_ids, self.eos_id))
        if self.min_length > 0 and self.eos_id is not None:
            found.append(MinLength(self.min_length, self.eos_id))
        if self.forced_bos_id is not None:
            found.append(ForcedBOS(self.forced_bos_id))
        if self.forced_eos_id is not None:
            found.append(ForcedEOS(max_len + start_len, self.forced_eos_id))
        return found


def _ids(eos_id: int | Sequence[int] | None) -> tuple[int, ...]:
    """One id, several, or none, as a tuple of ints."""
    if eos_id is None:
        return ()
    return (int(eos_id),) if isinstance(eos_id, int) else tuple(int(i) for i in eos_id)


def apply_processors(processors: Sequence[Processor], prefix: Tensor, scores: Tensor) -> Tensor:
    """``scores`` (N, V) after each processor in turn, given the ids so far ``prefix`` (N, 1 + t)."""
    for processor in processors:
        scores = processor(prefix, scores)
    return scores
