"""Behaviour of the from-scratch model: traces, masks in action, causality, ablation, KV cache."""

from __future__ import annotations

import math

import pytest
import torch

from transformer import Trace, Transformer, TransformerConfig
from transformer.network.attention import KVCache
from transformer.network.model import count_parameters
from transformer.network.positional import sinusoidal_table

PAD = 0


@pytest.fixture(scope="module")
def model() -> Transformer:
    torch.manual_seed(0)
    config = TransformerConfig(src_vocab_size=23, tgt_vocab_size=29, d_model=32, n_heads=4,
                               n_layers=2, d_ff=64, dropout=0.1, max_len=64)
    return Transformer(config).eval()


@pytest.fixture()
def batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    src = torch.randint(1, 23, (3, 8), generator=g)
    tgt = torch.randint(1, 29, (3, 6), generator=g)
    src[1, 5:] = PAD
    tgt[2, 3:] = PAD
    return src, tgt


@torch.no_grad()
def test_trace_never_changes_the_logits(model, batch) -> None:
    src, tgt = batch
    fast = model(src, tgt)
    trace = Trace()
    traced = model(src, tgt, trace=trace)
    torch.testing.assert_close(traced, fast, rtol=0, atol=1e-5)
    torch.testing.assert_close(trace["logits"], traced)


@torch.no_grad()
def test_trace_records_every_intermediate_with_the_documented_shapes(model, batch) -> None:
    src, tgt = batch
    trace = Trace()
    model(src, tgt, trace=trace)
    (b, s), t = src.shape, tgt.size(1)
    c = model.config
    assert trace["src.embed"].shape == (b, s, c.d_model)
    assert trace["src.pos"].shape == (s, c.d_model)
    torch.testing.assert_close(trace["src.pos"], sinusoidal_table(c.max_len, c.d_model)[:s])
    torch.testing.assert_close(trace["src.embed"], model.src_embed(src) * math.sqrt(c.d_model))
    torch.testing.assert_close(trace["src.input"], trace["src.embed"] + trace["src.pos"])  # eval: no dropout
    assert trace["encoder.mask"].shape == (b, 1, 1, s)
    assert trace["decoder.mask"].shape == (b, 1, t, t)
    assert trace["cross.mask"].shape == (b, 1, 1, s)
    for layer in range(c.n_encoder_layers):
        assert trace.attention("encoder", layer).shape == (b, c.n_heads, s, s)
        assert trace.scores("encoder", layer).shape == (b, c.n_heads, s, s)
        assert trace[f"encoder.{layer}.output"].shape == (b, s, c.d_model)
    for layer in range(c.n_decoder_layers):
        assert trace.attention("decoder", layer).shape == (b, c.n_heads, t, t)
        assert trace.attention("cross", layer).shape == (b, c.n_heads, t, s)
        assert trace[f"decoder.{layer}.output"].shape == (b, t, c.d_model)
    assert trace.n_layers("encoder") == c.n_encoder_layers
    assert trace.n_layers("decoder") == c.n_decoder_layers
    assert trace["logits"].shape == (b, t, c.tgt_vocab_size)
    with pytest.raises(ValueError, match="attention kind"):
        trace.attention("sideways", 0)
    with pytest.raises(KeyError, match="nothing recorded"):
        trace.attention("encoder", 99)


@torch.no_grad()
def test_attention_rows_sum_to_one_and_masked_cells_are_exactly_zero(model, batch) -> None:
    src, tgt = batch
    trace = Trace()
    model(src, tgt, trace=trace)
    for kind, mask_name in (("encoder", "encoder.mask"), ("decoder", "decoder.mask"), ("cross", "cross.mask")):
        mask = trace[mask_name]
        for layer in range(2):
            weights, scores = trace.attention(kind, layer), trace.scores(kind, layer)
            torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))
            blocked = ~mask.expand_as(weights)
            assert blocked.any()
            assert (weights[blocked] == 0).all()
            assert torch.isneginf(scores[blocked]).all()
            assert torch.isfinite(scores[~blocked]).all()


