"""Occlusion: Zeiler & Fergus 2014, "Visualizing and Understanding Convolutional Networks",
applied to tokens as in Li, Monroe & Jurafsky 2016, "Understanding Neural Networks through
Representation Erasure".

Each source token j in turn is replaced by ``<unk>`` (the model's unk id) and the explained score
drops by  f_t(source) - f_t(source with token j = <unk>). Every non-padding token is
occluded, EOS included: it is a column like any other, and the models read it for the
source's length. A decoder-only model's prompt tokens likewise (pairs.py runs the prompt and the continuation as
one sequence; the copies change the prompt only). The occluded copies run ``COPIES_PER_FORWARD`` to a forward
(every copy of a short sentence in one), and ``progress`` (progress.py) is told before each forward, where a
deadline stops the work.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..network.model import Transformer
from .inputs import all_scores
from .pairs import row_logits
from .progress import Progress, tell

COPIES_PER_FORWARD = 64  # copies per forward: bounded memory, and a deadline checked between (500 for 500 tokens)


def occlusion(model: Transformer, src_ids: Tensor, tgt_ids: Tensor, contrast_ids: Tensor | None,
              progress: Progress | None = None) -> Tensor:
    """-> source (B, T-1, S): the drop in f_t when source token j is <unk>."""
    batch, s = src_ids.shape
    occluded = src_ids[:, None, :].repeat(1, s, 1)  # (B, S copies, S)
    diagonal = torch.arange(s, device=src_ids.device)
    pad, unk = model.config.pad_id, model.config.unk_id
    occluded[:, diagonal, diagonal] = torch.where(src_ids == pad, pad, unk)  # copy j loses token j
    with torch.no_grad():
        clean = all_scores(row_logits(model, src_ids, tgt_ids[:, :-1]), tgt_ids, contrast_ids, pad)  # (B, T-1)
        copies = occluded.view(batch * s, s)  # (B*S, S)
        tgt_rep = tgt_ids.repeat_interleave(s, dim=0)  # (B*S, T): sentence b's copies next to each other
        contrast_rep = None if contrast_ids is None else contrast_ids.repeat_interleave(s, dim=0)
        parts = []
        n = batch * s
        for start in range(0, n, COPIES_PER_FORWARD):
            end = min(start + COPIES_PER_FORWARD, n)
            tell(progress, start / n, f"occluded copies {start + 1}-{end} of {n}")
            contrast = None if contrast_rep is None else contrast_rep[start:end]
            logits = row_logits(model, copies[start:end], tgt_rep[start:end, :-1])  # (copies, T-1, V)
            parts.append(all_scores(logits, tgt_rep[start:end], contrast, pad))  # (copies, T-1)
        scores = torch.cat(parts)  # (B*S, T-1)
    drop = clean[:, None, :] - scores.view(batch, s, -1)  # (B, S, T-1)
    return drop.transpose(1, 2)  # (B, T-1, S)
