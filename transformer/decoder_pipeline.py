"""What every decoder-only pipeline holds: the model, its one tokenizer (the prompt's and the continuation's) and
its meta, checked to fit each other. ``lm_pipeline.LMPipeline`` (a Hugging Face folder) and
``task_lm.TaskLMPipeline`` (a model trained here on a task) build on it; both say ``kind == "decoder"``.
"""

from __future__ import annotations

import warnings
from typing import Any, Self

import torch

from .checkpoints.checkpoint import Checkpoint
from .decoding import pick_strategy
from .decoding.batch import or_one
from .decoding.lm import lm_greedy, lm_sample
from .decoding.records import DecodeResult
from .network.config import TransformerConfig
from .network.model import Ablation, Transformer
from .network.trace import Trace
from .output_bounds import DecodingTimeoutWarning, timeout_message
from .text.tokenizers import Tokenizer


class DecoderOnlyPipeline:
    """A decoder-only model, its tokenizer and its meta; ValueError at construction when they do not fit."""

    kind = "decoder"

    def __init__(self, model: Transformer, tokenizer: Tokenizer, *, meta: dict[str, Any] | None = None) -> None:
        if not model.config.decoder_only:
            raise ValueError(f"{type(self).__name__} wraps a decoder-only model; an encoder-decoder is a Pipeline")
        if tokenizer.vocab_size != model.config.tgt_vocab_size:
            raise ValueError(f"the tokenizer has {tokenizer.vocab_size} ids but the model "
                             f"{model.config.tgt_vocab_size}")
        self._model, self._tokenizer, self._meta = model, tokenizer, dict(meta or {})

    @classmethod
    def from_checkpoint(cls, checkpoint: Checkpoint) -> Self:
        """A pipeline over a loaded checkpoint (its ``tgt`` tokenizer: the one vocabulary)."""
        return cls(checkpoint.model, checkpoint.tgt_tokenizer, meta=checkpoint.meta)

    @property
    def model(self) -> Transformer:
        return self._model

    @property
    def tokenizer(self) -> Tokenizer:
        """The one vocabulary (``src_tokenizer`` and ``tgt_tokenizer`` are this same object)."""
        return self._tokenizer

    src_tokenizer = tgt_tokenizer = tokenizer  # one vocabulary: the prompt's and the continuation's

    @property
    def config(self) -> TransformerConfig:
        return self._model.config

    @property
    def meta(self) -> dict[str, Any]:
        """The checkpoint's meta (a folder's source and model_type, a training run's task and metrics)."""
        return self._meta

    @property
    def device(self) -> torch.device:
        return next(self._model.parameters()).device

    def _continue_traced(self, ids: list[int], bound: int, *, eos_id: list[int] | None = None,
                         temperature: float | None = None, top_k: int | None = None, top_p: float | None = None,
                         seed: int | None = None, record_top_k: int = 5, ablate: Ablation | None = None,
                         warn: bool = True, time_budget: float | None = None) -> tuple[DecodeResult, Trace]:
        """What both pipelines' ``trace`` do once the prompt is ids: continue ``ids`` by up to ``bound`` tokens,
        greedily (or by sampling where any of the sampling options is given), recording every step (a timed-out
        decoding warned of with ``warn``), then one forward over prompt + continuation (cut to the model's
        ``max_len``) into a ``Trace``. ``eos_id`` None: the model's."""
        prompt = torch.tensor([ids], device=self.device)  # (1, P)
        common = dict(max_new_tokens=bound, eos_id=eos_id, record=True, record_top_k=record_top_k, ablate=ablate,
                      time_budget=time_budget)
        if pick_strategy(beam_size=None, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed) == "greedy":
            steps = lm_greedy(self._model, prompt, **common)
        else:
            steps = lm_sample(self._model, prompt, temperature=or_one(temperature), top_k=top_k, top_p=top_p,
                              seed=seed, **common)
        if steps.timed_out and warn:  # stacklevel 3: the caller of the pipeline's ``trace``
            warnings.warn(timeout_message(time_budget), DecodingTimeoutWarning, stacklevel=3)
        trace = Trace()
        with torch.inference_mode():
            self._model.lm(torch.tensor([[*ids, *steps.tokens[0]][: self.config.max_len]], device=self.device),
                           trace=trace, ablate=ablate)
        return steps, trace
