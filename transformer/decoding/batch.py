"""One call for a batch of sources, whichever strategy a caller's options choose (the pipeline's ``translate``)."""

from __future__ import annotations

from torch import Tensor

from ..network.model import Ablation, Transformer
from .beam import EarlyStopping, LengthNorm, beam_search
from .common import pick_strategy
from .greedy import greedy_decode
from .processors import GenerationRules
from .sampling import sample


def or_one(temperature: float | None) -> float:
    """The sampling temperature, 1 when none was given (top-k / top-p alone)."""
    return 1.0 if temperature is None else temperature


def decode_batch(model: Transformer, src_ids: Tensor, *, beam_size: int | None, length_penalty: float,
                 early_stopping: EarlyStopping, temperature: float | None, top_k: int | None, top_p: float | None,
                 seed: int | None, max_len: int, ablate: Ablation | None, time_budget: float | None,
                 rules: GenerationRules | None = None, length_norm: LengthNorm = "gnmt"
                 ) -> tuple[list[list[int]], bool]:
    """(output ids per row, whether the time budget cut them), by the strategy the options choose
    (``pick_strategy``): beam search's best hypothesis, a sample, or the greedy output."""
    strategy = pick_strategy(beam_size=beam_size, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
    common = dict(max_len=max_len, ablate=ablate, time_budget=time_budget, rules=rules)
    if strategy == "beam":
        results = beam_search(model, src_ids, beam_size=beam_size, length_penalty=length_penalty,
                              early_stopping=early_stopping, length_norm=length_norm, n_best=1, **common)
        return [list(result.best.tokens) for result in results], any(r.timed_out for r in results)
    if strategy == "sampling":
        result = sample(model, src_ids, temperature=or_one(temperature), top_k=top_k, top_p=top_p, seed=seed,
                        **common)
    else:
        result = greedy_decode(model, src_ids, **common)
    return result.tokens, result.timed_out
