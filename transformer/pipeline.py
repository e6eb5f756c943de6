"""Text in, translation out: a trained model and its two tokenizers behind one object.

    from transformer import load_pretrained
    pipe = load_pretrained("pretrained/numbers-en-de")
    pipe.translate("three hundred and twelve")              # "dreihundertzwölf" (greedy)
    pipe.translate(["seven", "forty-one"])                  # a list in, a list out
    pipe.translate("seven", beam_size=4)                    # beam search
    pipe.translate("seven", temperature=0.8, top_k=5, seed=0)  # sampling (also top_p=)
    pipe.trace("seven")                                     # everything the app draws
    nllb = load_pretrained("nllb-200-distilled-600M", src_lang="eng_Latn", tgt_lang="deu_Latn")  # settable

How input text is treated (the same in ``translate`` and ``trace``):

- Control characters are stripped: tab, newline and carriage return become a space, any other character of
  Unicode category Cc (NUL, ESC, DEL, ...) is removed; then leading and trailing whitespace is removed.
- Text that is empty after that raises ValueError ("nothing to translate ...").
- Characters the source tokenizer never saw map to ``<unk>``; a ``UnknownCharactersWarning`` (a UserWarning)
  names them. The model was never trained on ``<unk>``, so expect a poor translation.
- The encoder reads the tokens then EOS, as in training (``text.ids.source_ids``), after the tokenizer's
  ``source_prefix`` where it has one (BART's ``<s>``; mBART-50's and NLLB's source language code). A source
  longer than that allows (``max_len - 1`` tokens, ``max_len`` being the positional table's size) is cut to
  ``max_len - 1`` tokens, EOS kept, with a ``TruncationWarning`` (a UserWarning).
- Every output is bounded (``output_limit``, ``output_bounds.py``): the training run's bound or the source
  length's, max_len, ``MAX_OUTPUT_TOKENS``; and every decoding by a time budget (``time_budget=``, default
  ``DECODE_SECONDS``), cut with a ``DecodingTimeoutWarning``.

A ``Pipeline`` keeps no per-call state: concurrent calls from several threads are safe, and the model is never
modified (it must be in eval mode).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

import torch
from torch import Tensor

from .checkpoints.checkpoint import Checkpoint, CheckpointError, load_checkpoint
from .decoding import greedy_decode, pick_strategy, sample
from .decoding.batch import decode_batch, or_one
from .hub.folder import is_hf_folder
from .hub.generation import beam_options
from .hub.languages import LanguageChoice, check_language, default_languages
from .input_warnings import OutOfDomainWarning, TruncationWarning, UnknownCharactersWarning
from .network.config import TransformerConfig
from .network.model import Ablation, Transformer
from .network.trace import Trace
from .output_bounds import DECODE_SECONDS, DecodingTimeoutWarning, output_bound, timeout_message
from .text.cleaning import clean_text
from .text.domains import domain_warnings
from .text.ids import pad
from .text.tokenizers import Tokenizer
from .translation_trace import TranslationTrace

if TYPE_CHECKING:
    from .lm_pipeline import LMPipeline
    from .task_lm import TaskLMPipeline

# Where shipped models live: load_pretrained("numbers-en-de") also finds them by name.
PRETRAINED_DIR = Path(__file__).resolve().parent.parent / "pretrained"



class Pipeline(LanguageChoice):
    """A model, its source and target tokenizers, its config and its training meta."""

    kind = "encoder-decoder"  # a decoder-only language model's pipeline (lm_pipeline.LMPipeline) says "decoder"

    def __init__(
        self,
        model: Transformer,
        src_tokenizer: Tokenizer,
        tgt_tokenizer: Tokenizer,
        *,
        meta: dict[str, Any] | None = None,
        src_lang: str | None = None,
        tgt_lang: str | None = None,
    ) -> None:
        """Wrap an in-memory model (e.g. one just trained); it must be in eval mode to translate. ``src_lang`` /
        ``tgt_lang``: a multilingual model's language codes (default: its tokenizer_config.json's, else English ->
        German); ValueError for a code it does not know, or for any code when the model has none."""
        config = model.config
        for side, tokenizer, size in (("source", src_tokenizer, config.src_vocab_size),
                                      ("target", tgt_tokenizer, config.tgt_vocab_size)):
            if tokenizer.vocab_size != size:
                raise ValueError(
                    f"the {side} tokenizer has {tokenizer.vocab_size} tokens but the model expects {size}"
                )
        for name in ("pad_id", "unk_id", "eos_id", "bos_id"):
            if getattr(tgt_tokenizer, name) != getattr(config, name):
                raise ValueError(f"the target tokenizer's {name} is {getattr(tgt_tokenizer, name)} but the model's "
                                 f"is {getattr(config, name)}")
            if name != "bos_id" and getattr(src_tokenizer, name) != getattr(config, name):
                raise ValueError(f"the source tokenizer's {name} is {getattr(src_tokenizer, name)} but the model's "
                                 f"is {getattr(config, name)}")
        self._model = model
        self._src_tokenizer = src_tokenizer
        self._tgt_tokenizer = tgt_tokenizer
        self._meta = dict(meta or {})
        default_src, default_tgt = default_languages(tgt_tokenizer, self._meta)
        self._src_lang = check_language(src_lang or default_src, src_tokenizer, "source")
        self.tgt_lang = tgt_lang or default_tgt  # also checks the folder's decoding rules (generation_rules)

    @classmethod
    def from_checkpoint(cls, checkpoint: Checkpoint, *, src_lang: str | None = None,
                        tgt_lang: str | None = None) -> Pipeline:
        """A pipeline over a loaded ``Checkpoint`` (see ``checkpoint.load_checkpoint``)."""
        return cls(checkpoint.model, checkpoint.src_tokenizer, checkpoint.tgt_tokenizer, meta=checkpoint.meta,
                   src_lang=src_lang, tgt_lang=tgt_lang)

    # -- what the app reads -------------------------------------------------------------

    @property
    def model(self) -> Transformer:
        return self._model

    @property
    def src_tokenizer(self) -> Tokenizer:
        return self._src_tokenizer

    @property
    def tgt_tokenizer(self) -> Tokenizer:
        return self._tgt_tokenizer

    @property
    def config(self) -> TransformerConfig:
        return self._model.config

    @property
    def meta(self) -> dict[str, Any]:
        """Training meta from the checkpoint (task, options, metrics, ...); {} for an in-memory model."""
        return self._meta

    @property
    def device(self) -> torch.device:
        return next(self._model.parameters()).device

    def __repr__(self) -> str:
        task = self._meta.get("task", "?")
        return (f"Pipeline(task={task!r}, src={self._src_tokenizer!r}, tgt={self._tgt_tokenizer!r}, "
                f"parameters={self._model.num_parameters():,})")

    # -- text <-> ids -------------------------------------------------------------------

    def source_ids(self, text: str, *, warn: bool = True) -> tuple[str, list[int], list[str], bool]:
        """Clean and tokenize one source text: (cleaned text, ids, unknown characters, truncated).

        The ids are what training fed the encoder (``text.ids.source_ids``): the tokens, then
        EOS. Warns (``UnknownCharactersWarning``, ``TruncationWarning``) as the module
        docstring says, unless ``warn=False``: a caller that reports the returned flags itself
        (the app) asks for no warning instead of filtering warnings, which is process-wide.
        """
        cleaned = clean_text(text)
        prefix = self.source_prefix()
        tokens = self._src_tokenizer.encode(cleaned)
        if warn:
            for problem in self._domain_problems(cleaned, len(tokens) + 1):
                warnings.warn(problem, OutOfDomainWarning, stacklevel=3)
        unknown: list[str] = []
        unk = self.config.unk_id
        if unk in tokens:
            unknown = [c for c in dict.fromkeys(cleaned) if not c.isspace() and unk in self._src_tokenizer.encode(c)]
            shown = ", ".join(repr(c) for c in unknown) or "(some characters)"
            if warn:
                warnings.warn(f"characters unknown to the source tokenizer became <unk>: {shown}",
                              UnknownCharactersWarning, stacklevel=3)
        if not tokens:  # e.g. a SentencePiece model that maps the whole text to nothing
            raise ValueError(f"nothing to translate: {cleaned!r} gives no source tokens")
        limit = self.config.max_len - 1 - len(prefix)  # room for the prefix and EOS
        truncated = len(tokens) > limit
        if truncated:
            if warn:
                warnings.warn(f"the source has {len(tokens) + 1} tokens with EOS, more than the model's max_len "
                              f"({self.config.max_len}): only the first {limit} tokens are translated",
                              TruncationWarning, stacklevel=3)
            tokens = tokens[:limit]
        return cleaned, [*prefix, *tokens, self.config.eos_id], unknown, truncated

    def domain_warnings(self, text: str) -> list[str]:
        """How ``text`` leaves the domain the model was trained on (built-in tasks only; see ``text.domains``):
        numbers beyond the range, dates that do not exist or lie outside the years, strings too long or with
        characters never seen, words outside the grammar; and, for any model whose run saved it (``longest_source``),
        a source longer than every training source. An empty list when it does not."""
        try:
            cleaned = clean_text(text)
        except ValueError:  # empty: nothing lies outside anything (translating it says why it cannot)
            return []
        return self._domain_problems(cleaned)

    def _domain_problems(self, cleaned: str, length: int | None = None) -> list[str]:
        """``domain_warnings`` of a cleaned text whose length in tokens with EOS (as training counted them) is
        ``length``, when the caller has it (else it is counted here, if the model's run saved a longest source)."""
        meta = self._meta
        problems = domain_warnings(meta.get("task"), cleaned, src_lang=meta.get("src_lang", "en"),
                                   options=meta.get("task_options") or {})
        longest = meta.get("longest_source")
        if isinstance(longest, int) and not problems:  # a grammar's problem says more than the length
            length = length if length is not None else len(self._src_tokenizer.encode(cleaned)) + 1
            if length > longest:
                problems.append(f"it is {length} tokens long (with </s>); the longest source the model was trained "
                                f"on had {longest}: past its training lengths a model often fails")
        return problems

    @property
    def max_output_len(self) -> int:
        """Bound on output tokens whatever the source: the training run's ``max_output_len`` if it saved one,
        else max_len; at most ``output_bounds.MAX_OUTPUT_TOKENS``."""
        saved, limit = self._meta.get("max_output_len"), self.config.max_len
        return output_bound(min(saved, limit) if isinstance(saved, int) and saved > 0 else limit, self._meta, None)

    def output_limit(self, src_len: int) -> int:
        """Bound on the output tokens of a source of ``src_len`` ids (</s> included): ``max_output_len``, and
        ``LENGTH_FACTOR * src_len + LENGTH_EXTRA`` unless the model saved a bound from its training data."""
        return output_bound(self.max_output_len, self._meta, src_len)

    def encode_source(self, texts: str | list[str], *, warn: bool = True) -> Tensor:
        """Source texts -> (B, S) int64 ids padded with PAD, on the model's device (``warn``: see ``source_ids``)."""
        batch = [texts] if isinstance(texts, str) else list(texts)
        rows = [self.source_ids(text, warn=warn)[1] for text in batch]
        return pad(rows, self.device, self.config.pad_id)

    # -- translation --------------------------------------------------------------------

    @overload
    def translate(self, text: str, **options: Any) -> str: ...
    @overload
    def translate(self, text: list[str], **options: Any) -> list[str]: ...

    def translate(
        self,
        text: str | list[str],
        *,
        beam_size: int | None = None,
        length_penalty: float | None = None,
        early_stopping: bool | str | None = None,
        length_norm: str | None = None,
        temperature: float | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        max_len: int | None = None,
        max_new_tokens: int | None = None,
        ablate: Ablation | None = None,
        time_budget: float | None = DECODE_SECONDS,
    ) -> str | list[str]:
        """Translate one text (-> str) or a list of texts (-> list of str, same order).

        Greedy by default; ``beam_size=N`` runs beam search (``decoding.beam_search``); ``length_penalty``,
        ``early_stopping``, ``length_norm`` left None take the model's (``hub.generation.beam_options``): GNMT's
        0.6, searching until no live beam can beat the N-th best finished one (``early_stopping=True`` stops once
        N have finished: faster, but a confident model's early-ended junk can fill the N places), for our models;
        a Hugging Face folder's own values with ``transformers``' rule ("hf": log P / length ** α), so that the
        output is ``generate(num_beams=N)``'s;
        any of ``temperature``/``top_k``/``top_p`` samples (``seed`` makes it reproducible;
        a batch is sampled as one, so a sentence's sample depends on its batch). Beam search
        and sampling together raise ValueError, as does an empty text or a bad option.
        ``max_len`` bounds the output tokens (default ``output_limit`` of the longest source; at most the model's
        max_len). ``max_new_tokens``: the same bound under ``transformers``' name (the tokens generated after the
        decoder's start, EOS and a forced language code included). ``time_budget`` (seconds; None: none) cuts
        decoding with a ``DecodingTimeoutWarning``. A model's decoding rules (a forced first token such as the
        target language's code, a forced EOS at the bound, forbidden tokens) apply to every strategy.
        """
        if max_new_tokens is not None:
            if max_len is not None and max_len != max_new_tokens:
                raise ValueError("give max_len or max_new_tokens (the same bound), not both")
            max_len = max_new_tokens
        texts = [text] if isinstance(text, str) else text
        if not isinstance(texts, list | tuple) or not texts:
            raise ValueError("translate needs a string or a non-empty list of strings")
        for i, item in enumerate(texts):
            if not isinstance(item, str):
                raise TypeError(f"text {i} is a {type(item).__name__}, not a string")
        rows = []
        for i, item in enumerate(texts):
            try:
                rows.append(self.source_ids(item)[1])
            except ValueError as error:
                if len(texts) == 1:
                    raise
                raise ValueError(f"text {i} of {len(texts)}: {error}") from None
        src_ids = pad(rows, self.device, self.config.pad_id)
        max_len = self.output_limit(src_ids.size(1)) if max_len is None else max_len
        beam = beam_options(self._meta, length_penalty=length_penalty, early_stopping=early_stopping,
                            length_norm=length_norm)
        outputs, timed_out = decode_batch(self._model, src_ids, beam_size=beam_size, **beam, temperature=temperature,
                                          top_k=top_k, top_p=top_p, seed=seed, max_len=max_len, ablate=ablate,
                                          time_budget=time_budget, rules=self._rules)
        if timed_out:
            warnings.warn(timeout_message(time_budget), DecodingTimeoutWarning, stacklevel=2)
        translations = [self._tgt_tokenizer.decode(ids) for ids in outputs]
        return translations[0] if isinstance(text, str) else translations

    def trace(
        self,
        text: str,
        *,
        temperature: float | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        max_len: int | None = None,
        record_top_k: int = 5,
        ablate: Ablation | None = None,
        warn: bool = True,
        time_budget: float | None = DECODE_SECONDS,
    ) -> TranslationTrace:
        """Translate one text greedily (or by sampling) and record everything: see ``TranslationTrace``.

        ``max_len``: default ``output_limit`` of the source, within the traced forward's positions.
        ``time_budget``: as in ``translate``. ``warn=False``: no warnings; ``unknown_chars``, ``truncated`` and
        ``timed_out`` of the result say the same."""
        if not isinstance(text, str):
            raise TypeError(f"trace takes one string, got {type(text).__name__}")
        cleaned, ids, unknown, truncated = self.source_ids(text, warn=warn)
        src_ids = pad([ids], self.device, self.config.pad_id)  # (1, S)
        # Default: room for BOS + the whole output in the traced forward's positional table.
        max_len = min(self.output_limit(len(ids)), max(1, self.config.max_len - 1)) if max_len is None else max_len
        strategy = pick_strategy(beam_size=None, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
        if strategy == "greedy":
            steps = greedy_decode(self._model, src_ids, max_len=max_len, record=True, record_top_k=record_top_k,
                                  ablate=ablate, time_budget=time_budget, rules=self._rules)
        else:
            steps = sample(self._model, src_ids, max_len=max_len, temperature=or_one(temperature),
                           top_k=top_k, top_p=top_p, seed=seed, record=True, record_top_k=record_top_k, ablate=ablate,
                           time_budget=time_budget, rules=self._rules)
        if steps.timed_out and warn:
            warnings.warn(timeout_message(time_budget), DecodingTimeoutWarning, stacklevel=2)
        output_ids = steps.tokens[0]
        # The positional table holds max_len positions: with max_len=config.max_len and no EOS,
        # the last output token is left out of the traced forward.
        decoder_ids = [self.config.bos_id, *output_ids][: self.config.max_len]
        trace = Trace()
        with torch.inference_mode():
            self._model(src_ids, torch.tensor([decoder_ids], device=self.device), trace=trace, ablate=ablate)
        return TranslationTrace(
            src_text=cleaned,
            src_pieces=[self._src_tokenizer.id_to_piece(i) for i in ids],
            src_ids=ids,
            output_text=self._tgt_tokenizer.decode(output_ids),
            output_pieces=[self._tgt_tokenizer.id_to_piece(i) for i in output_ids],
            output_ids=output_ids,
            finished=steps.finished[0],
            trace=trace,
            steps=steps,
            unknown_chars=unknown,
            truncated=truncated,
            timed_out=steps.timed_out,
        )


def load_pretrained(folder: str | os.PathLike, *, step: int | None = None, device: str = "cpu",
                    src_lang: str | None = None, tgt_lang: str | None = None,
                    dtype: torch.dtype | None = None) -> Pipeline | LMPipeline | TaskLMPipeline:
    """A ``Pipeline`` over the checkpoint folder written by training (``python -m transformer.train``; a decoder-only
    run's: a ``task_lm.TaskLMPipeline``), or over a Hugging Face folder of a supported family (``transformer.hub``;
    a decoder-only one, GPT-2, Llama, Mistral, Qwen2/3, Gemma-2/3: an ``LMPipeline``, ``kind == "decoder"``).

    ``folder`` is a path, or the name of a folder under ``pretrained/`` ("numbers-en-de", "opus-mt-en-de").
    ``step`` picks a training snapshot instead of the final weights. ``src_lang`` / ``tgt_lang``: a multilingual
    model's language codes (``Pipeline``). ``dtype``: float32 by default; torch.float16 / torch.bfloat16 keep half
    weights (a Hugging Face model is refused, with the figures, when it would not fit in the memory free). A folder
    that is not a checkpoint raises ``CheckpointError`` (a ValueError) saying what is missing.
    """
    path = Path(folder)
    if not path.exists() and not path.is_absolute() and (PRETRAINED_DIR / path).is_dir():
        path = PRETRAINED_DIR / path
    if not path.exists():
        raise CheckpointError(f"no checkpoint folder at {path}")
    if not path.is_dir():
        raise CheckpointError(f"{path} is a file, not a checkpoint folder")
    if is_hf_folder(path):  # a Hugging Face folder (config.json with a model_type): Marian, or a clear refusal
        if step is not None:
            raise CheckpointError(f"{path}: a Hugging Face folder has no training snapshots (step={step})")
        from .hub.load import load_hf

        checkpoint = load_hf(path, device=device, dtype=dtype)
        if checkpoint.config.decoder_only:  # GPT-2, Llama, Mistral, Qwen, Gemma: a prompt continued
            if src_lang is not None or tgt_lang is not None:
                raise CheckpointError(f"{path}: a decoder-only language model has no source or target language")
            from .lm_pipeline import LMPipeline
            return LMPipeline.from_checkpoint(checkpoint)
        return Pipeline.from_checkpoint(checkpoint, src_lang=src_lang, tgt_lang=tgt_lang)
    checkpoint = load_checkpoint(path, step=step, device=device)
    if dtype is not None:
        checkpoint.model.to(dtype)
    if checkpoint.config.decoder_only:  # trained here as a decoder-only model on a task: its own pipeline
        from .task_lm import TaskLMPipeline
        return TaskLMPipeline.from_checkpoint(checkpoint)
    return Pipeline.from_checkpoint(checkpoint, src_lang=src_lang, tgt_lang=tgt_lang)


__all__ = ["DecodingTimeoutWarning", "OutOfDomainWarning", "Pipeline", "TranslationTrace", "TruncationWarning",
           "UnknownCharactersWarning", "clean_text", "load_pretrained"]
