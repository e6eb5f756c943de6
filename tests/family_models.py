"""Tiny ``transformers`` models of each family, built in the tests (no network), and ours built from them.

Every parameter and buffer is drawn at random from a private generator (so a mis-mapped weight cannot hide
behind an initialisation of ones or zeros), every norm's weight near 1 and bias near 0 but away from both, in
float64. ``transformers`` is the test-only reference; ours is built the way the package does it:
``config_of(hf_config.to_dict())``, ``Transformer(config)``, ``weights_of(hf_model.state_dict(), config)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from transformer.checkpoints.checkpoint import load_weights
from transformer.hub import mapping
from transformer.hub.families import bart, m2m_100, mbart, t5
from transformer.hub.family_config import Family
from transformer.network.model import Transformer

VOCAB = 40


@dataclass
class Pair:
    """One family's reference model and ours, with the family whose tables joined them."""

    name: str
    module: Family
    reference: torch.nn.Module  # AutoModelForSeq2SeqLM, eager attention, float64, eval
    ours: Transformer  # float64, eval


def reference_config(name: str):  # noqa: ANN201  (a transformers config)
    """The tiny ``transformers`` config of one family (heads of 3 in d_model 16 for T5: d_kv is its own)."""
    from transformers import BartConfig, M2M100Config, MBartConfig, T5Config

    common = dict(vocab_size=VOCAB, d_model=16, encoder_layers=2, decoder_layers=3, encoder_attention_heads=2,
                  decoder_attention_heads=2, encoder_ffn_dim=24, decoder_ffn_dim=24, max_position_embeddings=40,
                  pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2, dropout=0.0,
                  attention_dropout=0.0, activation_dropout=0.0)
    t5_common = dict(vocab_size=VOCAB, d_model=16, d_kv=4, d_ff=24, num_layers=2, num_decoder_layers=3,
                     num_heads=3, relative_attention_num_buckets=8, relative_attention_max_distance=12,
                     dropout_rate=0.0, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    configs = {
        "t5": lambda: T5Config(**t5_common, feed_forward_proj="relu"),
        "t5-v1.1": lambda: T5Config(**t5_common, feed_forward_proj="gated-gelu", tie_word_embeddings=False),
        "bart": lambda: BartConfig(**common, scale_embedding=False, activation_function="gelu"),
        "mbart": lambda: MBartConfig(**common, scale_embedding=True, activation_function="gelu"),
        "m2m100": lambda: M2M100Config(**common, scale_embedding=True, activation_function="relu"),
    }
    config = configs[name]()
    config._attn_implementation = "eager"  # attention weights as the equation reads, for output_attentions
    return config


MODULES = {"t5": t5.FAMILY, "t5-v1.1": t5.FAMILY, "bart": bart.FAMILY, "mbart": mbart.FAMILY, "m2m100": m2m_100.FAMILY}
NAMES = tuple(MODULES)


def randomize(model: torch.nn.Module, seed: int) -> None:
    """Every parameter and floating buffer drawn anew: norms 1 + N(0, 0.1^2) and N(0, 0.1^2), others N(0, 0.3^2)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
            if not tensor.dtype.is_floating_point or name.endswith("embed_positions.weights"):
                continue  # M2M100's sinusoid is a function of the sizes, not a weight
            noise = torch.randn(tensor.shape, generator=generator, dtype=torch.float64)
            if "norm" in name and name.endswith("weight"):
                tensor.copy_(1 + 0.1 * noise)
            elif "norm" in name:
                tensor.copy_(0.1 * noise)
            else:
                tensor.copy_(0.3 * noise)


def build_pair(name: str, seed: int = 0) -> Pair:
    """The reference model of ``name`` with random weights, and ours from its config and state dict."""
    from transformers import AutoModelForSeq2SeqLM

    with torch.random.fork_rng():  # transformers initialises from the global generator: keep it unchanged
        reference = AutoModelForSeq2SeqLM.from_config(reference_config(name))
    if name == "t5-v1.1":  # its own lm_head, as from_pretrained keeps a Flan-T5 file's (transformers 5 would tie it)
        reference.lm_head.weight = torch.nn.Parameter(reference.lm_head.weight.detach().clone())
    randomize(reference, seed)
    reference = reference.double().eval()
    module = MODULES[name]
    config = module.config_of(reference.config.to_dict())
    with torch.device("meta"):
        ours = Transformer(config)
    ours.to_empty(device="cpu")
    ours.tie_weights()
    ours = ours.double()
    load_weights(ours, mapping.weights_of(module, reference.state_dict(), config), where=name)
    return Pair(name, module, reference, ours.eval())


def batch(pair: Pair, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """(src (3, 9), decoder input (3, 7)): ids of the vocabulary's ordinary pieces, padded at the end of two
    rows on each side; the decoder input starts with the model's start id."""
    c = pair.ours.config
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(4, VOCAB, (3, 9), generator=generator)
    tgt = torch.randint(4, VOCAB, (3, 7), generator=generator)
    src[:, -1] = c.eos_id
    src[1, 6:], src[2, 4:] = c.pad_id, c.pad_id
    src[1, 5], src[2, 3] = c.eos_id, c.eos_id
    tgt[:, 0] = c.bos_id
    tgt[1, 5:], tgt[2, 2:] = c.pad_id, c.pad_id
    return src, tgt
