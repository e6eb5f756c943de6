"""Inside one head (transformer/explain/inside_head.py) against the model's own trace and modules."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from transformer import Trace, Transformer, TransformerConfig
from transformer.explain.inside_head import attention_inputs, inside_head
from transformer.network.trace import attention_name


def traced(norm_first: bool, pad_source: bool = True) -> tuple[Transformer, Trace]:
    config = TransformerConfig(src_vocab_size=30, tgt_vocab_size=30, d_model=16, n_heads=4, n_layers=2, d_ff=32,
                               dropout=0.0, norm_first=norm_first)
    model = Transformer(config).eval()
    generator = torch.Generator().manual_seed(4)
    model.reset_parameters(generator)
    src = torch.randint(4, 30, (2, 7), generator=generator)
    tgt = torch.randint(4, 30, (2, 5), generator=generator)
    if pad_source:
        src[0, 5:] = config.pad_id  # padding the mask must hide
    trace = Trace()
    with torch.no_grad():
        model(src, tgt, trace=trace)
    return model, trace


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross"])
def test_every_step_matches_the_traced_weights_and_scores(norm_first: bool, kind: str) -> None:
    model, trace = traced(norm_first)
    for layer in range(2):
        weights, scores = trace.attention(kind, layer)[0], trace.scores(kind, layer)[0]  # (H, T_q, T_k)
        for head in range(4):
            for query in range(weights.size(1)):
                steps = inside_head(model, trace, kind, layer, head, query)
                assert steps.d_k == 4
                torch.testing.assert_close(steps.weights, weights[head, query].double(), atol=1e-6, rtol=0)
                torch.testing.assert_close(steps.masked, scores[head, query].double(), atol=1e-5, rtol=0)
                assert torch.equal(steps.allowed, torch.isfinite(scores[head, query]))
                torch.testing.assert_close(steps.scaled, steps.dots / math.sqrt(4))
                torch.testing.assert_close(steps.output, steps.weights @ steps.v)


@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross"])
def test_the_heads_outputs_through_w_o_give_the_sublayers_output(kind: str) -> None:
    """Concat(head_1..head_h) W^O, from our steps, equals the attention module called on the rebuilt
    inputs; and each head's output equals PyTorch's scaled_dot_product_attention on the same q, k, v."""
    model, trace = traced(norm_first=False)
    layer, query = 1, 2
    query_in, key_value, mask = attention_inputs(model, trace, kind, layer)
    module = model.get_submodule(attention_name(kind, layer).replace("encoder.", "encoder.layers.")
                                 .replace("decoder.", "decoder.layers."))
    with torch.no_grad():
        expected = module(query_in, key_value, mask)[0, query].double()
    heads = [inside_head(model, trace, kind, layer, h, query) for h in range(4)]
    concat = torch.cat([h.output for h in heads]).float()
    torch.testing.assert_close(module.w_o(concat).double(), expected, atol=1e-5, rtol=0)
    for h in heads:
        reference = F.scaled_dot_product_attention(h.q[None, None], h.k[None], h.v[None],
                                                   attn_mask=h.allowed[None, None])[0, 0]
        torch.testing.assert_close(h.output, reference)


def test_a_hand_computed_head() -> None:
    """softmax([1·1+0·0, 1·0+0·2] / sqrt(2)) over two keys, by hand."""
    model, trace = traced(norm_first=False)
    steps = inside_head(model, trace, "encoder", 0, 0, 0)
    q, k = steps.q, steps.k
    by_hand = torch.tensor([float(q @ k[j]) for j in range(k.size(0))]) / math.sqrt(steps.d_k)
    by_hand[~steps.allowed] = float("-inf")
    e = torch.exp(by_hand - by_hand.max())
    torch.testing.assert_close(steps.weights, (e / e.sum()).double())
    assert not steps.allowed[5:].any() and steps.weights[5:].sum() == 0  # the padding gets nothing


def test_bad_positions_are_refused() -> None:
    model, trace = traced(norm_first=False)
    for args in (("encoder", 2, 0, 0), ("encoder", 0, 4, 0), ("encoder", 0, 0, 7), ("sideways", 0, 0, 0)):
        with pytest.raises(ValueError):
            inside_head(model, trace, *args)


def traced_t5() -> tuple[Transformer, Trace]:
    """A T5 v1.1 network (hub.t5's switches: no 1/sqrt(d_k), a relative position bias per head, pre-RMSNorm, heads
    of their own width), random weights, source padded."""
    from transformer.hub.families import t5

    config = t5.config_of({"model_type": "t5", "vocab_size": 30, "d_model": 16, "d_kv": 4, "num_heads": 3,
                           "num_layers": 2, "d_ff": 24, "feed_forward_proj": "gated-gelu", "dropout_rate": 0.0,
                           "relative_attention_num_buckets": 8, "relative_attention_max_distance": 12,
                           "tie_word_embeddings": False})
    model = Transformer(config).eval()
    generator = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator))
    src = torch.randint(3, 30, (2, 7), generator=generator)
    src[0, 5:] = config.pad_id
    tgt = torch.randint(3, 30, (2, 5), generator=generator)
    trace = Trace()
    with torch.no_grad():
        model(src, tgt, trace=trace)
    return model, trace


@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross"])
def test_t5_heads_use_the_models_scale_and_position_bias(kind: str) -> None:
    """T5's scores are q . k + the position bias (self-attention), without 1/sqrt(d_k): the steps give the
    traced scores and weights, and the cross-attention's input is the stream after a self-attention with its
    bias."""
    model, trace = traced_t5()
    stack = "encoder" if kind == "encoder" else "decoder"
    for layer in range(2):
        weights, scores = trace.attention(kind, layer)[0], trace.scores(kind, layer)[0]  # (H, T_q, T_k)
        for head in range(3):
            for query in range(weights.size(1)):
                steps = inside_head(model, trace, kind, layer, head, query)
                assert steps.scale == 1.0 and torch.equal(steps.scaled, steps.dots)
                if kind == "cross":
                    assert steps.bias is None
                else:
                    assert torch.equal(steps.bias, trace[f"{stack}.position_bias"][0, head, query].double())
                torch.testing.assert_close(steps.masked, scores[head, query].double(), atol=1e-4, rtol=1e-5)
                torch.testing.assert_close(steps.weights, weights[head, query].double(), atol=1e-6, rtol=0)
    assert inside_head(*traced(norm_first=True), "encoder", 0, 0, 0).scale == 1 / math.sqrt(4)
