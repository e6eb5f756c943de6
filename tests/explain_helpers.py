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


def perturb_norms(model: Transformer, seed: int = 1) -> Transformer:
    """Every LayerNorm's γ and β moved off their initial 1 and 0 (γ = 1 + 0.5 N(0, 1), β = 0.3 N(0, 1)), in place,
    from a local generator: formulas that confuse LN(x) with x, or forget γ or β, then fail."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.copy_(1 + 0.5 * torch.randn(module.weight.shape, generator=generator,
                                                          dtype=module.weight.dtype))
                module.bias.copy_(0.3 * torch.randn(module.bias.shape, generator=generator, dtype=module.bias.dtype))
    return model


def t5_model(seed: int = 0) -> Transformer:
    """A random float64 T5 v1.1 network (hub.t5's switches: pre-RMSNorm, no biases, no 1/sqrt(d_k), a relative
    position bias per head, heads of 3 x 4 in d_model 8, gated gelu), every weight (the norms' too) drawn from
    a local generator, in eval mode. Its pad id is 0, as ``batch`` pads."""
    from transformer.hub.families import t5

    config = t5.config_of({"model_type": "t5", "vocab_size": 12, "d_model": 8, "d_kv": 4, "num_heads": 3,
                           "num_layers": 2, "d_ff": 16, "feed_forward_proj": "gated-gelu", "dropout_rate": 0.0,
                           "relative_attention_num_buckets": 8, "relative_attention_max_distance": 12,
                           "tie_word_embeddings": False, "decoder_start_token_id": 2})
    with torch.device("meta"):
        model = Transformer(config)
    model.to_empty(device="cpu")
    model.tie_weights()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            parameter.copy_(1 + 0.3 * noise if "norm" in name else 0.5 * noise)
    return model.double().eval()
