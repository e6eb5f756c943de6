"""The one way to change a run: the network's sites (network/sites.py), read by ``Trace`` and edited inside
``with intervene(...)`` (network/interventions.py) under the same names."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from explain_helpers import batch, tiny_model

from transformer.network.config import TransformerConfig
from transformer.network.interventions import check_site, intervene
from transformer.network.model import Transformer
from transformer.network.sites import SITES, site, site_kind, site_table
from transformer.network.trace import Trace

ROOT = Path(__file__).resolve().parents[1]


def test_zeroing_one_tokens_values_is_attention_over_the_edited_values():
    """Independent of the network's code path: head outputs = softmax weights (from a trace) @ V computed by hand
    from in_proj, with token j's row of V zeroed."""
    model, (src, _) = tiny_model(), batch()
    attention = model.encoder.layers[0].self_attn
    d = model.config.d_model
    seen = {}

    def zero_token(j):
        def edit(values):  # (B, H, S, d_k)
            values = values.clone()
            values[:, :, j] = 0
            return values
        return edit

    trace = Trace()
    with intervene({"encoder.0.self_attn.values": zero_token(2),
                    "encoder.0.self_attn.heads": lambda heads: seen.setdefault("heads", heads)}), torch.no_grad():
        model.encode(src, trace=trace)
    x = trace["src.input"]  # what layer 0's attention reads (post-LN: the input itself)
    v = F.linear(x, attention.in_proj.weight[2 * d:], attention.in_proj.bias[2 * d:])  # (B, S, D)
    v = v.view(*v.shape[:2], model.config.n_heads, -1).transpose(1, 2).clone()  # (B, H, S, d_k)
    v[:, :, 2] = 0
    expected = trace.attention("encoder", 0) @ v  # the weights do not depend on V
    torch.testing.assert_close(seen["heads"], expected)


def test_ablation_is_an_edit_and_blocks_nest_and_end():
    model, (src, tgt) = tiny_model(), batch()
    head0 = torch.zeros(1, model.config.n_heads, 1, 1, dtype=torch.float64)
    head0[:, 0] = 1.0
    with torch.no_grad():
        plain = model(src, tgt[:, :-1])
        ablated = model(src, tgt[:, :-1], ablate={("cross", 1): [0]})
        with intervene(model.ablation_edits({("cross", 1): [0]})):
            edited = model(src, tgt[:, :-1])
            with intervene({"decoder.1.cross_attn.heads": lambda h: h + head0}):  # applied after the outer edit
                nested = model(src, tgt[:, :-1])
        with intervene({"decoder.1.cross_attn.heads": lambda h: torch.cat([torch.ones_like(h[:, :1]), h[:, 1:]], 1)}):
            head0_ones = model(src, tgt[:, :-1])
        after = model(src, tgt[:, :-1])
    torch.testing.assert_close(edited, ablated)
    torch.testing.assert_close(nested, head0_ones)  # (h * 0) + 1, not (h + 1) * 0
    assert not torch.allclose(ablated, plain)
    torch.testing.assert_close(after, plain)  # nothing outlives the block


