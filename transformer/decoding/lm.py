"""Decoding a decoder-only language model: the continuation of a prompt, greedy, by beam search or sampled, as
``transformers``' ``generate()`` gives it for the same model (GPT-2, Llama, Mistral, Qwen2/3, Gemma-2/3).

The same loops as an encoder-decoder's (``generate``, ``beam.search``), started from the prompt instead of the
decoder's start id (``context.PromptContext``): with the KV cache the prompt runs once, then one token per step
(a sliding layer's cache keeping its window). What ``generate()`` does, done here too:

- the prompt may be a left-padded batch with its ``attention_mask`` (1 = token): each row continues as it would
  alone, its positions counted from its first token;
- ``eos_id`` may be a list (a ``generation_config.json``'s ``eos_token_id`` often is): any of them ends a row;
- ``min_new_tokens``: no EOS before that many new tokens (``MinNewTokensLengthLogitsProcessor``);
- PAD stays a candidate (``generate`` never forbids it); greedy decoding picks the argmax of the log-softmax of
  the float32 logits, beam search ranks ``log p(Y) / |Y| ** length_penalty`` with ``transformers``' stopping rules
  (``length_norm="hf"``: beam.py), sampling draws from a private ``torch.Generator`` seeded by ``seed``.

Outputs hold the new tokens only (not the prompt), without the EOS; ``DecodeResult.ids`` is the prompt and the
continuation, as ``generate()``'s ``sequences`` (finished rows then padded with the pad id). A recorded step's
``cross_attention`` is the newest query's self-attention over the prompt (the prompt plays the source).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from functools import partial

import torch
from torch import Tensor

from ..checks import check_int
from ..network.model import Ablation, Transformer
from .batch import by_strategy
from .beam import EarlyStopping, search
from .context import PromptContext, prompt_context
from .generate import eos_list, generate
from .greedy import most_likely
from .processors import GenerationRules
from .records import BeamResult, DecodeResult
from .sampling import sampler

EosIds = int | Sequence[int] | None


def _rules(context: PromptContext, min_new_tokens: int, eos_ids: tuple[int, ...],
           rules: GenerationRules | None) -> GenerationRules:
    """The model's ``rules`` (none by default) with PAD a candidate, the EOS ids, and no EOS before
    ``min_new_tokens`` new tokens: a minimum length of prompt length + ``min_new_tokens`` ids."""
    check_int("min_new_tokens", min_new_tokens, 0)
    rules = rules or GenerationRules()
    min_length = context.prompt_len + min_new_tokens if min_new_tokens else rules.min_length
    return dataclasses.replace(rules, pad_allowed=True, eos_id=eos_ids or None, min_length=min_length)


def _start(model: Transformer, prompt_ids: Tensor, attention_mask: Tensor | None, max_new_tokens: int,
           min_new_tokens: int, eos_id: EosIds, record_top_k: int, ablate: Ablation | None,
           rules: GenerationRules | None) -> tuple[PromptContext, tuple[int, ...], GenerationRules]:
    """The checked context, EOS ids and rules every entry point here starts from."""
    context = prompt_context(model, prompt_ids, attention_mask, max_new_tokens, record_top_k, ablate)
    eos_ids = eos_list(eos_id, model.config.eos_id)
    if any(i >= model.config.tgt_vocab_size for i in eos_ids):
        raise ValueError(f"eos_id {eos_id!r} outside the vocabulary (0..{model.config.tgt_vocab_size - 1})")
    return context, eos_ids, _rules(context, min_new_tokens, eos_ids, rules)


@torch.inference_mode()
def lm_greedy(model: Transformer, prompt_ids: Tensor, *, max_new_tokens: int, attention_mask: Tensor | None = None,
              min_new_tokens: int = 0, eos_id: EosIds = None, use_cache: bool = True, record: bool = False,
              record_top_k: int = 5, ablate: Ablation | None = None, time_budget: float | None = None,
              rules: GenerationRules | None = None) -> DecodeResult:
    """The most likely next token at every step: ``generate(input_ids, max_new_tokens=N, do_sample=False)``.

    prompt_ids: (B, P), left-padded where ``attention_mask`` (B, P) is 0. ``eos_id``: one id or a list (default the
    model's ``config.eos_id``). ``use_cache=False`` recomputes the whole sequence every step (same tokens). ``record``:
    one ``DecodeStep`` per step; ``ablate``, ``time_budget``, ``rules``: as ``greedy_decode`` takes them."""
    context, eos_ids, rules = _start(model, prompt_ids, attention_mask, max_new_tokens, min_new_tokens, eos_id,
                                     record_top_k, ablate, rules)
    return generate(context, most_likely, max_len=max_new_tokens, eos_ids=eos_ids, use_cache=use_cache,
                    record=record, record_top_k=record_top_k, time_budget=time_budget, rules=rules)


@torch.inference_mode()
def lm_sample(model: Transformer, prompt_ids: Tensor, *, max_new_tokens: int, temperature: float = 1.0,
              top_k: int | None = None, top_p: float | None = None, seed: int | None = None,
              attention_mask: Tensor | None = None, min_new_tokens: int = 0, eos_id: EosIds = None,
              use_cache: bool = True, record: bool = False, record_top_k: int = 5, ablate: Ablation | None = None,
              time_budget: float | None = None, rules: GenerationRules | None = None) -> DecodeResult:
    """Each next token drawn from the model's distribution reshaped by temperature, top-k and top-p (``sample``'s
    rules: a call-local generator seeded by ``seed``, the global RNG never touched); other arguments as
    ``lm_greedy``. The recorded ``probs`` are those of the reshaped distribution."""
    choose = sampler(temperature, top_k, top_p, seed, prompt_ids.device)
    context, eos_ids, rules = _start(model, prompt_ids, attention_mask, max_new_tokens, min_new_tokens, eos_id,
                                     record_top_k, ablate, rules)
    return generate(context, choose, max_len=max_new_tokens, eos_ids=eos_ids, use_cache=use_cache, record=record,
                    record_top_k=record_top_k, time_budget=time_budget, rules=rules)


@torch.inference_mode()
def lm_beam_search(model: Transformer, prompt_ids: Tensor, *, max_new_tokens: int, beam_size: int,
                   length_penalty: float = 1.0, early_stopping: EarlyStopping = False, n_best: int | None = None,
                   attention_mask: Tensor | None = None, min_new_tokens: int = 0, eos_id: EosIds = None,
                   record: bool = False, record_top_k: int = 5, ablate: Ablation | None = None,
                   time_budget: float | None = None, rules: GenerationRules | None = None) -> list[BeamResult]:
    """``generate(num_beams=beam_size, length_penalty=..., early_stopping=..., max_new_tokens=...)``: one
    ``BeamResult`` per prompt row, its best hypothesis ``generate``'s sequence and its score ``sequences_scores``
    (``transformers``' defaults: length_penalty 1, early_stopping False). Other arguments as ``lm_greedy``."""
    context, eos_ids, rules = _start(model, prompt_ids, attention_mask, max_new_tokens, min_new_tokens, eos_id,
                                     record_top_k, ablate, rules)
    return search(context, beam_size=beam_size, max_len=max_new_tokens, length_penalty=length_penalty,
                  early_stopping=early_stopping, length_norm="hf", n_best=n_best, eos_ids=eos_ids, record=record,
                  record_top_k=record_top_k, time_budget=time_budget, rules=rules)


def lm_generate(model: Transformer, prompt_ids: Tensor, *, max_new_tokens: int, beam_size: int | None = None,
                length_penalty: float = 1.0, early_stopping: EarlyStopping = False, temperature: float | None = None,
                top_k: int | None = None, top_p: float | None = None, seed: int | None = None,
                attention_mask: Tensor | None = None, min_new_tokens: int = 0, eos_id: EosIds = None,
                ablate: Ablation | None = None, time_budget: float | None = None,
                rules: GenerationRules | None = None) -> tuple[list[list[int]], bool]:
    """(the new tokens per row, whether the time budget cut them), by the strategy the options choose, as
    ``translate`` chooses (``pick_strategy``): ``beam_size`` -> beam search's best hypothesis; any of
    ``temperature`` / ``top_k`` / ``top_p`` -> a sample; none -> greedy. A pipeline's ``generate`` calls this."""
    common = dict(max_new_tokens=max_new_tokens, attention_mask=attention_mask, min_new_tokens=min_new_tokens,
                  eos_id=eos_id, ablate=ablate, time_budget=time_budget, rules=rules)
    return by_strategy(
        beam_size=beam_size, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
        beam=partial(lm_beam_search, model, prompt_ids, length_penalty=length_penalty, early_stopping=early_stopping,
                     **common),
        sampling=partial(lm_sample, model, prompt_ids, **common),
        greedy=partial(lm_greedy, model, prompt_ids, **common))
