"""The four reserved token ids, and how a sentence becomes what the encoder and decoder read.

Every tokenizer here reserves the same ids, so the model, the masks, decoding and the app use
these constants and never ask which tokenizer they were given:

    PAD_ID = 0  "<pad>"  fills short sequences in a batch; masked out of attention
    UNK_ID = 1  "<unk>"  any character the tokenizer never saw in training
    BOS_ID = 2  "<s>"    starts every decoder input
    EOS_ID = 3  "</s>"   ends every target; generation stops there

Sequences (the same in training, evaluation and the pipeline): the encoder reads
``tokens + [EOS]``; the decoder reads ``[BOS] + tokens`` and learns to predict ``tokens + [EOS]``.
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
    def encode(self, text: str) -> list[int]: ...


def source_ids(tokenizer: Encodes, text: str) -> list[int]:
    """What the encoder reads: the tokens, then EOS."""
    return [*tokenizer.encode(text), EOS_ID]


def target_ids(tokenizer: Encodes, text: str) -> list[int]:
    """BOS, the tokens, EOS: the decoder reads all but the last, and predicts all but the first."""
    return [BOS_ID, *tokenizer.encode(text), EOS_ID]


def pad(rows: Sequence[Sequence[int]], device: torch.device | str = "cpu") -> Tensor:
    """Lists of ids -> (B, longest) int64, padded with PAD_ID on the right."""
    longest = max(len(r) for r in rows)
    return torch.tensor([[*r, *[PAD_ID] * (longest - len(r))] for r in rows], dtype=torch.long, device=device)
