"""Sampling: draw each next token from the model's distribution, reshaped by temperature, top-k and top-p."""

from __future__ import annotations

import math
from numbers import Real

import torch
from torch import Tensor

from ..checks import check_int
from ..network.model import Ablation, Transformer
from .context import source_context
from .generate import Chooser, eos_list, generate
from .processors import GenerationRules
from .records import DecodeResult


def _check_sampling(temperature: float, top_k: int | None, top_p: float | None) -> None:
    if isinstance(temperature, bool) or not isinstance(temperature, Real) or not 0 < temperature < math.inf:
        raise ValueError(f"temperature must be a number > 0, got {temperature!r}")
    if top_k is not None:
        check_int("top_k", top_k, 1)
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, Real) or not 0 < top_p <= 1):
        raise ValueError(f"top_p must be a number with 0 < top_p <= 1, got {top_p!r}")


def sampling_distribution(
    log_probs: Tensor, *, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> Tensor:
    """The distribution sampling draws from, (..., V) log-probs -> (..., V) probabilities.

    p_i proportional to exp(log p_i / temperature), then only the ``top_k`` most likely
    tokens kept, then only the smallest set of most likely tokens whose probability reaches
    ``top_p`` (nucleus sampling), renormalised after each cut.
    """
    _check_sampling(temperature, top_k, top_p)
    logits = log_probs / temperature
    if top_k is not None and top_k < logits.size(-1):
        kth = logits.topk(top_k, dim=-1).values[..., -1:]  # (..., 1): the k-th largest
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if top_p is not None and top_p < 1:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        # keep a token if the tokens before it have not reached top_p yet (the first always stays)
        drop_sorted = sorted_probs.cumsum(dim=-1) - sorted_probs >= top_p
        drop = drop_sorted.scatter(-1, order, drop_sorted)
        probs = probs.masked_fill(drop, 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


@torch.inference_mode()
def sample(
    model: Transformer,
    src_ids: Tensor,
    *,
    max_len: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    bos_id: int | None = None,
    eos_id: int | None = None,
    stop_at_eos: bool = True,
    use_cache: bool = True,
    record: bool = False,
    record_top_k: int = 5,
    ablate: Ablation | None = None,
    time_budget: float | None = None,
    rules: GenerationRules | None = None,
) -> DecodeResult:
    """Draw each next token from the model's distribution, reshaped by temperature, top-k, top-p.

    Reproducible: the same ``seed`` and the same batch give the same tokens (a private
    ``torch.Generator``; the global RNG is never touched). ``seed=None`` draws a fresh
    seed. ``top_k=1`` is greedy decoding. Raises ValueError unless temperature > 0,
    top_k >= 1 and 0 < top_p <= 1. The recorded ``probs`` are those of the reshaped
    distribution; ``log_probs`` of the result are the model's own (temperature 1). ``time_budget``, ``rules``: as in
    ``greedy_decode``.
    """
    choose = sampler(temperature, top_k, top_p, seed, src_ids.device)
    context = source_context(model, src_ids, max_len, record_top_k, bos_id, ablate)
    return generate(context, choose, max_len=max_len, eos_ids=eos_list(eos_id, model.config.eos_id, stop_at_eos),
                    use_cache=use_cache, record=record, record_top_k=record_top_k, time_budget=time_budget,
                    rules=rules)


def sampler(temperature: float, top_k: int | None, top_p: float | None, seed: int | None,
            device: torch.device) -> Chooser:
    """The choice of a sampling decoding: a draw from ``sampling_distribution``, by a private ``torch.Generator``
    seeded with ``seed`` (None: a fresh seed); ValueError for a bad option. The global RNG is never touched."""
    _check_sampling(temperature, top_k, top_p)
    if seed is not None:
        check_int("seed", seed, 0)
    generator = torch.Generator(device=device)
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(seed)

    def choose(log_probs: Tensor) -> tuple[Tensor, Tensor]:
        probs = sampling_distribution(log_probs, temperature=temperature, top_k=top_k, top_p=top_p)
        return torch.multinomial(probs, 1, generator=generator).squeeze(1), probs

    return choose
