"""The one way to change a run: named sites edited inside ``with intervene(...)`` (network/interventions.py)."""

from __future__ import annotations

import threading

import pytest
import torch
import torch.nn.functional as F
from explain_helpers import batch, tiny_model

from transformer.network.interventions import at_site, check_site, intervene
from transformer.network.trace import Trace


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
                 "decoder.2.output"):
        assert check_site(good) == good
    for bad in ("encoder.0.cross_attn.heads", "decoder.1.output.x", "logits", "encoder.0.self_attn.weights"):
        with pytest.raises(ValueError, match="not an intervention site"):
            check_site(bad)
    with pytest.raises(ValueError, match="must be a function"):
        with intervene({"src.tokens": 3}):
            pass
    value = torch.ones(2)
    assert at_site("src.tokens", value) is value  # outside a block: the value itself
