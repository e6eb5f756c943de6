"""The token-by-token loop greedy decoding and sampling share; only the choice of each next token differs."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ..network.attention import KVCache
from ..network.model import Ablation, Transformer
from ..network.trace import Trace
from .common import check_inputs, cross_attention_last, deadline_of, excluded_pad, next_token_log_probs, out_of_time
from .fast import decode_step
from .processors import GenerationRules, apply_processors
from .records import DecodeResult, DecodeStep

# Picks the next token from (B, V) log-probs: returns (tokens (B,), probs of the
# distribution chosen from (B, V)).
Chooser = Callable[[Tensor], tuple[Tensor, Tensor]]


def generate(
    model: Transformer,
    src_ids: Tensor,
    choose: Chooser,
    *,
    max_len: int,
    bos_id: int | None,
    eos_id: int | None,
    stop_at_eos: bool,
    use_cache: bool,
    record: bool,
    record_top_k: int,
    ablate: Ablation | None,
    time_budget: float | None = None,
    rules: GenerationRules | None = None,
) -> DecodeResult:
    """Feed the decoder BOS, then each chosen token, until every row has produced EOS or
    ``max_len`` tokens; ``choose`` is the only difference between greedy and sampling.

    ``bos_id`` / ``eos_id`` None: the model's own (``config``); ``stop_at_eos=False`` runs all ``max_len`` steps.
    The pad id is never chosen (``next_token_log_probs``) unless ``rules.pad_allowed`` (a Hugging Face folder,
    whose ``generate`` keeps it a candidate; Marian's ``bad_words_ids`` forbids it).
    ``time_budget``: seconds after which no further step starts (``timed_out`` in the result; None: no budget).
    ``rules``: a model's forced and forbidden tokens (``processors.GenerationRules``), applied after the log-softmax."""
    check_inputs(model, src_ids, max_len, record_top_k)
    deadline = deadline_of(time_budget)
    pad_id = model.config.pad_id  # finished rows' filler
    bos_id = model.config.bos_id if bos_id is None else bos_id
    eos_id = (model.config.eos_id if eos_id is None else eos_id) if stop_at_eos else None
    batch = src_ids.size(0)
    device = src_ids.device

    memory = model.encode(src_ids, ablate=ablate)  # (B, S, D), computed once
    memory_mask = model.memory_mask(src_ids)  # (B, 1, 1, S)
    cache = KVCache() if use_cache else None
    processors = rules.processors(max_len) if rules is not None else []

    ids = torch.full((batch, 1), bos_id, dtype=torch.long, device=device)  # (B, 1 + t)
    active = torch.ones(batch, dtype=torch.bool, device=device)
    log_prob_sums = torch.zeros(batch, dtype=torch.float32, device=device)
    steps: list[DecodeStep] = []
    timed_out = False

    for step in range(max_len):
        if step and out_of_time(deadline):
            timed_out = True
            break
        trace = Trace() if record else None
        decoder_input = ids[:, -1:] if use_cache else ids  # only the newest token when cached
        logits = decode_step(model, decoder_input, memory, memory_mask, cache=cache, trace=trace, ablate=ablate)
        log_probs = next_token_log_probs(logits[:, -1], excluded_pad(pad_id, rules))  # (B, V)
        log_probs = apply_processors(processors, ids, log_probs)
        token, probs = choose(log_probs)
        token = torch.where(active, token, torch.full_like(token, pad_id))  # finished rows get PAD
        chosen_log_prob = log_probs.gather(1, token[:, None]).squeeze(1)
        log_prob_sums += torch.where(active, chosen_log_prob, torch.zeros_like(chosen_log_prob))
        if record:
            steps.append(_record_step(probs, token, active, trace, record_top_k, model.config.n_decoder_layers))
        ids = torch.cat([ids, token[:, None]], dim=1)
        if eos_id is not None:
            active = active & (token != eos_id)
            if not bool(active.any()):
                break

    tokens, finished = _split_outputs(ids, eos_id, pad_id)
    return DecodeResult(tokens=tokens, finished=finished, log_probs=log_prob_sums.tolist(), ids=ids, steps=steps,
                        timed_out=timed_out)


def _record_step(probs: Tensor, token: Tensor, active: Tensor, trace: Trace, record_top_k: int,
                 n_layers: int) -> DecodeStep:
    """One step's record: the k most likely tokens of ``probs`` (B, V), the chosen ``token`` (B,)."""
    k = min(record_top_k, probs.size(-1))
    top_probs, top_ids = probs.topk(k, dim=-1)  # sorted descending
    return DecodeStep(
        top_ids=top_ids,
        top_probs=top_probs,
        token=token,
        token_prob=probs.gather(1, token[:, None]).squeeze(1),
        cross_attention=cross_attention_last(trace, n_layers),
        active=active.clone(),
    )


def _split_outputs(ids: Tensor, eos_id: int | None, pad_id: int) -> tuple[list[list[int]], list[bool]]:
    """Per row of ``ids`` (B, 1 + T): the generated tokens without BOS and EOS, and whether EOS came. PAD fills a
    row only after its EOS; before it, a PAD is a token the model chose (a Hugging Face folder's distribution keeps
    PAD, as ``generate``'s does) and stays, as the decoder read it."""
    tokens, finished = [], []
    for row in ids[:, 1:].tolist():
        ended = eos_id is not None and eos_id in row
        tokens.append(row[: row.index(eos_id)] if ended else row)
        finished.append(ended)
    return tokens, finished
