"""Which examples make each batch: tokenized splits, and batches of similar length under a token budget.

Section 5.1 of the paper: "Sentence pairs were batched together by approximate sequence length. Each
training batch contained a set of sentence pairs containing approximately 25000 source tokens and 25000
target tokens." ``token_batches`` does that with a token budget per batch.

Sequences: the encoder reads ``tokens + [EOS]``; the decoder reads ``[BOS] + tokens`` and
learns to predict ``tokens + [EOS]`` (``source_ids`` / ``target_ids``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from ..text.ids import source_ids, target_ids
from ..text.tokenizers import Tokenizer


@dataclass
class Examples:
    """One split, tokenized: ids for the model and the reference texts for scoring."""

    src: list[list[int]]
    tgt: list[list[int]]
    references: list[str]

    def sizes(self) -> list[int]:
        """Each example's padded positions in a batch (the decoder reads all but the last target id)."""
        return [example_size(len(s), len(t) - 1) for s, t in zip(self.src, self.tgt, strict=True)]

    def take(self, n: int | None) -> Examples:
        """The first ``n`` examples (all of them for None)."""
        return self if n is None else Examples(self.src[:n], self.tgt[:n], self.references[:n])


def encode_split(pairs: Sequence[tuple[str, str]], src_tok: Tokenizer, tgt_tok: Tokenizer) -> Examples:
    """(source, target) text pairs as the ids the encoder and decoder read, keeping the targets as references."""
    return Examples([source_ids(src_tok, s) for s, _ in pairs], [target_ids(tgt_tok, t) for _, t in pairs],
                    [t for _, t in pairs])


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