@torch.no_grad()
def test_a_future_target_token_never_changes_earlier_logits(model, batch) -> None:
    src, tgt = batch
    before = model(src, tgt)
    changed = tgt.clone()
    changed[:, 4] = (changed[:, 4] % 27) + 1  # replace the token at position 4 (and keep it non-pad)
    after = model(src, changed)
    torch.testing.assert_close(after[:, :4], before[:, :4], rtol=0, atol=1e-6)
    assert not torch.allclose(after[:, 4:], before[:, 4:])


@torch.no_grad()
def test_source_padding_is_invisible(model) -> None:
    """Extra padding on the source changes nothing: padded keys get weight exactly 0."""
    src = torch.tensor([[5, 6, 7]])
    tgt = torch.tensor([[2, 9, 10]])
    padded = torch.tensor([[5, 6, 7, PAD, PAD]])
    torch.testing.assert_close(model(padded, tgt), model(src, tgt), rtol=0, atol=1e-5)


@torch.no_grad()
def test_ablating_a_head_changes_the_output_and_ablating_none_is_a_no_op(model, batch) -> None:
    src, tgt = batch
    base = model(src, tgt)
    torch.testing.assert_close(model(src, tgt, ablate={}), base, rtol=0, atol=0)
    torch.testing.assert_close(model(src, tgt, ablate={("cross", 1): []}), base, rtol=0, atol=0)
    for kind in ("encoder", "decoder", "cross"):
        ablated = model(src, tgt, ablate={(kind, 0): [1]})
        assert (ablated - base).abs().max() > 1e-4, kind
        # the traced path applies the same ablation
        traced = model(src, tgt, trace=Trace(), ablate={(kind, 0): [1]})
        torch.testing.assert_close(traced, ablated, rtol=0, atol=1e-5)
    # the weights are untouched: the next call without ablation gives the original logits
    torch.testing.assert_close(model(src, tgt), base, rtol=0, atol=0)


@torch.no_grad()
def test_ablating_every_head_of_a_sublayer_equals_zeroing_its_value_path(model, batch) -> None:
    """With all heads off, the sub-layer's output is just W^O's bias, whatever the input."""
    src, tgt = batch
    attn = model.encoder.layers[0].self_attn
    all_off = model(src, tgt, ablate={("encoder", 0): range(4)})
    d = model.config.d_model
    saved = attn.in_proj.weight.clone(), attn.in_proj.bias.clone()
    attn.in_proj.weight[2 * d :].zero_()  # W^V: rows 2d:3d
    attn.in_proj.bias[2 * d :].zero_()
    try:
        zero_values = model(src, tgt)
    finally:
        attn.in_proj.weight.copy_(saved[0])
        attn.in_proj.bias.copy_(saved[1])
    torch.testing.assert_close(all_off, zero_values, rtol=0, atol=1e-5)


def test_bad_ablation_is_rejected(model, batch) -> None:
    src, tgt = batch
    with pytest.raises(ValueError, match="head indices"):
        model(src, tgt, ablate={("encoder", 0): [4]})
    with pytest.raises(ValueError, match="layer"):
        model(src, tgt, ablate={("cross", 5): [0]})
    with pytest.raises(ValueError, match="attention kind"):
        model(src, tgt, ablate={("self", 0): [0]})


@torch.no_grad()
def test_step_wise_decoding_with_a_kv_cache_equals_the_full_forward(model) -> None:
    src = torch.tensor([[4, 5, 6, 7, PAD], [8, 9, 10, 11, 12]])
    tgt = torch.tensor([[2, 13, 14, 15, 16, 17], [2, 18, 19, 20, 21, 22]])
    full = model(src, tgt)
    memory, memory_mask = model.encode(src), model.memory_mask(src)
    cache = KVCache()
    steps = [model.decode(tgt[:, i : i + 1], memory, memory_mask, cache=cache) for i in range(tgt.size(1))]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=0, atol=1e-5)
    assert cache.offset == tgt.size(1)
    # a prefix of several tokens at once, then one more, also matches
    cache = KVCache()
    first = model.decode(tgt[:, :4], memory, memory_mask, cache=cache)
    rest = model.decode(tgt[:, 4:], memory, memory_mask, cache=cache)
    torch.testing.assert_close(torch.cat([first, rest], dim=1), full, rtol=0, atol=1e-5)


