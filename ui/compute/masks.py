"""The masks the model builds for one padded batch, as boolean arrays for the Masks page's charts.

Convention of ``transformer.network.masks``: True = may attend. The network builds them; this module only calls it
and hands the charts numpy arrays, so ``ui/charts/`` computes nothing with torch.
"""

from __future__ import annotations

import numpy as np
from torch import Tensor

from transformer.network import masks


def batch_masks(src_ids: Tensor, tgt_ids: Tensor, pad_id: int) -> dict[str, np.ndarray]:
    """Every mask the model builds for one batch, by name, in ``transformer.network.masks``' shapes."""
    t = tgt_ids.size(1)
    built = {
        "source padding": masks.padding_mask(src_ids, pad_id),  # (B, 1, 1, S)
        # decoder_real: the first position is the decoder's start, real even when it is the pad id (Marian)
        "target padding": masks.decoder_real(tgt_ids, pad_id)[:, None, None, :],  # (B, 1, 1, T)
        "causal": masks.causal_mask(t, device=tgt_ids.device),  # (1, 1, T, T)
        "decoder (causal & padding)": masks.decoder_self_mask(tgt_ids, pad_id),  # (B, 1, T, T)
        "memory": masks.memory_mask(src_ids, pad_id),  # (B, 1, 1, S)
    }
    return {name: mask.to("cpu").numpy().astype(bool) for name, mask in built.items()}


def real_positions(ids: Tensor, pad_id: int, decoder: bool = False) -> np.ndarray:
    """(B, L) bools: which positions of each sentence are real tokens. ``decoder``: ``ids`` are decoder inputs,
    whose first position is real even when it holds the pad id (Marian's start)."""
    real = masks.decoder_real(ids, pad_id) if decoder else ids != pad_id
    return real.to("cpu").numpy()


def has_padding(ids: Tensor, pad_id: int) -> bool:
    """Whether any sentence of a padded batch (B, L) is padded."""
    return bool((ids == pad_id).any())


def first_kind(src_ids: Tensor, pad_id: int) -> str:
    """The attention the page's "what a mask does" opens on: the encoder's, where the batch's sources have padding
    to mask; else the decoder's, whose causal mask always masks (dates-de: every input has 10 characters, so the
    source padding mask is empty and the encoder's view read "masked cells 0")."""
    return "encoder" if has_padding(src_ids, pad_id) else "decoder"
