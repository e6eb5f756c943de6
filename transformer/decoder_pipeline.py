"""What every decoder-only pipeline holds: the model, its one tokenizer (the prompt's and the continuation's) and
its meta, checked to fit each other. ``lm_pipeline.LMPipeline`` (a Hugging Face folder) and
``task_lm.TaskLMPipeline`` (a model trained here on a task) build on it; both say ``kind == "decoder"``.
"""

from __future__ import annotations

from typing import Any, Self

import torch

from .checkpoints.checkpoint import Checkpoint
from .network.config import TransformerConfig
from .network.model import Transformer
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
