"""How well a model does on a split: teacher-forced loss and token accuracy, greedy outputs' exact match, BLEU, chrF."""

from __future__ import annotations

import threading

import torch

from ..decoding import greedy_decode
from ..decoding.lm import lm_greedy
from ..network.model import Transformer
from ..text.tokenizers import Tokenizer
from .batching import Examples, batch_tensors, token_batches
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
            src, inputs, labels = batch_tensors(examples, batch, device, pad_id)
            logits = model(src, inputs)
            loss_sum += float(label_smoothed_loss(logits, labels, pad_id=pad_id, smoothing=smoothing,
                                                  reduction="sum"))
            c, t = token_accuracy_counts(logits, labels, pad_id=pad_id)
            correct, total = correct + c, total + t
            outputs = _greedy(model, examples, batch, src, max_output_len, device)
            for i, tokens in zip(batch, outputs, strict=True):
                hypotheses[i] = tgt_tok.decode(tokens)
    finally:
        model.train(was_training)
    bleu, chrf = bleu_chrf(hypotheses, examples.references)
    return {"loss": loss_sum / max(total, 1), "token_accuracy": correct / max(total, 1),
            "exact_match": exact_match(hypotheses, examples.references), "bleu": bleu, "chrf": chrf}


def _greedy(model: Transformer, examples: Examples, batch: list[int], src: torch.Tensor | None, max_output_len: int,
            device: torch.device) -> list[list[int]]:
    """Greedy outputs of a batch: decoded from the source, or (decoder-only) continued from the prompts, left-padded
    with their attention mask, within the model's positions."""
    if src is not None:
        return greedy_decode(model, src, max_len=min(max_output_len, model.config.max_len)).tokens
    prompts = [examples.src[i] for i in batch]
    longest = max(map(len, prompts))
    ids = torch.tensor([[model.config.pad_id] * (longest - len(p)) + p for p in prompts], device=device)
    mask = torch.tensor([[0] * (longest - len(p)) + [1] * len(p) for p in prompts], device=device)
    room = min(max_output_len, model.config.max_len - longest)
    return lm_greedy(model, ids, attention_mask=mask, max_new_tokens=max(room, 1)).tokens
