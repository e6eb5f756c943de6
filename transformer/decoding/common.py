"""What every decoding strategy shares: the next-token distribution, input checks, the choice of strategy."""

from __future__ import annotations

import math
import time
from numbers import Real
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from ..checks import check_int
from ..network.model import Transformer
from ..network.trace import Trace
from .processors import GenerationRules

Strategy = Literal["greedy", "beam", "sampling"]


def next_token_log_probs(logits: Tensor, pad_id: int | None) -> Tensor:
    """log softmax of ``logits`` (..., V) with PAD excluded (its log-prob is -inf); ``pad_id`` None keeps every
    token, as ``transformers``' ``generate`` does (a Hugging Face folder forbids PAD through its ``bad_words_ids``
    where it wants to, as Marian's does)."""
    logits = logits.float().clone()
    if pad_id is not None:
        logits[..., pad_id] = float("-inf")
    return F.log_softmax(logits, dim=-1)


def excluded_pad(pad_id: int, rules: GenerationRules | None) -> int | None:
    """The id a decoding leaves out of its distribution: PAD for our own checkpoints (they never learn to emit it),
    none for a model whose ``rules`` keep PAD a candidate (``GenerationRules.pad_allowed``: a Hugging Face
    folder, decoded exactly as ``generate`` decodes it)."""
    return None if rules is not None and rules.pad_allowed else pad_id


def pick_strategy(*, beam_size: int | None, temperature: float | None, top_k: int | None, top_p: float | None,
                  seed: int | None) -> Strategy:
    """The strategy a caller's options ask for: ``beam_size`` -> beam search; any of
    ``temperature``/``top_k``/``top_p`` -> sampling; none -> greedy.

    Raises ValueError for beam search and sampling together, and for a ``seed`` without sampling.
    """
    sampling = temperature is not None or top_k is not None or top_p is not None
    if beam_size is not None and sampling:
        raise ValueError("choose beam search (beam_size) or sampling (temperature/top_k/top_p), not both")
    if seed is not None and not sampling:
        raise ValueError("seed only applies to sampling: also give temperature, top_k or top_p")
    if beam_size is not None:
        return "beam"
    return "sampling" if sampling else "greedy"


def cross_attention_last(trace: Trace, n_layers: int) -> Tensor:
    """The newest query's cross-attention in every layer: (B, L, H, S)."""
    return torch.stack([trace.attention("cross", layer)[:, :, -1, :] for layer in range(n_layers)], dim=1)


def check_inputs(model: Transformer, src_ids: Tensor, max_len: int, record_top_k: int) -> None:
    """ValueError unless the model is in eval mode, ``src_ids`` is a non-empty (B, S) integer
    tensor, 1 <= ``max_len`` <= the model's positional table and ``record_top_k`` >= 1."""
    if model.training:
        raise ValueError("decoding needs the model in eval mode (dropout off): call model.eval() first")
    if not isinstance(src_ids, Tensor) or src_ids.dim() != 2 or src_ids.dtype not in (torch.int64, torch.int32):
        raise ValueError("src_ids must be an integer tensor of shape (batch, source length)")
    if src_ids.size(0) == 0 or src_ids.size(1) == 0:
        raise ValueError(f"src_ids must hold at least one token per row, got shape {tuple(src_ids.shape)}")
    check_int("max_len", max_len, 1)
    if max_len > model.config.max_len:
        raise ValueError(
            f"max_len ({max_len}) exceeds the model's positional table (max_len={model.config.max_len})"
        )
    check_int("record_top_k", record_top_k, 1)


def deadline_of(time_budget: float | None) -> float | None:
    """The ``time.monotonic()`` instant a decoding given ``time_budget`` seconds must stop at (None: no budget);
    ValueError unless the budget is a number > 0. The loops check it before each step after the first, so a
    decoding overruns its budget by at most one step, and stops with ``timed_out`` set in its result."""
    if time_budget is None:
        return None
    if isinstance(time_budget, bool) or not isinstance(time_budget, Real) or not 0 < time_budget < math.inf:
        raise ValueError(f"time_budget must be a number of seconds > 0, got {time_budget!r}")
    return time.monotonic() + float(time_budget)


def out_of_time(deadline: float | None) -> bool:
    """Whether ``deadline`` (from ``deadline_of``) has passed."""
    return deadline is not None and time.monotonic() > deadline
