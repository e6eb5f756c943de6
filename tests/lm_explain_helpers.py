"""What tests/test_explain_lm*.py share: the families, a prompt and continuation batch, and the model run by hand.

"By hand" is ``model.lm`` on the whole sequence prompt + continuation, read at the position that predicts each
continuation token: the independent computation every decoder-only explanation is held against.
"""

from __future__ import annotations

import torch

from transformer.explain.pairs import lm_pair

# GPT-2 (learned positions, LayerNorm, biases), Llama (RoPE with llama3 scaling, GQA, SwiGLU), Qwen3 (q/k norms),
# Gemma-2 (sandwich norms, soft-capped scores and logits, sliding windows, (1 + w) RMSNorm)
NAMES = ("gpt2", "llama", "qwen3", "gemma2")
P, N = 6, 4  # prompt and continuation lengths of ``inputs``


def inputs() -> tuple[torch.Tensor, torch.Tensor]:
    """src (2, P) and tgt (2, N + 1): row 1's prompt left-padded by 2, its continuation right-padded by 1 (pad 0;
    ids from 3 up, clear of pad, bos and eos)."""
    generator = torch.Generator().manual_seed(5)
    prompt = torch.randint(3, 48, (2, P), generator=generator)
    continuation = torch.randint(3, 48, (2, N), generator=generator)
    prompt[1, :2], continuation[1, -1] = 0, 0
    return lm_pair(prompt, continuation)


def tolerance(model) -> float:  # noqa: ANN001
    """Of a float64 model: 1e-9 where every step is float64 (GPT-2: a few thousand roundings of 2^-53 ≈ 1e-16
    each). The rotary families' norms (norms.py) and softmax (``softmax_float32``) round to float32 as
    ``transformers`` does, 2^-24 ≈ 6e-8 relatively: two computations in another order (batched, vmapped, by hand)
    may round each of those ~10 steps apart, and log-probabilities and gradients of size ~10 then differ by up to
    ~10 · 10 · 6e-8 = 6e-6: 1e-5."""
    c = model.config
    return 1e-9 if c.norm == "layer" and not c.softmax_float32 else 1e-5


def sequence(src: torch.Tensor, tgt: torch.Tensor, b: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Sentence b's ids as the model reads them, (1, P + N - 1) (its last token predicts nothing), and its mask."""
    ids = torch.cat([src[b:b + 1], tgt[b:b + 1, 1:-1]], dim=1)
    real = ids != 0
    return ids, None if bool(real.all()) else real


def log_probs_by_hand(model, src: torch.Tensor, tgt: torch.Tensor, b: int, ids: torch.Tensor | None = None
                      ) -> torch.Tensor:  # noqa: ANN001
    """log P(tgt[b, t+1]) for every row t by ``model.lm`` on the whole sequence (``ids`` in place of sentence b's
    own, e.g. with a token occluded): (N,)."""
    own, mask = sequence(src, tgt, b)
    ids = own if ids is None else ids
    logits = model.lm(ids, attention_mask=mask)[0, P - 1:]  # (N, V): position P - 1 + t predicts token t + 1
    return torch.log_softmax(logits, -1).gather(-1, tgt[b, 1:, None])[:, 0]
