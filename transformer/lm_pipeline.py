"""Prompt in, continuation out: a decoder-only language model (GPT-2, Llama, Mistral, Qwen, Gemma) and its
tokenizer behind one object, the counterpart of the translation ``Pipeline``.

    from transformer import load_pretrained
    pipe = load_pretrained("pretrained/SmolLM2-135M")       # a Hugging Face folder of a decoder-only family
    pipe.kind                                               # "decoder" (a translation pipeline: "encoder-decoder")
    pipe.encode_prompt("The capital of France is")          # (1, L): the ids AutoTokenizer gives
    pipe.lm_logits(ids)                                     # (B, L, V): every position's next-token logits
    pipe.generate("The capital of France is", max_new_tokens=10)       # greedy continuation, as generate()
    pipe.generate("Hello", chat=True)                       # the folder's chat template around it
    pipe.generate("Hello", beam_size=4)                     # or temperature= / top_k= / top_p= / seed=
    pipe.trace("The capital of France is")                  # everything the app draws

The prompt plays the source and the continuation the target: ``trace`` returns a ``TranslationTrace`` whose
``src_*`` fields are the prompt and ``output_*`` fields the continuation, its ``trace`` the forward over both.
Text is tokenized as written (``AutoTokenizer(text)``: no cleaning; the family's BOS rule); an empty prompt, or
one over the model's positions, raises ValueError naming the limit. Decoding is bounded by ``max_new_tokens``
(default ``DEFAULT_NEW_TOKENS``, at most ``MAX_OUTPUT_TOKENS`` and the positions left), the EOS ids of the folder
(``generation_config.json``'s list) and a time budget. Like ``Pipeline`` it keeps no per-call state.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import Tensor

from .decoder_pipeline import DecoderOnlyPipeline
from .decoding.lm import lm_generate
from .hub.generation import beam_options
from .hub.lm_tokenizer import LMTokenizer
from .network.model import Ablation
from .output_bounds import DECODE_SECONDS, MAX_OUTPUT_TOKENS, DecodingTimeoutWarning, timeout_message
from .translation_trace import TranslationTrace

DEFAULT_NEW_TOKENS = 20  # generate()'s default bound (max_length 20) as new tokens
MAX_PROMPT_TOKENS = 4096  # a prompt's tokens, at most (the app's pages draw L x L maps of it)


class LMPipeline(DecoderOnlyPipeline):
    """A decoder-only model, its tokenizer and its meta (``load_pretrained`` of a decoder-only folder)."""

    _tokenizer: LMTokenizer

    @property
    def has_chat_template(self) -> bool:
        return self._tokenizer.has_chat_template

    @property
    def eos_ids(self) -> tuple[int, ...]:
        """Where a continuation ends: the folder's EOS ids (generation_config.json's list), else the config's."""
        return self._tokenizer.eos_ids or (self.config.eos_id,)

    def __repr__(self) -> str:
        return (f"LMPipeline(model_type={self._meta.get('model_type', '?')!r}, "
                f"parameters={self._model.num_parameters():,})")

    # -- text <-> ids -------------------------------------------------------------------

    def prompt_ids(self, text: str, *, chat: bool = False) -> list[int]:
        """The ids of ``text`` as ``AutoTokenizer(text)`` gives them, or, with ``chat``, as
        ``apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)`` does; ValueError
        for an empty prompt, a chat without a template, or one over ``max_prompt_tokens``."""
        if not isinstance(text, str):
            raise TypeError(f"a prompt is a string, not {type(text).__name__}")
        if chat:
            if not self.has_chat_template:
                raise ValueError("this model has no chat template (a base model): give the prompt as plain text")
            ids = self._tokenizer.chat([{"role": "user", "content": text}], add_generation_prompt=True)
        else:
            ids = self._tokenizer.encode(text)
        if not ids or not text.strip():
            raise ValueError("the prompt is empty: nothing to continue")
        if len(ids) > self.max_prompt_tokens:
            raise ValueError(f"the prompt has {len(ids):,} tokens; this model reads at most {self.max_prompt_tokens:,} "
                             "(its positions, less room for the continuation)")
        return ids

    @property
    def max_prompt_tokens(self) -> int:
        """The longest prompt read: the model's positions less one token of continuation, at most
        ``MAX_PROMPT_TOKENS``."""
        return max(1, min(self.config.max_len - 1, MAX_PROMPT_TOKENS))

    def encode_prompt(self, text: str, *, chat: bool = False) -> Tensor:
        """(1, L) int64 ids of the prompt on the model's device (``prompt_ids``)."""
        return torch.tensor([self.prompt_ids(text, chat=chat)], device=self.device)

    def new_tokens_bound(self, prompt_len: int, max_new_tokens: int | None) -> int:
        """``max_new_tokens`` (default ``DEFAULT_NEW_TOKENS``) within the positions left after the prompt and
        ``MAX_OUTPUT_TOKENS``; ValueError for a bound below 1."""
        wanted = DEFAULT_NEW_TOKENS if max_new_tokens is None else max_new_tokens
        if isinstance(wanted, bool) or not isinstance(wanted, int) or wanted < 1:
            raise ValueError(f"max_new_tokens must be a positive integer, got {wanted!r}")
        return max(1, min(wanted, self.config.max_len - prompt_len, MAX_OUTPUT_TOKENS))

    @torch.inference_mode()
    def lm_logits(self, ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """ids (B, L) -> logits (B, L, V): row t the distribution of token t + 1 (left padding where
        ``attention_mask`` is 0, as ``transformers`` takes it)."""
        return self._model.lm(ids.to(self.device), attention_mask=None if attention_mask is None
                              else attention_mask.to(self.device))

    # -- continuation ---------------------------------------------------------------------

    def generate(self, prompt: str | list[str], *, max_new_tokens: int | None = None, min_new_tokens: int = 0,
                 chat: bool = False, beam_size: int | None = None, length_penalty: float | None = None,
                 early_stopping: bool | str | None = None, temperature: float | None = None,
                 top_k: int | None = None, top_p: float | None = None, seed: int | None = None,
                 ablate: Ablation | None = None, time_budget: float | None = DECODE_SECONDS) -> str | list[str]:
        """The continuation of one prompt (-> str) or of a list (-> list, same order; left-padded as one batch):
        greedy by default, beam search with ``beam_size`` (``length_penalty`` / ``early_stopping`` default to the
        folder's, else ``generate``'s 1.0 / False), a sample with any of ``temperature`` / ``top_k`` / ``top_p``
        (``seed``). Special tokens are left out of the text. ``time_budget``: as ``Pipeline.translate``."""
        prompts = [prompt] if isinstance(prompt, str) else prompt
        if not isinstance(prompts, list | tuple) or not prompts:
            raise ValueError("generate needs a prompt or a non-empty list of prompts")
        rows = [self.prompt_ids(text, chat=chat) for text in prompts]
        width = max(map(len, rows))
        pad = self.config.pad_id
        ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows], device=self.device)
        mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], device=self.device)
        beam = beam_options(self._meta, length_penalty=length_penalty, early_stopping=early_stopping)
        beam.pop("length_norm")
        outputs, timed_out = lm_generate(
            self._model, ids, max_new_tokens=self.new_tokens_bound(width, max_new_tokens), beam_size=beam_size,
            **beam, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
            attention_mask=mask if len(rows) > 1 else None, min_new_tokens=min_new_tokens, eos_id=list(self.eos_ids),
            ablate=ablate, time_budget=time_budget)
        if timed_out:
            warnings.warn(timeout_message(time_budget), DecodingTimeoutWarning, stacklevel=2)
        texts = [self._tokenizer.decode(out) for out in outputs]
        return texts[0] if isinstance(prompt, str) else texts

    def translate(self, text: str | list[str], *, max_len: int | None = None, **options: Any) -> str | list[str]:
        """``generate`` under the translation pipeline's name (``max_len``: ``max_new_tokens``), so that code written
        for either pipeline runs on both."""
        if max_len is not None:
            options.setdefault("max_new_tokens", max_len)
        options.pop("length_norm", None)
        return self.generate(text, **options)

    def trace(self, prompt: str, *, max_new_tokens: int | None = None, chat: bool = False,
              temperature: float | None = None, top_k: int | None = None, top_p: float | None = None,
              seed: int | None = None, max_len: int | None = None, record_top_k: int = 5,
              ablate: Ablation | None = None, warn: bool = True,
              time_budget: float | None = DECODE_SECONDS) -> TranslationTrace:
        """Continue ``prompt`` greedily (or by sampling) and record everything: a ``TranslationTrace`` whose source
        is the prompt and output the continuation; its ``trace`` the forward over prompt + continuation (position
        t reads tokens 0..t and predicts t + 1). ``max_len``: ``max_new_tokens`` under the translation name."""
        if not isinstance(prompt, str):
            raise TypeError(f"trace takes one string, got {type(prompt).__name__}")
        ids = self.prompt_ids(prompt, chat=chat)
        bound = self.new_tokens_bound(len(ids), max_new_tokens if max_new_tokens is not None else max_len)
        steps, trace = self._continue_traced(ids, bound, eos_id=list(self.eos_ids), temperature=temperature,
                                             top_k=top_k, top_p=top_p, seed=seed, record_top_k=record_top_k,
                                             ablate=ablate, warn=warn, time_budget=time_budget)
        output_ids = steps.tokens[0]
        pieces = self._tokenizer.display_pieces
        return TranslationTrace(
            src_text=prompt, src_pieces=pieces(ids), src_ids=ids,
            output_text=self._tokenizer.decode(output_ids), output_pieces=pieces(output_ids), output_ids=output_ids,
            finished=steps.finished[0], trace=trace, steps=steps, timed_out=steps.timed_out)


__all__ = ["DEFAULT_NEW_TOKENS", "LMPipeline"]
