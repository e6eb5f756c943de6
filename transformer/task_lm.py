"""A decoder-only model trained here on a task (``python -m transformer.train --architecture decoder``), behind
the pipeline's methods: the source in, the model's continuation after it out.

    pipe = load_pretrained("runs/reverse-decoder")   # a checkpoint whose config is decoder_only
    pipe.kind                                          # "decoder"
    pipe.translate("abc")                              # "cba": the greedy continuation of "a b c <s>"
    pipe.translate("abc", beam_size=4)                 # beam search (also temperature=, top_k=, top_p=, seed=)
    pipe.trace("abc")                                  # a TranslationTrace: src_* the prompt, output_* the answer

The model reads one sequence, ``source tokens + [SEP] + target tokens + [EOS]`` (``text.ids.lm_sequence``; the
separator is the start id, BOS), in the one joint vocabulary of the checkpoint's tokenizer (saved as both ``src``
and ``tgt``). So the prompt is ``text.ids.prompt_ids(source)`` and the answer is the continuation up to EOS
(``decoding.lm``). The text is cleaned as the translation ``Pipeline`` cleans it; a prompt longer than the
model's positions allow (one position is kept for the answer) is cut, keeping the separator, with a
``UserWarning``; every output is bounded (``output_bounds``) and every decoding has a time budget.
Like ``Pipeline`` it keeps no per-call state and never modifies the model (which must be in eval mode).
"""

from __future__ import annotations

import warnings
from typing import Any, overload

import torch
from torch import Tensor

from .decoder_pipeline import DecoderOnlyPipeline
from .decoding.lm import lm_generate
from .network.model import Ablation, Transformer
from .output_bounds import DECODE_SECONDS, DecodingTimeoutWarning, output_bound, timeout_message
from .text.cleaning import clean_text
from .text.ids import prompt_ids
from .text.tokenizers import Tokenizer
from .translation_trace import TranslationTrace


