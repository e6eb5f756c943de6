"""One call for a batch of sources, whichever strategy a caller's options choose (the pipeline's ``translate``)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from torch import Tensor

from ..network.model import Ablation, Transformer
from .beam import EarlyStopping, LengthNorm, beam_search
from .common import pick_strategy
from .greedy import greedy_decode
from .processors import GenerationRules
from .records import BeamResult, DecodeResult
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
    common = dict(max_len=max_len, ablate=ablate, time_budget=time_budget, rules=rules)
    return by_strategy(
        beam_size=beam_size, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
        beam=partial(beam_search, model, src_ids, length_penalty=length_penalty, early_stopping=early_stopping,
                     length_norm=length_norm, **common),
        sampling=partial(sample, model, src_ids, **common), greedy=partial(greedy_decode, model, src_ids, **common))


def by_strategy(*, beam_size: int | None, temperature: float | None, top_k: int | None, top_p: float | None,
                seed: int | None, beam: Callable[..., list[BeamResult]], sampling: Callable[..., DecodeResult],
                greedy: Callable[[], DecodeResult]) -> tuple[list[list[int]], bool]:
    """(output ids per row, whether the time budget cut them) of the strategy the options choose
    (``pick_strategy``): ``beam(beam_size=, n_best=1)``'s best hypotheses, ``sampling(temperature=, top_k=,
    top_p=, seed=)``'s sample, or ``greedy()``; an encoder-decoder's decoders or a decoder-only model's."""
    strategy = pick_strategy(beam_size=beam_size, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
    if strategy == "beam":
        results = beam(beam_size=beam_size, n_best=1)
        return [list(result.best.tokens) for result in results], any(r.timed_out for r in results)
    if strategy == "sampling":
        result = sampling(temperature=or_one(temperature), top_k=top_k, top_p=top_p, seed=seed)
    else:
        result = greedy()
    return result.tokens, result.timed_out
