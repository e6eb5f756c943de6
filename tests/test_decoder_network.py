"""Decoder-only models (GPT-2, Llama with llama3 and linear rotary scaling, Mistral, Qwen2, Qwen3, Gemma-2,
Gemma-3): our network with their switches computes what ``transformers``' ``AutoModelForCausalLM`` computes, to
1e-10 in float64 (the logits at every position, every head's attention weights), on the fast and the traced path,
over sequences longer than the sliding window.

The Llama family's ``transformers`` code rounds to float32 in its norms, its rotary tables and its softmax even
in a float64 model; the network does the same steps (norms.py, rotary.py, ``softmax_float32``), and the results
are then bit for bit equal. A float32 softmax sums a row in an order that depends on the row's length, so a
left-padded row (a longer row, its padding -inf) rounds differently from the same row alone: left padding is
proven exactly on GPT-2 (float64 throughout) and on the rotary families with the softmax in float64.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from decoder_models import LENGTH, NAMES, VOCAB, WINDOW, Pair, batch, build_pair

from transformer.checkpoints.checkpoint import load_weights, weights_of
from transformer.network.attention import KVCache
from transformer.network.model import Transformer
from transformer.network.rotary import inverse_frequencies
from transformer.network.trace import Trace

pytest.importorskip("transformers")
TOLERANCE = 1e-10  # float64: a few hundred roundings of 2^-53 each, far below this


@pytest.fixture(scope="module", params=NAMES)
def pair(request) -> Pair:
    return build_pair(request.param)


def full_rows(seed: int = 1) -> torch.Tensor:
    """(3, LENGTH) ids without padding."""
    return batch(seed)[0].clamp(min=3)


def test_logits_equal_transformers_at_every_position(pair: Pair) -> None:
    ids = full_rows()
    with torch.no_grad():
        theirs = pair.reference(input_ids=ids).logits
        fast = pair.ours.lm(ids)
        traced = pair.ours.lm(ids, trace=Trace())
        called = pair.ours(None, ids)
    assert fast.shape == (3, LENGTH, VOCAB)
    assert (fast - theirs).abs().max() < TOLERANCE
    assert (traced - theirs).abs().max() < TOLERANCE
    assert torch.equal(called, fast)  # model(None, ids) is model.lm(ids)
    assert theirs.std() > 0.05  # the comparison is of numbers that matter


def test_every_heads_attention_weights_equal_transformers(pair: Pair) -> None:
    ids = full_rows()
    trace = Trace()
    with torch.no_grad():
        layers = pair.reference(input_ids=ids, output_attentions=True).attentions
        pair.ours.lm(ids, trace=trace)
    assert len(layers) == pair.ours.config.n_decoder_layers == trace.n_layers("decoder")
    for layer, theirs in enumerate(layers):
        ours = trace.attention("decoder", layer)  # (B, H, L, L)
        assert ours.shape == theirs.shape == (3, pair.ours.config.n_heads, LENGTH, LENGTH)
        assert (ours - theirs).abs().max() < TOLERANCE, (layer, (ours - theirs).abs().max())


def test_sliding_layers_see_only_their_window() -> None:
    """Mistral: every layer sliding; Gemma-2: every other (the first sliding), Gemma-3: five of six."""
    for name, sliding in (("mistral", [0, 1, 2, 3]), ("gemma2", [0, 2]), ("gemma3_text", [0, 1, 2, 3, 4])):
        pair, trace = build_pair(name), Trace()
        with torch.no_grad():
            pair.ours.lm(full_rows(), trace=trace)
        distance = torch.arange(LENGTH)[:, None] - torch.arange(LENGTH)[None, :]  # query - key
        for layer in range(pair.ours.config.n_decoder_layers):
            weights = trace.attention("decoder", layer)
            far = (weights[..., distance >= WINDOW] != 0).any()
            assert bool(far) == (layer not in sliding), (name, layer)
        assert trace["decoder.sliding_mask"][0, 0].sum(-1).max() == WINDOW


def test_trace_records_the_rotated_queries_and_keys_and_each_query_heads_key_value_head() -> None:
    pair, trace = build_pair("qwen3"), Trace()
    ids = full_rows()
    with torch.no_grad():
        pair.ours.lm(ids, trace=trace)
    c, name = pair.ours.config, "decoder.1.self_attn"
    q, k = trace[f"{name}.queries"], trace[f"{name}.keys"]
    assert q.shape == (3, c.n_heads, LENGTH, c.d_k) and k.shape == (3, c.kv_heads, LENGTH, c.d_k)
    assert trace[f"{name}.kv_heads"].tolist() == [0, 0, 1, 1]  # 4 query heads share 2 key/value heads
    scores = (q @ k[:, trace[f"{name}.kv_heads"]].transpose(-2, -1)) / c.d_k**0.5
    causal = torch.ones(LENGTH, LENGTH, dtype=torch.bool).tril()
    # float64: the same d_k-term dot products summed in another order, a few ulp (2.2e-16) of scores of order 1-10
    torch.testing.assert_close(trace[f"{name}.scores"][..., causal], scores[..., causal], rtol=0, atol=1e-12)


def test_a_single_left_padded_row_counts_its_positions_from_its_first_token() -> None:
    """GPT-2's learned positions: one row (B = 1) with left padding and its mask gives what the row without its
    padding gives (a batch of one once took the positions 0.. of the padded row, as if it had no mask)."""
    ids, mask = batch()
    gpt2 = build_pair("gpt2")
    with torch.no_grad():
        padded = gpt2.ours.lm(ids[2:], attention_mask=mask[2:])[0, 9:]
        alone = gpt2.ours.lm(ids[2:, 9:])[0]
    assert (padded - alone).abs().max() < TOLERANCE


def test_a_left_padded_row_gives_what_it_gives_alone() -> None:
    """GPT-2 against ``transformers`` on each row alone (learned positions counted from each row's first token);
    Llama (rotary, llama3) and Mistral (sliding window) against themselves alone, the softmax in float64."""
    ids, mask = batch()
    gpt2 = build_pair("gpt2")
    with torch.no_grad():
        padded = gpt2.ours.lm(ids, attention_mask=mask)
        for row in range(3):
            real = mask[row].bool()
            alone = gpt2.reference(input_ids=ids[row : row + 1, real]).logits[0]
            assert (padded[row, real] - alone).abs().max() < TOLERANCE, row
    for name in ("llama", "mistral"):
        pair = build_pair(name)
        config = dataclasses.replace(pair.ours.config, softmax_float32=False)
        model = Transformer(config).double().eval()
        load_weights(model, weights_of(pair.ours))
        with torch.no_grad():
            padded = model.lm(ids, attention_mask=mask)
            traced = model.lm(ids, attention_mask=mask, trace=Trace())
            for row in range(3):
                real = mask[row].bool()
                alone = model.lm(ids[row : row + 1, real])[0]
                assert (padded[row, real] - alone).abs().max() < TOLERANCE, (name, row)
                assert (traced[row, real] - alone).abs().max() < TOLERANCE, (name, row)


def test_the_fused_path_equals_the_traced_path_in_float32(pair: Pair) -> None:
    """In float32 the fast path runs ``scaled_dot_product_attention`` (Gemma-2's soft-capping keeps the explicit
    one); its roundings differ from the explicit path's, each step within float32's eps of the value."""
    model = Transformer(pair.ours.config).eval()
    load_weights(model, weights_of(pair.ours))
    ids, mask = batch()
    with torch.no_grad():
        fast = model.lm(ids, attention_mask=mask)
        traced = model.lm(ids, attention_mask=mask, trace=Trace())
    real = mask.bool()
    # each of the ~10 roundings per layer that differ (scores, softmax, the weighted sum) is at most eps relative,
    # carried to the logits, whose size bounds every intermediate's contribution
    bound = 16 * model.config.n_decoder_layers * torch.finfo(torch.float32).eps * fast[real].abs().max()
    assert (fast[real] - traced[real]).abs().max() <= bound


def test_rope_frequencies_are_transformers_in_every_scaling() -> None:
    """The inverse frequencies of the default, linear and llama3 scalings, bit for bit, and llama3's three bands
    all present at d_k 16 (kept, interpolated, divided)."""
    from decoder_models import reference_config
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    for name in ("llama", "llama-linear"):
        hf = reference_config(name)
        rope = hf.rope_parameters
        theirs, _ = ROPE_INIT_FUNCTIONS[rope["rope_type"]](hf, "cpu")
        ours = inverse_frequencies(16, rope["rope_theta"], rope["rope_type"], rope["factor"],
                                   rope.get("low_freq_factor", 1.0), rope.get("high_freq_factor", 4.0),
                                   rope.get("original_max_position_embeddings", 8192))
        assert torch.equal(ours, theirs), name
    plain = inverse_frequencies(16, 10000.0)
    scaled = inverse_frequencies(16, 10000.0, "llama3", 8.0, 1.0, 4.0, 64)
    ratio = plain / scaled
    assert ratio[0] == 1 and ratio[-1] == 8 and ((ratio > 1) & (ratio < 8)).any()


def test_heads_of_a_decoder_only_model_are_ablated_by_decoder_layer() -> None:
    pair = build_pair("llama")
    ids = full_rows()
    with torch.no_grad():
        plain = pair.ours.lm(ids)
        ablated = pair.ours.lm(ids, ablate={("decoder", 1): [0, 3]})
    assert not torch.allclose(plain, ablated)
    with pytest.raises(ValueError, match="no cross attention"):
        pair.ours.lm(ids, ablate={("cross", 0): [0]})
    with pytest.raises(ValueError, match="no source"):
        pair.ours(ids, ids)


def test_gemma_rounds_its_embedding_scale_to_the_dtype() -> None:
    """``embedding_scale_rounded``: sqrt(d_model) rounded to bfloat16 first, as Gemma multiplies (its normalizer in
    the hidden states' dtype); a Python float scale is applied in float32 and rounded once."""
    from transformer.network.positional import scale_embedding

    x = torch.linspace(-3, 3, 101, dtype=torch.bfloat16)
    gemma = x * torch.tensor(3072**0.5, dtype=torch.bfloat16)
    assert torch.equal(scale_embedding(x, 3072, rounded=True), gemma)
    assert not torch.equal(scale_embedding(x, 3072), gemma)


def test_step_by_step_decoding_with_a_cache_equals_the_full_forward() -> None:
    """A prompt of 4, then one token at a time: the logits of the full forward; the cache holds only the key/value
    heads (GQA), and a sliding layer only its last window - 1 keys (all a later query can see). The softmax in
    float64 (see the module docstring: a float32 one rounds a row by its length)."""
    for name in ("gpt2", "mistral", "gemma2"):
        pair = build_pair(name)
        model = Transformer(dataclasses.replace(pair.ours.config, softmax_float32=False)).double().eval()
        load_weights(model, weights_of(pair.ours))
        ids, c = full_rows(), model.config
        cache = KVCache()
        with torch.no_grad():
            full = model.lm(ids)
            steps = [model.decode(ids[:, :4], None, None, cache=cache)]
            steps += [model.decode(ids[:, t : t + 1], None, None, cache=cache) for t in range(4, LENGTH)]
        assert (torch.cat(steps, dim=1) - full).abs().max() < TOLERANCE, name
        for layer in range(c.n_decoder_layers):
            keys, values = cache.keys_values[f"decoder.{layer}.self_attn"]
            kept = WINDOW - 1 if c.layer_type(layer) == "sliding" else LENGTH
            assert keys.shape == values.shape == (3, c.kv_heads, kept, c.d_k), (name, layer)
