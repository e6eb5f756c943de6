"""What a decoding conditions on, behind one small interface the loops share: an encoder-decoder's source, or a
decoder-only model's prompt.

The token-by-token loop (``generate``) and beam search (``beam.search``) hold the ids so far, (N, P + t): the
start ``P`` ids, then the generated ones. Each step asks its context for the next-token logits of those ids:

- ``SourceContext`` (an encoder-decoder): the source encoded once; the start is the decoder's start id (P = 1);
- ``PromptContext`` (a decoder-only language model): the prompt is the start (P = its length, left padding
  allowed with an ``attention_mask``, as ``transformers``' ``generate`` takes it); with a ``KVCache`` the first
  step runs the prompt once and every later step one token, the mask growing by one 1 per step.

With a cache a context feeds only ``ids[:, cache.offset:]`` (the positions not yet in the cache); without one, all
of ``ids`` (the uncached path, recomputed every step: kept for teaching and for the parity tests). Each also says
what a recorded step's "source attention" is (``attention``): cross-attention for an encoder-decoder, the newest
query's self-attention over the prompt for a decoder-only model (the prompt plays the source, docs/decoding.md).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..checks import check_int
from ..network.attention import KVCache
from ..network.model import Ablation, Transformer
from ..network.sites import site
from ..network.trace import Trace
from .common import check_inputs, cross_attention_last
from .fast import decode_step


class SourceContext:
    """An encoder-decoder's decoding of ``src_ids`` (B, S): memory computed once, the decoder started at ``bos_id``."""

    def __init__(self, model: Transformer, src_ids: Tensor, bos_id: int, ablate: Ablation | None, *,
                 memory: tuple[Tensor, Tensor] | None = None) -> None:
        self.model, self.ablate = model, ablate
        if memory is None:
            memory = (model.encode(src_ids, ablate=ablate), model.memory_mask(src_ids))  # (B, S, D), (B, 1, 1, S)
        self.memory, self.memory_mask = memory
        self.bos_id = bos_id
        self.start = torch.full((self.memory.size(0), 1), bos_id, dtype=torch.long, device=src_ids.device)  # (B, 1)

    @property
    def prompt_len(self) -> int:
        return 1

    def expand(self, beams: int) -> SourceContext:
        """Each row ``beams`` times in a row (row b * beams + k: beam k of row b), for beam search."""
        memory = (self.memory.repeat_interleave(beams, dim=0), self.memory_mask.repeat_interleave(beams, dim=0))
        return SourceContext(self.model, self.start.repeat_interleave(beams, dim=0), self.bos_id, self.ablate,
                             memory=memory)

    def logits(self, ids: Tensor, cache: KVCache | None, trace: Trace | None) -> Tensor:
        """The next-token logits (N, V) after ``ids`` (N, 1 + t)."""
        new = ids if cache is None else ids[:, cache.offset:]
        logits = decode_step(self.model, new, self.memory, self.memory_mask, cache=cache, trace=trace,
                             ablate=self.ablate)
        return logits[:, -1]

    def attention(self, trace: Trace, length: int) -> Tensor:
        """The newest query's cross-attention, (N, L, H, S)."""
        return cross_attention_last(trace, self.model.config.n_decoder_layers)


