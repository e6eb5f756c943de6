"""How well a model does on a split: teacher-forced loss and token accuracy, greedy outputs' exact match, BLEU, chrF."""

from __future__ import annotations

import threading

import torch

from ..decoding import greedy_decode
from ..network.model import Transformer
from ..text.ids import pad
from ..text.tokenizers import Tokenizer
from .batching import Examples, token_batches
from .loss import bleu_chrf, exact_match, label_smoothed_loss, token_accuracy_counts


@torch.no_grad()
def evaluate(
    model: Transformer,
    examples: Examples,
    tgt_tok: Tokenizer,
    *,
    smoothing: float,
    max_output_len: int,
    batch_tokens: int,
    device: torch.device,
    stop_event: threading.Event | None = None,
) -> dict[str, float]:
    """Teacher-forced loss and token accuracy, then greedy outputs scored by exact match, BLEU, chrF.

    Returns {} when stopped before the end.
    """
    was_training = model.training
    model.eval()
    loss_sum, correct, total = 0.0, 0, 0
    hypotheses = [""] * len(examples.src)
    try:
        for batch in token_batches(examples.sizes(), batch_tokens, shuffle=False):
            if stop_event is not None and stop_event.is_set():
                return {}
            pad_id = model.config.pad_id
            src = pad([examples.src[i] for i in batch], device, pad_id)
            tgt = pad([examples.tgt[i] for i in batch], device, pad_id)
            logits = model(src, tgt[:, :-1])
            loss_sum += float(label_smoothed_loss(logits, tgt[:, 1:], pad_id=pad_id, smoothing=smoothing,
                                                  reduction="sum"))
            c, t = token_accuracy_counts(logits, tgt[:, 1:], pad_id=pad_id)
            correct, total = correct + c, total + t
            decoded = greedy_decode(model, src, max_len=min(max_output_len, model.config.max_len))
            for i, tokens in zip(batch, decoded.tokens, strict=True):
                hypotheses[i] = tgt_tok.decode(tokens)
    finally:
        model.train(was_training)
    bleu, chrf = bleu_chrf(hypotheses, examples.references)
    return {"loss": loss_sum / max(total, 1), "token_accuracy": correct / max(total, 1),
            "exact_match": exact_match(hypotheses, examples.references), "bleu": bleu, "chrf": chrf}
