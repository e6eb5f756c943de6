"""Which examples make each batch: tokenized splits, and batches of similar length under a token budget.

Section 5.1 of the paper: "Sentence pairs were batched together by approximate sequence length. Each
training batch contained a set of sentence pairs containing approximately 25000 source tokens and 25000
target tokens." ``token_batches`` does that with a token budget per batch.

Sequences: the encoder reads ``tokens + [EOS]``; the decoder reads ``[BOS] + tokens`` and
learns to predict ``tokens + [EOS]`` (``source_ids`` / ``target_ids``). A decoder-only model reads the two as one
sequence, ``source tokens + [SEP] + target tokens + [EOS]`` (``text.ids.lm_sequence``; SEP is BOS), and learns to
predict only the target tokens and EOS (``batch_tensors``: the other labels are padding, which the loss skips).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ..text.ids import pad, prompt_ids, source_ids, target_ids
from ..text.tokenizers import Tokenizer


@dataclass
class Examples:
    """One split, tokenized: ids for the model and the reference texts for scoring.

    ``src`` is what the model is given: the encoder's ``tokens + [EOS]``, or (``decoder_only``) the prompt,
    ``tokens + [SEP]``; ``tgt`` is ``[BOS] + tokens + [EOS]`` either way (a decoder-only sequence is the prompt
    then ``tgt[1:]``: its BOS is the prompt's SEP)."""

    src: list[list[int]]
    tgt: list[list[int]]
    references: list[str]
    decoder_only: bool = False

    def sizes(self) -> list[int]:
        """Each example's padded positions in a batch (the decoder reads all but the last target id; a decoder-only
        model all but the last id of the prompt and the target together)."""
        if self.decoder_only:
            return [len(s) + len(t) - 2 for s, t in zip(self.src, self.tgt, strict=True)]
        return [example_size(len(s), len(t) - 1) for s, t in zip(self.src, self.tgt, strict=True)]

    def take(self, n: int | None) -> Examples:
        """The first ``n`` examples (all of them for None)."""
        return self if n is None else Examples(self.src[:n], self.tgt[:n], self.references[:n], self.decoder_only)


def encode_split(pairs: Sequence[tuple[str, str]], src_tok: Tokenizer, tgt_tok: Tokenizer, *,
                 decoder_only: bool = False) -> Examples:
    """(source, target) text pairs as the ids the model reads, keeping the targets as references. A decoder-only
    model's source is its prompt (``text.ids.prompt_ids``), in the one joint vocabulary (``src_tok is tgt_tok``)."""
    if decoder_only and src_tok is not tgt_tok:
        raise ValueError("a decoder-only model reads source and target in one joint vocabulary: one tokenizer")
    source = prompt_ids if decoder_only else source_ids
    return Examples([source(src_tok, s) for s, _ in pairs], [target_ids(tgt_tok, t) for _, t in pairs],
                    [t for _, t in pairs], decoder_only)


def batch_tensors(examples: Examples, batch: Sequence[int], device: torch.device | str, pad_id: int
                  ) -> tuple[Tensor | None, Tensor, Tensor]:
    """(encoder input (B, S) or None, decoder input (B, T), labels (B, T)) of some examples: teacher forcing,
    position t of the decoder input predicts label t, and a padding label gives no loss.

    Encoder-decoder: ``tgt[:-1]`` predicts ``tgt[1:]``. Decoder-only: the sequence ``prompt + tgt[1:]`` less its
    last id predicts the sequence less its first, with the labels of the prompt's positions but the last (which
    predicts the first target token) set to padding: the source is read, never learned."""
    if not examples.decoder_only:
        src = pad([examples.src[i] for i in batch], device, pad_id)
        tgt = pad([examples.tgt[i] for i in batch], device, pad_id)
        return src, tgt[:, :-1], tgt[:, 1:]
    rows = [examples.src[i] + examples.tgt[i][1:] for i in batch]
    labels = [[pad_id] * (len(examples.src[i]) - 1) + examples.tgt[i][1:] for i in batch]
    return None, pad([r[:-1] for r in rows], device, pad_id), pad(labels, device, pad_id)


def example_size(src_len: int, tgt_len: int) -> int:
    """Padded positions one example claims in a batch: its longer side (encoder or decoder)."""
    return max(src_len, tgt_len)


def token_batches(
    sizes: Sequence[int], max_tokens: int, *, seed: int = 0, epoch: int = 0, shuffle: bool = True,
    max_sentences: int | None = None,
) -> list[list[int]]:
    """Group example indices into batches of similar size under a token budget.

    sizes[i] is example i's length in tokens (see ``example_size``). A batch of n examples
    padded to its longest costs n * max(size) positions, which stays <= ``max_tokens``.
    Examples are sorted by size (ties broken at random) and cut into batches greedily, so
    little padding is wasted; then the batch order is shuffled. The result depends only on
    (sizes, max_tokens, seed, epoch): every epoch gets new batches, and a resumed run can
    rebuild the same ones. Each index appears exactly once. An example longer than the
    whole budget gets a batch of its own (the only batch allowed over budget).

    ``max_sentences`` also caps the examples per batch (fairseq's ``--max-sentences`` next to its
    ``--max-tokens``). Without it the shortest examples crowd into a few huge batches: on numbers,
    the one-digit words shared 6 of 120 batches per epoch, so a two-minute run updated on them
    about seven times and got ``zero`` wrong; the default cap of 64 (``TrainConfig.batch_sentences``)
    gives them 59 of 313.
    """
    if max_sentences is not None and max_sentences <= 0:
        raise ValueError(f"max_sentences must be positive, got {max_sentences}")
    if max_tokens <= 0:
        raise ValueError(f"max_tokens must be positive, got {max_tokens}")
    rng = random.Random(seed * 1_000_003 + epoch)
    jitter = [rng.random() if shuffle else 0.0 for _ in sizes]
    order = sorted(range(len(sizes)), key=lambda i: (sizes[i], jitter[i]))

    batches: list[list[int]] = []
    batch: list[int] = []
    for i in order:  # ascending size: the newest example is always the batch's longest
        full = (len(batch) + 1) * sizes[i] > max_tokens or (max_sentences is not None and len(batch) >= max_sentences)
        if batch and full:
            batches.append(batch)
            batch = []
        batch.append(i)
    if batch:
        batches.append(batch)
    if shuffle:
        rng.shuffle(batches)
    return batches