@torch.no_grad()
def test_kv_cache_reorder_follows_the_chosen_rows(model) -> None:
    src = torch.tensor([[4, 5, 6], [7, 8, 9]])
    tgt = torch.tensor([[2, 13, 14], [2, 18, 19]])
    memory, memory_mask = model.encode(src), model.memory_mask(src)
    cache = KVCache()
    model.decode(tgt[:, :2], memory, memory_mask, cache=cache)
    swap = torch.tensor([1, 0])
    cache.reorder(swap)
    last = model.decode(tgt[swap, 2:], memory[swap], memory_mask[swap], cache=cache)
    torch.testing.assert_close(last[:, 0], model(src[swap], tgt[swap])[:, 2], rtol=0, atol=1e-5)


def test_dropout_is_active_in_training_and_off_in_eval(batch) -> None:
    torch.manual_seed(0)
    m = Transformer(TransformerConfig(src_vocab_size=23, tgt_vocab_size=29, d_model=16, n_heads=2,
                                      n_layers=1, d_ff=32, dropout=0.5))
    src, tgt = batch
    m.train()
    assert not torch.allclose(m(src, tgt), m(src, tgt))
    m.eval()
    torch.testing.assert_close(m(src, tgt), m(src, tgt), rtol=0, atol=0)


def test_sequences_longer_than_max_len_get_a_clear_error() -> None:
    m = Transformer(TransformerConfig(src_vocab_size=9, tgt_vocab_size=9, d_model=8, n_heads=2,
                                      n_layers=1, d_ff=16, max_len=4))
    with pytest.raises(ValueError, match="max_len"):
        m(torch.ones(1, 5, dtype=torch.long), torch.ones(1, 2, dtype=torch.long))


def test_parameter_count_per_part_counts_tied_weights_once() -> None:
    config = TransformerConfig(src_vocab_size=30, tgt_vocab_size=30, d_model=16, n_heads=2, n_layers=1,
                               d_ff=32, tying="all")
    m = Transformer(config)
    parts = count_parameters(m)
    assert parts["tgt_embed"] == 0  # the same matrix as src_embed
    assert parts["generator"] == 30  # only the bias is its own
    assert sum(parts.values()) == m.num_parameters()
    d, f = 16, 32
    attention = 4 * (d * d + d)
    assert parts["encoder"] == attention + (d * f + f + f * d + d) + 2 * 2 * d + 2 * d


@pytest.mark.parametrize("shape", [(1, 1), (3, 1), (2, 5), (8, 8), (4, 40)])  # few rows: W x^T; 160 rows: nn.Linear
@pytest.mark.parametrize("bias", [True, False])
def test_few_rows_linear_is_nn_linear_in_value_and_gradient(shape: tuple[int, int], bias: bool) -> None:
    """Decoding's W x^T for few rows gives nn.Linear's logits and gradients (float64: same to 1e-12)."""
    from transformer.decoding.fast import few_rows_linear

    torch.manual_seed(0)
    ours = torch.nn.Linear(16, 301, bias=bias).double()
    reference = torch.nn.Linear(16, 301, bias=bias).double()
    reference.load_state_dict(ours.state_dict())
    x = torch.randn(*shape, 16, dtype=torch.float64, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_(True)
    out, expected = few_rows_linear(ours, x), reference(x_ref)
    assert out.shape == (*shape, 301) and out.is_contiguous()
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)
    weights = torch.randn_like(out)
    (out * weights).sum().backward()
    (expected * weights).sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=0, atol=1e-12)
    torch.testing.assert_close(ours.weight.grad, reference.weight.grad, rtol=0, atol=1e-12)


@torch.no_grad()
def test_a_decoding_step_is_decode_with_the_same_sites(model, batch) -> None:
    """decoding.fast.decode_step: the logits of ``Transformer.decode`` and the same trace."""
    from transformer.decoding.fast import decode_step

    src, tgt = batch
    memory, memory_mask = model.encode(src), model.memory_mask(src)
    ours, theirs = Trace(), Trace()
    fast = decode_step(model, tgt, memory, memory_mask, cache=None, trace=ours, ablate={("cross", 1): [0]})
    plain = model.decode(tgt, memory, memory_mask, trace=theirs, ablate={("cross", 1): [0]})
    torch.testing.assert_close(fast, plain, rtol=0, atol=1e-5)
    assert ours.names() == theirs.names() and "logits" in ours
