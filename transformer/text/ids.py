"""The reserved token ids of our own vocabularies, and how a sentence becomes what the encoder and decoder read.

The special ids are a property of a vocabulary: a tokenizer carries them (``pad_id``, ``unk_id``,
``bos_id``, ``eos_id``) and a model's config carries the same (``TransformerConfig.pad_id`` ...), so
decoding, the explanations and the app read them from there. Every tokenizer this package trains
reserves these (the constants are that convention, and the defaults of ``TransformerConfig``):

    PAD_ID = 0  "<pad>"  fills short sequences in a batch; masked out of attention
    UNK_ID = 1  "<unk>"  any character the tokenizer never saw in training
    BOS_ID = 2  "<s>"    starts every decoder input
    EOS_ID = 3  "</s>"   ends every target; generation stops there

A Marian (opus-mt) vocabulary has others: eos 0, unk 1, pad the last id, and the decoder starts
with the pad id (``transformer.hub``).

Sequences (the same in training, evaluation and the pipeline): the encoder reads
``tokens + [EOS]``; the decoder reads ``[BOS] + tokens`` and learns to predict ``tokens + [EOS]``.
A decoder-only model trained on a task reads one sequence, ``source tokens + [SEP] + target tokens + [EOS]``,
in one joint vocabulary (the one tokenizer trained on both sides), and the separator is the decoder's start id
(BOS): the sequence is the source's tokens followed by exactly what an encoder-decoder's decoder reads and
predicts (``target_ids``). The prompt is ``source tokens + [SEP]``; only the target tokens and EOS are learned.
This module imports only torch, so decoding can use it without loading a tokenizer library.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch
from torch import Tensor

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
PAD_PIECE, UNK_PIECE, BOS_PIECE, EOS_PIECE = "<pad>", "<unk>", "<s>", "</s>"
SPECIAL_PIECES: tuple[str, ...] = (PAD_PIECE, UNK_PIECE, BOS_PIECE, EOS_PIECE)  # indexed by id


class Encodes(Protocol):
    bos_id: int
    eos_id: int

    def encode(self, text: str) -> list[int]: ...


def source_ids(tokenizer: Encodes, text: str) -> list[int]:
    """What the encoder reads: the tokens, then the tokenizer's EOS."""
    return [*tokenizer.encode(text), tokenizer.eos_id]


def target_ids(tokenizer: Encodes, text: str) -> list[int]:
    """BOS (the decoder's start id), the tokens, EOS: the decoder reads all but the last, and predicts all
    but the first."""
    return [tokenizer.bos_id, *tokenizer.encode(text), tokenizer.eos_id]


def prompt_ids(tokenizer: Encodes, text: str) -> list[int]:
    """What a decoder-only task model is given: the source tokens, then the separator (the start id, BOS)."""
    return [*tokenizer.encode(text), tokenizer.bos_id]


def lm_sequence(tokenizer: Encodes, source: str, target: str) -> tuple[list[int], int]:
    """A decoder-only task model's training sequence, ``source + [SEP] + target + [EOS]``, and its prompt's length
    (source tokens + SEP): the positions from the prompt's last on predict the target and EOS, the others nothing."""
    prompt = prompt_ids(tokenizer, source)
    return [*prompt, *target_ids(tokenizer, target)[1:]], len(prompt)


def split_lm_sequence(ids: Sequence[int], sep_id: int, eos_id: int) -> tuple[list[int], list[int]]:
    """(source tokens, target tokens) of a sequence ``lm_sequence`` laid out: cut at the first separator, the
    target ending before the first EOS after it. ValueError when it holds no separator."""
    ids = [int(i) for i in ids]
    if sep_id not in ids:
        raise ValueError(f"the sequence holds no separator (id {sep_id})")
    cut = ids.index(sep_id)
    target = ids[cut + 1:]
    return ids[:cut], target[: target.index(eos_id)] if eos_id in target else target


def pad(rows: Sequence[Sequence[int]], device: torch.device | str = "cpu", pad_id: int = PAD_ID) -> Tensor:
    """Lists of ids -> (B, longest) int64, padded with ``pad_id`` on the right (pass the model's
    ``config.pad_id``; the default is our own vocabularies')."""
    longest = max(len(r) for r in rows)
    return torch.tensor([[*r, *[pad_id] * (longest - len(r))] for r in rows], dtype=torch.long, device=device)