def test_an_edit_in_one_thread_never_reaches_a_forward_in_another():
    model, (src, tgt) = tiny_model(), batch()
    with torch.no_grad():
        plain = model(src, tgt[:, :-1])
    inside, release = threading.Event(), threading.Event()
    results = {}

    def edited_thread():
        with intervene({"decoder.0.output": lambda x: x * 0}):
            inside.set()
            release.wait(5)
            with torch.no_grad():
                results["edited"] = model(src, tgt[:, :-1])

    def plain_thread():
        inside.wait(5)
        with torch.no_grad():
            results["plain"] = model(src, tgt[:, :-1])
        release.set()

    threads = [threading.Thread(target=edited_thread), threading.Thread(target=plain_thread)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    torch.testing.assert_close(results["plain"], plain)
    assert not torch.allclose(results["edited"], plain)


def test_site_names_are_checked():
    for good in ("src.tokens", "tgt.tokens", "encoder.0.self_attn.values", "decoder.3.cross_attn.heads",
                 "decoder.2.output", "logits", "encoder.0.self_attn.weights", "decoder.1.feed_forward.update"):
        assert check_site(good) == good
    for bad in ("encoder.0.cross_attn.heads", "decoder.1.output.x", "decoder.x.output", "encoder.0.feed_forward.heads"):
        with pytest.raises(ValueError, match="not a site of the network"):
            check_site(bad)
    assert check_site("decoder.1.cross_attn.heads", 2)
    for name, index, message in (("src.pos", 0, "takes no index"), ("encoder.mask", 0, "takes no index"),
                                 ("decoder.1.cross_attn.heads", "2", "a head: an int")):
        with pytest.raises(ValueError, match=message):
            with intervene({(name, index): lambda v: v}):
                pass
    with pytest.raises(ValueError, match="must be a function"):
        with intervene({"src.tokens": 3}):
            pass
    value = torch.ones(2)
    assert site("src.tokens", value) is value  # outside a block, without a trace: the value itself


def test_every_traced_name_is_a_declared_site_that_intervene_edits_with_the_value_read():
    """One name per site: a full trace records each declaration at least once and nothing undeclared, and an
    edit of every recorded name sees the very value the trace read there (and, as identity, changes nothing)."""
    (src, tgt), declared = batch(), set()
    # the position bias is a site of relative positions only (T5); rotated queries and keys, key/value groups and
    # the sliding mask are sites of a decoder-only model with those switches
    for model, source in ((tiny_model(), src), (relative_model(), src), (decoder_model(), None)):
        trace = Trace(sublayers=True)
        with torch.no_grad():
            plain = model(source, tgt[:, :-1], trace=trace)
        assert all(site_kind(name) is not None for name in trace), [n for n in trace if site_kind(n) is None]
        declared |= {site_kind(name) for name in trace}
        _edits_see_what_the_trace_read(model, source, tgt, trace, plain)
    assert declared == set(SITES)


def relative_model() -> Transformer:
    """A tiny float64 model with T5's switches: relative positions, RMSNorm, gated FFN, no scale, no biases."""
    config = TransformerConfig(src_vocab_size=12, tgt_vocab_size=12, d_model=8, n_heads=2, n_layers=2, d_ff=16,
                               dropout=0.0, max_len=32, positional="relative", norm="rms", norm_first=True,
                               gated_ff=True, scale_attention=False, bias=False, relative_buckets=8,
                               relative_max_distance=16)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return Transformer(config).double().eval()


def decoder_model() -> Transformer:
    """A tiny float64 decoder-only model: rotary positions, two key/value heads for four query heads, sliding and
    full layers."""
    config = TransformerConfig(src_vocab_size=12, tgt_vocab_size=12, d_model=16, n_heads=4, n_kv_heads=2,
                               n_layers=2, d_ff=16, dropout=0.0, max_len=32, decoder_only=True, positional="rotary",
                               norm="rms_float32", norm_first=True, gated_ff=True, activation="silu", bias=False,
                               sliding_window=3, layer_types=("sliding", "full"), qk_norm=True)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return Transformer(config).double().eval()


def _edits_see_what_the_trace_read(model: Transformer, src: torch.Tensor | None, tgt: torch.Tensor, trace: Trace,
                                   plain: torch.Tensor) -> None:
    seen = {}

    def keep(name):
        def edit(value):
            seen[name] = value.clone()
            return value
        return edit

    with intervene({name: keep(name) for name in trace}), torch.no_grad():
        edited = model(src, tgt[:, :-1])
    assert set(seen) == set(trace)
    for name in trace:
        torch.testing.assert_close(seen[name], trace[name], rtol=0, atol=1e-12, msg=name)
    torch.testing.assert_close(edited, plain, rtol=0, atol=1e-12)


def test_a_head_is_an_index_on_its_site():
    model, (src, tgt) = tiny_model(), batch()
    trace = Trace()
    with torch.no_grad():
        plain = model(src, tgt[:, :-1], trace=trace)
        ablated = model(src, tgt[:, :-1], ablate={("cross", 1): [0]})
        with intervene({("decoder.1.cross_attn.heads", 0): lambda head: head * 0}):
            silenced = model(src, tgt[:, :-1])
    torch.testing.assert_close(silenced, ablated, rtol=0, atol=1e-12)
    assert not torch.allclose(silenced, plain)
    torch.testing.assert_close(trace["decoder.1.cross_attn.heads", 1], trace["decoder.1.cross_attn.heads"][:, 1])


def test_attention_weights_can_be_edited_on_the_fused_path():
    """Without a trace attention runs the fused kernel; an edit of its weights makes it compute them."""
    model, (src, tgt) = tiny_model(), batch()
    uniform = {}

    def flatten(weights):  # (B, H, T, S): every query attends to every real key alike
        uniform["w"] = (weights > 0).to(weights.dtype) / (weights > 0).sum(-1, keepdim=True)
        return uniform["w"]

    with torch.no_grad():
        plain = model(src, tgt[:, :-1])
        with intervene({"decoder.0.cross_attn.weights": flatten}):
            edited = model(src, tgt[:, :-1])
            trace = Trace()
            traced = model(src, tgt[:, :-1], trace=trace)
    assert not torch.allclose(edited, plain)
    torch.testing.assert_close(edited, traced, rtol=0, atol=1e-12)
    torch.testing.assert_close(trace.attention("cross", 0), uniform["w"])  # the trace reads the edited value


def test_the_architecture_doc_lists_the_declared_sites():
    assert site_table() in (ROOT / "docs" / "architecture.md").read_text(), \
        "docs/architecture.md: paste transformer.network.sites.site_table() into its site table"
