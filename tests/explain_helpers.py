"""Tiny seeded models and inputs shared by the tests/test_explain_*.py files."""

from __future__ import annotations

import torch

from transformer.network.config import TransformerConfig
from transformer.network.model import Transformer


def tiny_model(*, n_encoder_layers: int = 2, n_decoder_layers: int = 2, n_heads: int = 2, d_model: int = 8,
               vocab: int = 12, norm_first: bool = False, seed: int = 0) -> Transformer:
    """A random float64 model in eval mode, built without touching the global RNG's state."""
    config = TransformerConfig(src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=d_model, n_heads=n_heads,
                               n_layers=n_encoder_layers, n_encoder_layers=n_encoder_layers,
                               n_decoder_layers=n_decoder_layers, d_ff=2 * d_model, dropout=0.0, max_len=32,
                               norm_first=norm_first)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return Transformer(config).double().eval()


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Two sentences, the second with source and target padding: src (2, 5), tgt (2, 5)."""
    src = torch.tensor([[5, 6, 7, 8, 3], [9, 4, 3, 0, 0]])
    tgt = torch.tensor([[2, 8, 7, 6, 3], [2, 4, 3, 0, 0]])
    return src, tgt
