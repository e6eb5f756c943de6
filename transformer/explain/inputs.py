"""What every attribution method shares: checking the inputs, and the score it explains.

Teacher forcing: ``tgt_ids`` (B, T) is ``<s> y_1 ... y_n </s>`` padded with the model's pad id. The
decoder reads ``tgt_ids[:, :-1]`` and row t of the output explains

    f_t = log P(tgt_ids[:, t+1] | tgt_ids[:, :t+1], source)                 (plain)
    f_t = log P(y_{t+1} | ...) - log P(y'_{t+1} | ...)                       (contrastive)

the contrastive form as in Yin & Neubig 2022, "Interpreting Language Models with
Contrastive Explanations" (and inseq's contrastive attribution). Rows whose target is
padding explain nothing and stay 0.

A decoder-only model takes the prompt as ``src_ids`` (left-padded) and a placeholder then the continuation as
``tgt_ids`` (pairs.py): the same rows, the same scores.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from ..network.masks import decoder_real
from ..network.model import Transformer


@dataclass(frozen=True)
class Rows:
    """The (batch, row) pairs that have a real target, one per copy when methods batch rows.

    batch, row, target, contrast: (N,) each; contrast is None for plain attribution.
    """

    batch: Tensor
    row: Tensor
    target: Tensor
    contrast: Tensor | None


def check_inputs(model: Transformer, src_ids: Tensor, tgt_ids: Tensor, contrast_ids: Tensor | None) -> None:
    """Raise ValueError naming the problem with shapes, ids or the model's mode."""
    c = model.config
    for name, ids in (("src_ids", src_ids), ("tgt_ids", tgt_ids)):
        if not isinstance(ids, Tensor) or ids.dim() != 2:
            raise ValueError(f"{name} must be a 2-D tensor (batch, length), got "
                             f"{tuple(ids.shape) if isinstance(ids, Tensor) else type(ids).__name__}")
        if ids.dtype.is_floating_point or ids.dtype == torch.bool:
            raise ValueError(f"{name} must hold integer token ids, got dtype {ids.dtype}")
    if src_ids.size(0) != tgt_ids.size(0):
        raise ValueError(f"src_ids has batch {src_ids.size(0)} but tgt_ids has batch {tgt_ids.size(0)}")
    if src_ids.size(1) == 0:
        raise ValueError("src_ids is empty: the source needs at least one token")
    if tgt_ids.size(1) < 2:
        raise ValueError(f"empty output: tgt_ids needs <s> and at least one token to explain (T >= 2), "
                         f"got T = {tgt_ids.size(1)}")
    _check_range("src_ids", src_ids, c.src_vocab_size)
    _check_range("tgt_ids", tgt_ids, c.tgt_vocab_size)
    if (src_ids == c.pad_id).all(dim=1).any():
        raise ValueError("a source row is all padding: nothing to attribute to")
    if contrast_ids is not None:
        expected = (tgt_ids.size(0), tgt_ids.size(1) - 1)
        if not isinstance(contrast_ids, Tensor) or tuple(contrast_ids.shape) != expected:
            got = tuple(contrast_ids.shape) if isinstance(contrast_ids, Tensor) else type(contrast_ids).__name__
            raise ValueError(f"contrast_ids must have shape (B, T-1) = {expected}, got {got}")
        _check_range("contrast_ids", contrast_ids, c.tgt_vocab_size)
    if c.decoder_only:
        _check_prompt(src_ids, c.pad_id)
    if model.training:
        raise ValueError("the model is in training mode (dropout is random): call .eval() on it first")


def _check_prompt(src_ids: Tensor, pad_id: int) -> None:
    """A decoder-only model's prompts end at the same position (pairs.py): padding only before a row's first
    token, never after it."""
    real = src_ids != pad_id
    late = real.long().cummax(dim=1).values.bool() & ~real  # (B, P): padding after the row's first token
    if late.any():
        rows = sorted(set(late.nonzero()[:, 0].tolist()))
        raise ValueError(f"a decoder-only model's prompts are padded on the left (as a tokenizer pads prompts for "
                         f"generation), so that each ends where the continuation starts; prompt row(s) {rows} "
                         f"hold the pad id {pad_id} after their first token")


