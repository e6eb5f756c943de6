"""T5 (v1.0 and v1.1 / Flan), BART, mBART and M2M100 / NLLB: our network with their switches computes what
``transformers`` computes, to 1e-10 in float64 (logits at every real position of a padded batch, every head's
attention weights, T5's position bias), on the fast path, the traced path and step by step with a cache."""

from __future__ import annotations

import pytest
import torch
from family_models import NAMES, Pair, batch, build_pair

from transformer.explain import METHODS, attribute
from transformer.hub import mapping
from transformer.network.attention import KVCache
from transformer.network.interop import to_torch
from transformer.network.masks import decoder_real
from transformer.network.trace import Trace

pytest.importorskip("transformers")
TOLERANCE = 1e-10


@pytest.fixture(scope="session", params=NAMES)
def pair(request) -> Pair:
    return build_pair(request.param)


def reference_outputs(pair: Pair, src: torch.Tensor, tgt: torch.Tensor):  # noqa: ANN201
    """``transformers``' forward with the masks that say what is real (the decoder's start column always)."""
    c = pair.ours.config
    with torch.no_grad():
        return pair.reference(input_ids=src, attention_mask=(src != c.pad_id).long(), decoder_input_ids=tgt,
                              decoder_attention_mask=decoder_real(tgt, c.pad_id).long(), output_attentions=True)


def test_logits_equal_transformers_at_every_real_position(pair: Pair) -> None:
    src, tgt = batch(pair)
    theirs = reference_outputs(pair, src, tgt).logits
    real = decoder_real(tgt, pair.ours.config.pad_id)  # (B, T)
    with torch.no_grad():
        fast = pair.ours(src, tgt)
        traced = pair.ours(src, tgt, trace=Trace())
    assert (fast[real] - theirs[real]).abs().max() < TOLERANCE
    assert (traced[real] - theirs[real]).abs().max() < TOLERANCE
    assert theirs[real].std() > 0.05  # the comparison is of numbers that matter


def test_every_heads_attention_weights_equal_transformers(pair: Pair) -> None:
    src, tgt = batch(pair)
    c = pair.ours.config
    outputs = reference_outputs(pair, src, tgt)
    trace = Trace()
    with torch.no_grad():
        pair.ours(src, tgt, trace=trace)
    src_real, tgt_real = src != c.pad_id, decoder_real(tgt, c.pad_id)
    groups = (("encoder", outputs.encoder_attentions, src_real), ("decoder", outputs.decoder_attentions, tgt_real),
              ("cross", outputs.cross_attentions, tgt_real))
    for kind, layers, real_queries in groups:
        assert len(layers) == (c.n_encoder_layers if kind == "encoder" else c.n_decoder_layers)
        for layer, theirs in enumerate(layers):
            ours = trace.attention(kind, layer)  # (B, H, T_q, T_k)
            assert ours.shape == theirs.shape, (kind, layer)
            rows = real_queries[:, None, :, None].expand_as(ours)  # queries at real positions, every head and key
            difference = (ours - theirs)[rows].abs().max()
            assert difference < TOLERANCE, (kind, layer, difference)


def test_t5_position_bias_is_transformers_compute_bias() -> None:
    pair = build_pair("t5")
    src, tgt = batch(pair)
    trace = Trace()
    with torch.no_grad():
        pair.ours(src, tgt, trace=trace)
        encoder = pair.reference.encoder.block[0].layer[0].SelfAttention.compute_bias(src.size(1), src.size(1))
        decoder = pair.reference.decoder.block[0].layer[0].SelfAttention.compute_bias(tgt.size(1), tgt.size(1))
    assert trace["encoder.position_bias"].shape == (1, 3, src.size(1), src.size(1))
    assert torch.equal(trace["encoder.position_bias"], encoder)
    assert torch.equal(trace["decoder.position_bias"], decoder)
    assert not torch.equal(encoder[..., :4, :4], decoder[..., :4, :4])  # bidirectional vs causal buckets


def test_step_by_step_decoding_with_a_cache_equals_the_full_forward(pair: Pair) -> None:
    """Where the positions of a step start (the cache's offset) matters for every layout: learned rows + 2,
    fairseq's pad_id + 1, T5's query offset in the relative bias."""
    src, tgt = batch(pair)
    src, tgt = src[:1], tgt[:1]  # an unpadded row: a generated prefix holds no padding
    model = pair.ours
    with torch.no_grad():
        full = model(src, tgt)
        memory, cache, steps = model.encode(src), KVCache(), []
        for t in range(tgt.size(1)):
            steps.append(model.decode(tgt[:, t:t + 1], memory, model.memory_mask(src), cache=cache))
    assert (torch.cat(steps, dim=1) - full).abs().max() < TOLERANCE


def test_nn_transformer_interop_refuses_each_family_naming_why(pair: Pair) -> None:
    expected = {"t5": "relative positional layout", "t5-v1.1": "gated feed-forward", "bart": "learned positional",
                "mbart": "a norm after the embeddings", "m2m100": "fairseq positional layout"}[pair.name]
    with pytest.raises(ValueError, match=expected):
        to_torch(pair.ours)


def test_expected_shapes_are_the_shapes_of_transformers_tensors(pair: Pair) -> None:
    """Every tensor ``weights_of`` may read has, in ``transformers``' own state dict, the shape
    ``expected_shapes`` says (checked before anything is read); and the ones it needs are all there."""
    config = pair.ours.config
    state = pair.reference.state_dict()
    shapes = mapping.expected_shapes(pair.module, config)
    present = {name: tuple(state[name].shape) for name in shapes if name in state}
    assert present == {name: shapes[name] for name in present}
    assert len(present) >= len(shapes) - 4  # only other names of a tied matrix may be absent
    mapping.weights_of(pair.module, {name: state[name] for name in present}, config)  # enough to build the model


@pytest.mark.parametrize("method", METHODS)
def test_every_attribution_method_runs_on_every_family(pair: Pair, method: str) -> None:
    """A smoke test (the methods' own references are tests/test_explain_*.py): finite, padding columns 0."""
    src, tgt = batch(pair)
    result = attribute(pair.ours, src, tgt, method)
    assert result.source.shape == (3, tgt.size(1) - 1, src.size(1))
    assert torch.isfinite(result.source).all() or method == "alti"  # ALTI marks undefined rows NaN
    assert (result.source[2, :, 4:] == 0).all()  # source padding