class TaskLMPipeline(DecoderOnlyPipeline):
    """A decoder-only task model and its joint tokenizer: ``translate`` continues ``source + [SEP]``."""

    def __init__(self, model: Transformer, tokenizer: Tokenizer, *, meta: dict[str, Any] | None = None) -> None:
        """Wrap an in-memory decoder-only model (eval mode to translate) and the tokenizer of its vocabulary;
        ValueError when they do not fit each other (its special ids too)."""
        super().__init__(model, tokenizer, meta=meta)
        for name in ("pad_id", "unk_id", "bos_id", "eos_id"):
            if getattr(tokenizer, name) != getattr(model.config, name):
                raise ValueError(f"the tokenizer's {name} is {getattr(tokenizer, name)} but the model's is "
                                 f"{getattr(model.config, name)}")

    # What the app's decoder-only path reads of an ``LMPipeline``, answered for a model trained on a task.
    has_chat_template = False  # trained on (source, target) pairs: no chat format

    @property
    def eos_ids(self) -> tuple[int, ...]:
        """Where a continuation ends: the vocabulary's one EOS (``LMPipeline.eos_ids`` may list several)."""
        return (self.config.eos_id,)

    @property
    def max_prompt_tokens(self) -> int:
        """The longest prompt read whole, the separator included: the model's positions less one for the answer
        (a longer one is cut, see ``prompt``)."""
        return self.config.max_len - 1

    def __repr__(self) -> str:
        return (f"TaskLMPipeline(task={self._meta.get('task', '?')!r}, tokenizer={self._tokenizer!r}, "
                f"parameters={self._model.num_parameters():,})")

    # -- text <-> ids -------------------------------------------------------------------

    def prompt(self, text: str, *, warn: bool = True) -> tuple[str, list[int], list[str], bool]:
        """Clean and tokenize one source: (cleaned text, prompt ids = tokens + SEP, unknown characters, truncated).
        ValueError when nothing is left to continue; ``warn=False``: the flags only, no warnings."""
        cleaned = clean_text(text)
        ids = prompt_ids(self._tokenizer, cleaned)
        if len(ids) == 1:
            raise ValueError(f"nothing to translate: {cleaned!r} gives no source tokens")
        unknown = []
        if self.config.unk_id in ids:
            unknown = [c for c in dict.fromkeys(cleaned)
                       if not c.isspace() and self.config.unk_id in self._tokenizer.encode(c)]
            if warn:
                warnings.warn(f"characters unknown to the tokenizer became <unk>: "
                              f"{', '.join(map(repr, unknown)) or '(some characters)'}", UserWarning, stacklevel=3)
        limit = self.config.max_len - 1  # the prompt, SEP included, leaves one position for the answer
        truncated = len(ids) > limit
        if truncated:
            if warn:
                warnings.warn(f"the source has {len(ids)} ids with the separator, more than the model's positions "
                              f"allow before an answer ({limit}): it is cut", UserWarning, stacklevel=3)
            ids = [*ids[: limit - 1], self.config.bos_id]
        return cleaned, ids, unknown, truncated

    def prompt_ids(self, text: str, *, chat: bool = False) -> list[int]:
        """The ids the model continues for one source: its tokens, then the separator (``prompt``; warns of unknown
        characters and a cut). ``chat=True`` is refused, as ``generate`` refuses it."""
        _no_chat(chat)
        return self.prompt(text)[1]

    def encode_prompt(self, text: str, *, chat: bool = False) -> Tensor:
        """One source as the (1, P) prompt ids the model continues, on its device."""
        return torch.tensor([self.prompt_ids(text, chat=chat)], device=self.device)

    def lm_logits(self, ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """(B, L) ids (left-padded where ``attention_mask`` is 0) -> (B, L, V) logits, without gradients."""
        with torch.inference_mode():
            return self._model.lm(ids.to(self.device), attention_mask=attention_mask)

    def output_limit(self, prompt_len: int) -> int:
        """Bound on the new tokens after a prompt of ``prompt_len`` ids: the run's ``max_output_len`` (else
        ``output_bounds``' rule), within the model's positions."""
        saved = self._meta.get("max_output_len")
        limit = saved if isinstance(saved, int) and not isinstance(saved, bool) and saved > 0 else self.config.max_len
        return max(1, min(output_bound(limit, self._meta, prompt_len), self.config.max_len - prompt_len))

    # -- translation --------------------------------------------------------------------

    @overload
    def translate(self, text: str, **options: Any) -> str: ...
    @overload
    def translate(self, text: list[str], **options: Any) -> list[str]: ...

    def translate(self, text: str | list[str], *, beam_size: int | None = None, length_penalty: float | None = None,
                  early_stopping: bool | str | None = None, temperature: float | None = None,
                  top_k: int | None = None, top_p: float | None = None, seed: int | None = None,
                  max_len: int | None = None, max_new_tokens: int | None = None, min_new_tokens: int = 0,
                  ablate: Ablation | None = None, time_budget: float | None = DECODE_SECONDS) -> str | list[str]:
        """The continuation of each source's prompt, up to EOS: one text (-> str) or a list (-> list, same order).

        Greedy by default; ``beam_size`` beam search (``decoding.lm``: ``transformers``' length rule and defaults,
        ``length_penalty`` 1, ``early_stopping`` False); any of ``temperature`` / ``top_k`` / ``top_p`` a sample
        (``seed``). A batch is left-padded with its attention mask, so each row continues as it would alone
        (greedy and beam). ``max_new_tokens`` (or ``max_len``, the translation pipeline's name for the same bound;
        default ``output_limit``) bounds the answer, ``min_new_tokens`` forbids EOS before that many;
        ``time_budget`` cuts decoding with a ``DecodingTimeoutWarning``."""
        if max_len is not None:
            if max_new_tokens is not None and max_new_tokens != max_len:
                raise ValueError("give max_len or max_new_tokens (the same bound), not both")
            max_new_tokens = max_len
        texts = [text] if isinstance(text, str) else text
        if not isinstance(texts, list | tuple) or not texts:
            raise ValueError("translate needs a string or a non-empty list of strings")
        rows = []
        for i, item in enumerate(texts):
            if not isinstance(item, str):
                raise TypeError(f"text {i} is a {type(item).__name__}, not a string")
            try:
                rows.append(self.prompt(item)[1])
            except ValueError as error:
                if len(texts) == 1:
                    raise
                raise ValueError(f"text {i} of {len(texts)}: {error}") from None
        ids, mask = self._left_padded(rows)
        length_penalty = 1.0 if length_penalty is None else length_penalty  # transformers' default
        limit = self.output_limit(ids.size(1)) if max_new_tokens is None else max_new_tokens
        outputs, timed_out = lm_generate(self._model, ids, attention_mask=mask, max_new_tokens=limit,
                                         beam_size=beam_size, length_penalty=length_penalty,
                                         early_stopping=early_stopping or False, temperature=temperature,
                                         top_k=top_k, top_p=top_p, seed=seed, min_new_tokens=min_new_tokens,
                                         ablate=ablate, time_budget=time_budget)
        if timed_out:
            warnings.warn(timeout_message(time_budget), DecodingTimeoutWarning, stacklevel=2)
        answers = [self._tokenizer.decode(tokens) for tokens in outputs]
        return answers[0] if isinstance(text, str) else answers

    def generate(self, prompt: str, *, max_new_tokens: int | None = None, min_new_tokens: int = 0,
                 chat: bool = False, **options: Any) -> str:
        """The continuation of one source (``translate``'s options), under the language-model pipelines' name;
        ``chat=True`` is refused: a model trained on a task has no chat template."""
        _no_chat(chat)
        return self.translate(prompt, max_new_tokens=max_new_tokens, min_new_tokens=min_new_tokens, **options)

    def trace(self, text: str, *, temperature: float | None = None, top_k: int | None = None,
              top_p: float | None = None, seed: int | None = None, max_len: int | None = None,
              max_new_tokens: int | None = None, chat: bool = False, record_top_k: int = 5,
              ablate: Ablation | None = None, warn: bool = True,
              time_budget: float | None = DECODE_SECONDS) -> TranslationTrace:
        """Continue one source greedily (or by sampling) and record everything: a ``TranslationTrace`` whose
        ``src_*`` are the prompt (source tokens + SEP), ``output_*`` the continuation without EOS, ``steps`` the
        recorded decoding (a step's ``cross_attention``: the newest query over the prompt) and ``trace`` one
        forward over prompt + output (position t predicts id t + 1). ``max_len`` or ``max_new_tokens`` (the
        language-model pipelines' name): the new tokens' bound. ``chat=True`` is refused."""
        if not isinstance(text, str):
            raise TypeError(f"trace takes one string, got {type(text).__name__}")
        _no_chat(chat)
        if max_new_tokens is not None:
            if max_len is not None and max_len != max_new_tokens:
                raise ValueError("give max_len or max_new_tokens (the same bound), not both")
            max_len = max_new_tokens
        cleaned, ids, unknown, truncated = self.prompt(text, warn=warn)
        limit = self.output_limit(len(ids)) if max_len is None else max_len
        steps, trace = self._continue_traced(ids, limit, temperature=temperature, top_k=top_k, top_p=top_p,
                                             seed=seed, record_top_k=record_top_k, ablate=ablate, warn=warn,
                                             time_budget=time_budget)
        output_ids = steps.tokens[0]
        piece = self._tokenizer.id_to_piece
        return TranslationTrace(
            src_text=cleaned, src_pieces=[piece(i) for i in ids], src_ids=ids,
            output_text=self._tokenizer.decode(output_ids), output_pieces=[piece(i) for i in output_ids],
            output_ids=output_ids, finished=steps.finished[0], trace=trace, steps=steps, unknown_chars=unknown,
            truncated=truncated, timed_out=steps.timed_out)

    def _left_padded(self, rows: list[list[int]]) -> tuple[Tensor, Tensor]:
        """Prompts of several lengths as (B, P) ids padded on the left and their (B, P) attention mask."""
        longest = max(map(len, rows))
        ids = [[self.config.pad_id] * (longest - len(r)) + r for r in rows]
        mask = [[0] * (longest - len(r)) + [1] * len(r) for r in rows]
        return torch.tensor(ids, device=self.device), torch.tensor(mask, device=self.device)


def _no_chat(chat: bool) -> None:
    if chat:
        raise ValueError("this model was trained on a task and has no chat template: call with chat=False")
