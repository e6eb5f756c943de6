"""Greedy decoding: the most likely next token at every step."""

from __future__ import annotations

import torch
from torch import Tensor

from ..network.model import Ablation, Transformer
from .context import source_context
from .generate import eos_list, generate
from .processors import GenerationRules
from .records import DecodeResult


def most_likely(log_probs: Tensor) -> tuple[Tensor, Tensor]:
    """The greedy choice from (B, V) log-probs: the argmax (B,) and the model's own probabilities (B, V)."""
    return log_probs.argmax(dim=-1), log_probs.exp()


@torch.inference_mode()
def greedy_decode(
    model: Transformer,
    src_ids: Tensor,
    *,
    max_len: int,
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
    """Pick the most likely next token at every step.

    src_ids: (B, S) padded with PAD. ``max_len`` bounds the generated tokens (EOS included)
    and may not exceed ``model.config.max_len``. ``use_cache=False`` recomputes the whole
    prefix every step (same tokens, slower: kept for teaching and for the parity test).
    ``bos_id`` / ``eos_id`` default to the model's (``config.bos_id`` / ``eos_id``); ``stop_at_eos=False`` never
    stops early (benchmarks force a length that way). ``record=True``
    fills ``steps`` with one ``DecodeStep`` per output step; ``ablate`` switches off heads
    (see ``Transformer.forward``); ``time_budget`` (seconds) stops it after the step that overran, with
    ``timed_out`` set. ``rules``: the model's forced and forbidden tokens (``processors.GenerationRules``).
    """
    context = source_context(model, src_ids, max_len, record_top_k, bos_id, ablate)
    return generate(context, most_likely, max_len=max_len, eos_ids=eos_list(eos_id, model.config.eos_id, stop_at_eos),
                    use_cache=use_cache, record=record, record_top_k=record_top_k, time_budget=time_budget,
                    rules=rules)
