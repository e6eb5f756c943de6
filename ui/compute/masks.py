"""The masks the model builds for one padded batch, as boolean arrays for the Masks page's charts.

Convention of ``transformer.network.masks``: True = may attend. The network builds them; this module only calls it
and hands the charts numpy arrays, so ``ui/charts/`` computes nothing with torch.

A decoder-only model's batch (``lm_batch``): prompts padded on the left with an attention mask, as ``transformers``
batches them, and the masks its forward built and used, read from the trace (sites ``decoder.mask`` and, with a
window, ``decoder.sliding_mask``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import streamlit as st
import torch
from torch import Tensor

from transformer.lm_pipeline import LMPipeline
from transformer.network import masks
from transformer.network.trace import Trace


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


@dataclass(frozen=True)
class LMBatch:
    """Prompts of a decoder-only model as one left-padded batch, and the masks its forward used.

    ``ids`` (B, L) with the pad id before each shorter prompt; ``attention_mask`` (B, L) bools, True at tokens;
    ``positions`` (B, L) each token's position as the model counts it (from the row's first token; 0 on padding);
    ``pieces`` per prompt, without padding; ``masks``: "full" and, for a model with a window, "sliding", each
    (B|1, 1, L, L) bools as the forward built them, and "causal" (1, 1, L, L) the causal part alone; ``trace``:
    that forward (its scores and weights)."""

    ids: np.ndarray
    attention_mask: np.ndarray
    positions: np.ndarray
    pieces: list[list[str]]
    masks: dict[str, np.ndarray]
    trace: Trace


@st.cache_resource(max_entries=16, show_spinner="Running the batch...")
def _lm_batch(model_key: str, device: str, prompts: tuple[str, ...], chat: bool, _pipeline: LMPipeline) -> LMBatch:
    pipe = _pipeline
    rows = [pipe.prompt_ids(text, chat=chat) for text in prompts]
    width = max(map(len, rows))
    ids = torch.tensor([[pipe.config.pad_id] * (width - len(r)) + r for r in rows], device=pipe.device)  # (B, L)
    real = torch.tensor([[False] * (width - len(r)) + [True] * len(r) for r in rows], device=pipe.device)
    trace = Trace()
    with torch.inference_mode():  # to the stack's output: the page reads the masks and attention, not logits
        pipe.model.decode_states(ids, None, None, trace=trace, attention_mask=real.long())
    found = {kind: trace[name].cpu().numpy().astype(bool) for kind, name in
             (("full", "decoder.mask"), ("sliding", "decoder.sliding_mask")) if name in trace}
    found["causal"] = masks.causal_mask(width).numpy().astype(bool)  # (1, 1, L, L): the causal part alone
    positions = (real.long().cumsum(-1) - 1).clamp(min=0)  # as the model counts them (network/model.py)
    return LMBatch(ids.cpu().numpy(), real.cpu().numpy(), positions.cpu().numpy(),
                   [pipe.tokenizer.display_pieces(r) for r in rows], found, trace)


def lm_batch(model_key: str, device: str, pipeline: LMPipeline, prompts: Sequence[str], chat: bool = False
             ) -> LMBatch:
    """Several prompts (``chat``: through the chat template) as one left-padded batch through a decoder-only model:
    its ids, attention mask, positions and masks (``LMBatch``). ValueError for an empty or too long prompt."""
    return _lm_batch(model_key, device, tuple(prompts), chat, pipeline)
