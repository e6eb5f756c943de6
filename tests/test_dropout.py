"""Dropout with a training run's own generator (train/dropout.py) against PyTorch's dropout."""

from __future__ import annotations

import torch

from transformer import Transformer, TransformerConfig
from transformer.train.dropout import GeneratorDropout, dropout, use_dropout_generator


def test_keeps_one_minus_p_and_scales_by_its_inverse() -> None:
    x = torch.ones(200_000)
    out = dropout(x, 0.3, torch.Generator().manual_seed(0))
    kept = out != 0
    assert abs(kept.float().mean().item() - 0.7) < 0.005  # 0.7 +- 5 standard deviations of 0.001
    assert torch.allclose(out[kept], torch.full_like(out[kept], 1 / 0.7))
    assert abs(out.mean().item() - 1.0) < 0.01  # inverted dropout: the expectation is unchanged


def test_same_generator_seed_same_mask_and_the_global_generator_untouched() -> None:
    x = torch.randn(64, 32)
    state = torch.random.get_rng_state()
    first = dropout(x, 0.5, torch.Generator().manual_seed(7))
    second = dropout(x, 0.5, torch.Generator().manual_seed(7))
    assert torch.equal(first, second)
    assert torch.equal(torch.random.get_rng_state(), state)


def test_without_a_generator_it_is_nn_dropout() -> None:
    x = torch.randn(16, 8)
    ours, theirs = GeneratorDropout(0.25), torch.nn.Dropout(0.25)
    with torch.random.fork_rng():
        torch.manual_seed(3)
        a = ours(x)
        torch.manual_seed(3)
        b = theirs(x)
    assert torch.equal(a, b)
    assert torch.equal(ours.eval()(x), x)


def test_the_model_draws_every_mask_from_its_generator() -> None:
    config = TransformerConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=16, n_heads=2, n_layers=1, d_ff=32,
                               dropout=0.3)
    model = Transformer(config).train()
    src, tgt = torch.randint(4, 20, (3, 7)), torch.randint(4, 20, (3, 5))
    outputs = []
    for global_seed in (0, 1):
        torch.manual_seed(global_seed)
        use_dropout_generator(model, torch.Generator().manual_seed(11))
        state = torch.random.get_rng_state()
        outputs.append(model(src, tgt))
        assert torch.equal(torch.random.get_rng_state(), state)  # attention weights' dropout included
    assert torch.equal(outputs[0], outputs[1])
    assert not torch.allclose(outputs[0], model.eval()(src, tgt))  # dropout did act


def test_the_network_holds_plain_dropout_and_the_swap_keeps_the_weights() -> None:
    """The network knows no generator: a run puts its own dropout in place of nn.Dropout, and back."""
    config = TransformerConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=16, n_heads=2, n_layers=1, d_ff=32,
                               dropout=0.3)
    model = Transformer(config).train()
    kinds = {type(m) for m in model.modules() if isinstance(m, torch.nn.Dropout)}
    assert kinds == {torch.nn.Dropout}
    before = dict(model.state_dict())
    use_dropout_generator(model, torch.Generator().manual_seed(1))
    dropouts = [m for m in model.modules() if isinstance(m, torch.nn.Dropout)]
    # each stack's on its input (embeddings + positions); the encoder's 2 sub-layers, FFN and attention; the
    # decoder's 3 sub-layers, FFN, self- and cross-attention
    assert len(dropouts) == 2 + (2 + 1 + 1) + (3 + 1 + 2)
    assert all(type(m) is GeneratorDropout and m.p == 0.3 and m.training for m in dropouts)
    assert model.state_dict().keys() == before.keys()
    use_dropout_generator(model, None)
    assert {type(m) for m in model.modules() if isinstance(m, torch.nn.Dropout)} == {torch.nn.Dropout}


def test_a_model_built_without_dropout_holds_no_dropout_call() -> None:
    """P_drop = 0 (every shipped model): no dropout module on the residual path, so a decoding step makes no
    call that would only return its input (one per sub-layer, feed-forward and embedding sum)."""
    config = TransformerConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=16, n_heads=2, n_layers=1, d_ff=32,
                               dropout=0.0)
    model = Transformer(config)
    outside_attention = [name for name, m in model.named_modules()
                         if isinstance(m, torch.nn.Dropout) and not name.endswith("attn.dropout")]
    assert outside_attention == []  # attention's runs inside the fused kernel, never called in eval