def _check_range(name: str, ids: Tensor, vocab_size: int) -> None:
    bad = ids[(ids < 0) | (ids >= vocab_size)]
    if bad.numel():
        raise ValueError(f"{name} holds ids outside the vocabulary 0..{vocab_size - 1}: {sorted(set(bad.tolist()))}")


def real_rows(tgt_ids: Tensor, contrast_ids: Tensor | None, pad_id: int) -> Rows:
    """The rows with a real (non-padding) target, flattened over the batch."""
    targets = tgt_ids[:, 1:]  # (B, T-1): what each decoder position predicts
    batch, row = (targets != pad_id).nonzero(as_tuple=True)
    contrast = contrast_ids[batch, row] if contrast_ids is not None else None
    return Rows(batch, row, targets[batch, row], contrast)


def by_sentence(rows: Rows) -> Iterator[tuple[int, Tensor]]:
    """Each sentence with a real row, and the indices into ``rows`` of its real rows, (R,): the methods that take
    one forward per sentence (row_gradients.py) loop over this."""
    for b in rows.batch.unique().tolist():
        yield b, (rows.batch == b).nonzero(as_tuple=True)[0]


def row_scores(logits: Tensor, rows: Tensor, target: Tensor, contrast: Tensor | None) -> Tensor:
    """logits (N, T-1, V) of N copies, copy n explaining its row ``rows[n]`` -> f (N,)."""
    log_probs = torch.log_softmax(logits[torch.arange(logits.size(0), device=logits.device), rows], dim=-1)  # (N, V)
    score = log_probs.gather(-1, target[:, None])[:, 0]
    if contrast is not None:
        score = score - log_probs.gather(-1, contrast[:, None])[:, 0]
    return score


def all_scores(logits: Tensor, tgt_ids: Tensor, contrast_ids: Tensor | None, pad_id: int) -> Tensor:
    """logits (B, T-1, V) -> f (B, T-1) for every row at once (0 where the target is padding)."""
    targets = tgt_ids[:, 1:]
    log_probs = torch.log_softmax(logits, dim=-1)
    score = log_probs.gather(-1, targets[..., None])[..., 0]  # (B, T-1)
    if contrast_ids is not None:
        score = score - log_probs.gather(-1, contrast_ids[..., None])[..., 0]
    return score.masked_fill(targets == pad_id, 0.0)


def mask_padding(source: Tensor, src_ids: Tensor, tgt_ids: Tensor, pad_id: int) -> Tensor:
    """source (B, T-1, S) with padding columns and rows whose target is padding set to 0."""
    keep = (tgt_ids[:, 1:] != pad_id)[:, :, None] & (src_ids != pad_id)[:, None, :]  # (B, T-1, S)
    return source.masked_fill(~keep, 0.0)


def mask_target(target: Tensor, tgt_ids: Tensor, pad_id: int, decoder_only: bool = False) -> Tensor:
    """target (B, T-1, T-1) over the decoder input: padding rows/columns and the future set to 0
    (the decoder's start id at column 0 is real even where it is the pad id, as in Marian models; a decoder-only
    model's placeholder at column 0 is never fed: 0, pairs.py)."""
    length = tgt_ids.size(1) - 1
    causal = torch.ones(length, length, dtype=torch.bool, device=tgt_ids.device).tril()  # (T-1, T-1)
    real = decoder_real(tgt_ids[:, :-1], pad_id)
    if decoder_only:
        real[:, 0] = False
    keep = (tgt_ids[:, 1:] != pad_id)[:, :, None] & real[:, None, :] & causal
    return target.masked_fill(~keep, 0.0)


def scatter_rows(values: Tensor, rows: Rows, batch_size: int, n_rows: int) -> Tensor:
    """values (N, ...) of the real rows -> (B, T-1, ...) with zeros for padding rows."""
    out = values.new_zeros(batch_size, n_rows, *values.shape[1:])
    out[rows.batch, rows.row] = values
    return out