class PromptContext:
    """A decoder-only model's continuation of ``prompt_ids`` (B, P), left-padded where ``attention_mask`` (B, P) is
    0 (None: no padding)."""

    def __init__(self, model: Transformer, prompt_ids: Tensor, attention_mask: Tensor | None,
                 ablate: Ablation | None) -> None:
        self.model, self.ablate = model, ablate
        self.start = prompt_ids
        self.mask = None if attention_mask is None else attention_mask.to(torch.long)

    @property
    def prompt_len(self) -> int:
        return self.start.size(1)

    def expand(self, beams: int) -> PromptContext:
        """Each row ``beams`` times in a row (row b * beams + k: beam k of row b), for beam search."""
        mask = None if self.mask is None else self.mask.repeat_interleave(beams, dim=0)
        return PromptContext(self.model, self.start.repeat_interleave(beams, dim=0), mask, self.ablate)

    def logits(self, ids: Tensor, cache: KVCache | None, trace: Trace | None) -> Tensor:
        """The next-token logits (N, V) after ``ids`` (N, P + t): the prompt's mask, then 1 for every generated
        token (a finished row's filler too, as ``generate`` extends its mask; those rows are ignored)."""
        new = ids if cache is None else ids[:, cache.offset:]
        mask = None
        if self.mask is not None:
            generated = ids.size(1) - self.prompt_len
            mask = torch.cat([self.mask, self.mask.new_ones(ids.size(0), generated)], dim=1)  # (N, P + t)
        hidden = self.model.decode_states(new, None, None, cache=cache, trace=trace, ablate=self.ablate,
                                          attention_mask=mask)  # (N, T, D)
        # only the newest position's logits, through the generator itself (Gemma-2's soft-cap included)
        return site("logits", self.model.generator(hidden[:, -1:]), trace)[:, -1]

    def attention(self, trace: Trace, length: int) -> Tensor:
        """The newest query's self-attention over the prompt's positions, (N, L, H, P), after a step that read
        ``length`` ids; 0 where a sliding layer no longer sees a prompt position (its cache dropped it)."""
        rows = []
        for layer in range(self.model.config.n_decoder_layers):
            weights = trace.attention("decoder", layer)[:, :, -1, :]  # (N, H, T_k): the last T_k of `length`
            every = weights.new_zeros(*weights.shape[:2], length)  # (N, H, length)
            every[..., length - weights.size(-1):] = weights
            rows.append(every[..., : self.prompt_len])
        return torch.stack(rows, dim=1)  # (N, L, H, P)


Context = SourceContext | PromptContext


def source_context(model: Transformer, src_ids: Tensor, max_len: int, record_top_k: int, bos_id: int | None,
                   ablate: Ablation | None) -> SourceContext:
    """An encoder-decoder's context, its inputs checked (``common.check_inputs``); ``bos_id`` None: the model's."""
    check_inputs(model, src_ids, max_len, record_top_k)
    return SourceContext(model, src_ids, model.config.bos_id if bos_id is None else bos_id, ablate)


def prompt_context(model: Transformer, prompt_ids: Tensor, attention_mask: Tensor | None, max_new_tokens: int,
                   record_top_k: int, ablate: Ablation | None) -> PromptContext:
    """A decoder-only model's context. ValueError unless the model is a decoder-only one in eval mode,
    ``prompt_ids`` a non-empty (B, P) integer tensor, ``attention_mask`` None or (B, P) of 0 and 1 with a token in
    every row, max_new_tokens >= 1 with P + max_new_tokens within the model's positions, record_top_k >= 1."""
    if not model.config.decoder_only:
        raise ValueError("lm decoding needs a decoder-only model; an encoder-decoder decodes a source "
                         "(greedy_decode, beam_search, sample)")
    if model.training:
        raise ValueError("decoding needs the model in eval mode (dropout off): call model.eval() first")
    if (not isinstance(prompt_ids, Tensor) or prompt_ids.dim() != 2
            or prompt_ids.dtype not in (torch.int64, torch.int32) or 0 in prompt_ids.shape):
        raise ValueError("prompt_ids must be an integer tensor of shape (batch, prompt length), at least one token")
    check_int("max_new_tokens", max_new_tokens, 1)
    check_int("record_top_k", record_top_k, 1)
    total = prompt_ids.size(1) + max_new_tokens
    if total > model.config.max_len:
        raise ValueError(f"the prompt ({prompt_ids.size(1)} ids) and max_new_tokens ({max_new_tokens}) exceed the "
                         f"model's positions (max_len={model.config.max_len})")
    if attention_mask is not None:
        if not isinstance(attention_mask, Tensor) or attention_mask.shape != prompt_ids.shape:
            raise ValueError(f"attention_mask must be a tensor of the prompt's shape {tuple(prompt_ids.shape)}")
        if not bool(((attention_mask == 0) | (attention_mask == 1)).all()) or not bool(attention_mask.any(-1).all()):
            raise ValueError("attention_mask must hold 0 (padding) and 1 (token), and a token in every row")
    return PromptContext(model, prompt_ids.long(), attention_mask, ablate)
