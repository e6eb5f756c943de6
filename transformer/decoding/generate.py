"""The token-by-token loop greedy decoding and sampling share; only the choice of each next token differs."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from ..network.attention import KVCache
from ..network.trace import Trace
from .common import deadline_of, excluded_pad, next_token_log_probs, out_of_time
from .context import Context
from .processors import GenerationRules, apply_processors
from .records import DecodeResult, DecodeStep

# Picks the next token from (B, V) log-probs: returns (tokens (B,), probs of the
# distribution chosen from (B, V)).
Chooser = Callable[[Tensor], tuple[Tensor, Tensor]]


def generate(
    context: Context,
    choose: Chooser,
    *,
    max_len: int,
    eos_ids: Sequence[int],
    use_cache: bool,
    record: bool,
    record_top_k: int,
    time_budget: float | None = None,
    rules: GenerationRules | None = None,
) -> DecodeResult:
    """Start from the context's ids (an encoder-decoder's BOS, a decoder-only model's prompt), then append each
    chosen token, until every row has produced one of ``eos_ids`` or ``max_len`` tokens; ``choose`` is the only
    difference between greedy and sampling. ``eos_ids`` empty: all ``max_len`` steps run.

    The pad id is never chosen (``next_token_log_probs``) unless ``rules.pad_allowed`` (a Hugging Face folder or a
    decoder-only model, whose ``generate`` keeps it a candidate; Marian's ``bad_words_ids`` forbids it).
    ``time_budget``: seconds after which no further step starts (``timed_out`` in the result; None: no budget).
    ``rules``: a model's forced and forbidden tokens (``processors.GenerationRules``), applied after the log-softmax."""
    deadline = deadline_of(time_budget)
    pad_id = context.model.config.pad_id  # finished rows' filler
    ids = context.start  # (B, P + t)
    batch, device = ids.size(0), ids.device
    stops = torch.tensor(list(eos_ids), dtype=torch.long, device=device)
    cache = KVCache() if use_cache else None
    processors = rules.processors(max_len, context.prompt_len) if rules is not None else []

    active = torch.ones(batch, dtype=torch.bool, device=device)
    log_prob_sums = torch.zeros(batch, dtype=torch.float32, device=device)
    steps: list[DecodeStep] = []
    timed_out = False

    for step in range(max_len):
        if step and out_of_time(deadline):
            timed_out = True
            break
        trace = Trace() if record else None
        logits = context.logits(ids, cache, trace)  # (B, V): only the new positions run when cached
        log_probs = next_token_log_probs(logits, excluded_pad(pad_id, rules))  # (B, V)
        log_probs = apply_processors(processors, ids, log_probs)
        token, probs = choose(log_probs)
        token = torch.where(active, token, torch.full_like(token, pad_id))  # finished rows get PAD
        chosen_log_prob = log_probs.gather(1, token[:, None]).squeeze(1)
        log_prob_sums += torch.where(active, chosen_log_prob, torch.zeros_like(chosen_log_prob))
        if record:
            steps.append(_record_step(probs, token, active, context.attention(trace, ids.size(1)), record_top_k))
        ids = torch.cat([ids, token[:, None]], dim=1)
        if len(stops):
            active = active & ~torch.isin(token, stops)
            if not bool(active.any()):
                break

    tokens, finished = _split_outputs(ids[:, context.prompt_len:], eos_ids)
    return DecodeResult(tokens=tokens, finished=finished, log_probs=log_prob_sums.tolist(), ids=ids, steps=steps,
                        timed_out=timed_out)


def eos_list(eos_id: int | Sequence[int] | None, default: int, stop_at_eos: bool = True) -> tuple[int, ...]:
    """The ids that end a row: ``eos_id`` (one id or several: a ``generation_config`` may list them, and any of
    them stops; an empty list: none), the model's ``default`` when None, none at all when not ``stop_at_eos``."""
    if not stop_at_eos:
        return ()
    if eos_id is None:
        return (int(default),)
    ids = (eos_id,) if isinstance(eos_id, int) else tuple(eos_id)
    if any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in ids):
        raise ValueError(f"eos_id must be an id >= 0 or a list of them, got {eos_id!r}")
    return ids


def _record_step(probs: Tensor, token: Tensor, active: Tensor, attention: Tensor, record_top_k: int) -> DecodeStep:
    """One step's record: the k most likely tokens of ``probs`` (B, V), the chosen ``token`` (B,), the newest
    query's attention over the source (``Context.attention``)."""
    k = min(record_top_k, probs.size(-1))
    top_probs, top_ids = probs.topk(k, dim=-1)  # sorted descending
    return DecodeStep(
        top_ids=top_ids,
        top_probs=top_probs,
        token=token,
        token_prob=probs.gather(1, token[:, None]).squeeze(1),
        cross_attention=attention,
        active=active.clone(),
    )


def _split_outputs(generated: Tensor, eos_ids: Sequence[int]) -> tuple[list[list[int]], list[bool]]:
    """Per row of ``generated`` (B, T): the tokens before the first EOS (any of ``eos_ids``), and whether one
    came. PAD fills a row only after its EOS; before it, a PAD is a token the model chose (a Hugging Face folder's
    distribution keeps PAD, as ``generate``'s does) and stays, as the decoder read it."""
    stops = set(eos_ids)
    tokens, finished = [], []
    for row in generated.tolist():
        end = next((i for i, token in enumerate(row) if token in stops), None)
        tokens.append(row if end is None else row[:end])
        finished.append(end is not None)
    return tokens, finished
