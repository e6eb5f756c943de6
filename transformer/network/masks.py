"""Attention masks as small pure functions.

One convention everywhere: a mask is a boolean tensor that broadcasts to the
scores' shape (B, H, T_q, T_k), and **True means "this query may attend to this
key"**. This is the convention of ``F.scaled_dot_product_attention``; it is the
opposite of ``nn.Transformer``'s ``*_key_padding_mask`` (True = ignore), which
``interop.py`` converts.

Masked scores become -inf before the softmax, so their weights are exactly 0.
"""

from __future__ import annotations

import torch
from torch import Tensor


def padding_mask(ids: Tensor, pad_id: int) -> Tensor:
    """Keys that are real tokens, not padding.

    ids: (B, T_k) int64 -> (B, 1, 1, T_k) bool, broadcast over heads and queries.
    """
    return (ids != pad_id)[:, None, None, :]


def causal_mask(t_q: int, t_k: int | None = None, device: torch.device | None = None,
                window: int | None = None) -> Tensor:
    """The look-ahead mask: query i may attend to keys 0..i and never to the future.

    With a key/value cache the queries are the last ``t_q`` of ``t_k`` positions,
    so query i sits at absolute position ``t_k - t_q + i``. With a ``window`` (a sliding-window layer:
    Beltagy et al. 2020, "Longformer"; Jiang et al. 2023, "Mistral 7B") query i sees only keys
    i - window + 1 .. i, itself and the window - 1 before it.
    Returns (1, 1, T_q, T_k) bool, lower-triangular when T_q == T_k.
    """
    t_k = t_q if t_k is None else t_k
    offset = t_k - t_q
    ones = torch.ones(t_q, t_k, dtype=torch.bool, device=device)
    mask = torch.tril(ones, diagonal=offset)
    if window is not None:
        mask = mask & torch.triu(ones, diagonal=offset - window + 1)
    return mask[None, None]


def memory_mask(src_ids: Tensor, pad_id: int) -> Tensor:
    """What cross-attention may see: every decoder query, every non-pad source key.

    src_ids: (B, S) -> (B, 1, 1, S) bool.
    """
    return padding_mask(src_ids, pad_id)


def decoder_real(tgt_ids: Tensor, pad_id: int) -> Tensor:
    """Which decoder inputs are real tokens: (B, T) bool.

    Position 0 always holds the decoder's start id and is real even when that id is the pad id, as in
    Marian models (decoder start = pad): comparing with the pad id alone would mask every row's first key.
    """
    real = tgt_ids != pad_id
    real[:, :1] = True
    return real


def decoder_self_mask(tgt_ids: Tensor, pad_id: int) -> Tensor:
    """Decoder masked self-attention: not the future and not padding (``decoder_real``).

    tgt_ids: (B, T) -> (B, 1, T, T) bool.
    """
    t = tgt_ids.size(1)
    return combine(decoder_real(tgt_ids, pad_id)[:, None, None, :], causal_mask(t, device=tgt_ids.device))


def combine(*masks: Tensor | None) -> Tensor | None:
    """A query may attend to a key only if every mask allows it (logical AND, broadcast)."""
    result = None
    for mask in masks:
        if mask is not None:
            result = mask if result is None else result & mask
    return result


def lm_mask(real: Tensor | None, t_q: int, t_k: int, window: int | None = None,
            device: torch.device | None = None) -> Tensor:
    """A decoder-only model's self-attention: causal (within ``window`` for a sliding layer), never a padding key.

    ``real`` (B, T_k) bool says which keys are tokens (left padding: False before each row's first token), None:
    all. A padding query would see no key at all; it sees itself instead, so no row of the softmax is empty (its
    output is never read). Returns (B|1, 1, T_q, T_k) bool, the queries the last ``t_q`` of ``t_k`` positions.
    """
    mask = causal_mask(t_q, t_k, device, window)
    if real is None:
        return mask
    offset = t_k - t_q
    itself = torch.arange(t_k, device=device) == torch.arange(offset, t_k, device=device)[:, None]  # (T_q, T_k)
    return (mask & real[:, None, None, :]) | (itself & ~real[:, None, offset:, None])
