"""Rollout by hand on explicit matrices, relevancy's rules on a case small enough to redo by
hand, Trace(keep_graph=True), the logit lens and the residual stream."""

from __future__ import annotations

import pytest
import torch
from explain_helpers import batch, tiny_model

from transformer.explain import attention_rollout, attribute, logit_lens, logit_lens_top, residual_stream
from transformer.explain.relevancy import normalise_self, weighted_attention
from transformer.network.trace import Trace


def test_rollout_of_two_layers_by_hand():
    a0 = torch.tensor([[[[1.0, 0.0], [0.5, 0.5]], [[0.0, 1.0], [0.5, 0.5]]]])  # (B=1, H=2, 2, 2)
    a1 = torch.tensor([[[[0.2, 0.8], [1.0, 0.0]], [[0.6, 0.4], [0.0, 1.0]]]])
    trace = Trace()
    trace.record("encoder.0.self_attn.weights", a0)
    trace.record("encoder.1.self_attn.weights", a1)
    # mean_h A0 = [[.5,.5],[.5,.5]] -> 0.5*that + 0.5*I = [[.75,.25],[.25,.75]] (rows already sum to 1)
    # mean_h A1 = [[.4,.6],[.5,.5]] -> [[.7,.3],[.25,.75]]
    hat0 = torch.tensor([[0.75, 0.25], [0.25, 0.75]])
    hat1 = torch.tensor([[0.7, 0.3], [0.25, 0.75]])
    expected = torch.tensor([[0.7 * 0.75 + 0.3 * 0.25, 0.7 * 0.25 + 0.3 * 0.75],
                             [0.25 * 0.75 + 0.75 * 0.25, 0.25 * 0.25 + 0.75 * 0.75]])
    torch.testing.assert_close(hat1 @ hat0, expected)
    torch.testing.assert_close(attention_rollout(trace, "encoder")[0], expected)


def test_rollout_renormalises_rows_of_three():
    a = torch.tensor([[[[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.2, 0.3, 0.5]]]])  # one layer, one head
    trace = Trace()
    trace.record("decoder.0.self_attn.weights", a)
    expected = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.5, 0.5], [0.1, 0.15, 0.75]])
    torch.testing.assert_close(attention_rollout(trace, "decoder")[0], expected)


def test_encoder_decoder_rollout_against_the_joint_graph():
    """Independent of the incremental rule: one (T + S) x (T + S) matrix per decoder sub-layer over the joint
    graph of target states and memory states (memory states fixed), applied to the inputs' rollout
    [[I, 0], [0, R_enc]], on a model of three decoder layers, several rows and a padded batch."""
    model = tiny_model(n_decoder_layers=3, n_encoder_layers=2)
    src, tgt = batch()
    trace = Trace()
    with torch.no_grad():
        model(src, tgt[:, :-1], trace=trace)
    result = attribute(model, src, tgt, "rollout")
    t, s = tgt.size(1) - 1, src.size(1)
    for b in range(src.size(0)):
        state = torch.zeros(t + s, t + s, dtype=torch.float64)  # rows: target states, then memory states
        state[:t, :t] = torch.eye(t, dtype=torch.float64)
        state[t:, t:] = attention_rollout(trace, "encoder")[b]
        for layer in range(3):
            self_attn = torch.eye(t + s, dtype=torch.float64)
            mean = trace.attention("decoder", layer)[b].mean(0)
            hat = 0.5 * mean + 0.5 * torch.eye(t, dtype=torch.float64)
            self_attn[:t, :t] = hat / hat.sum(-1, keepdim=True)
            cross = torch.eye(t + s, dtype=torch.float64)
            cross[:t, :t] *= 0.5
            cross[:t, t:] = 0.5 * trace.attention("cross", layer)[b].mean(0)
            state = cross @ self_attn @ state
        real = tgt[b, 1:] != 0  # rows whose target is real (the others are zeroed by attribute)
        torch.testing.assert_close(result.source[b][real], state[:t, t:][real] * (src[b] != 0))
        torch.testing.assert_close(result.target[b][real], state[:t, :t][real].tril())
        sums = state[:t].sum(-1)
        torch.testing.assert_close(sums, torch.ones_like(sums))  # a row of source + target sums to 1
    last_cross_only = trace.attention("cross", 2).mean(1) @ attention_rollout(trace, "encoder")
    assert not torch.allclose(result.source[0], last_cross_only[0])  # the old rule's answer differs


def test_keep_graph_trace_records_the_tensors_in_the_graph():
    model = tiny_model()
    src, tgt = batch()
    kept, plain = Trace(keep_graph=True), Trace()
    logits = model(src, tgt, trace=kept)
    torch.testing.assert_close(logits, model(src, tgt, trace=plain))
    weights = kept.attention("cross", 0)
    assert weights.requires_grad and not plain.attention("cross", 0).requires_grad
    (grad,) = torch.autograd.grad(logits.sum(), weights)
    assert grad.shape == weights.shape


def test_relevancy_properties():
    model = tiny_model()
    src, tgt = batch()
    result = attribute(model, src, tgt, "relevancy")
    assert (result.source >= 0).all() and (result.target >= 0).all()
    assert (result.source[1, :, 3:] == 0).all() and (result.source[1, 2:] == 0).all()
    assert result.source[0].sum() > 0
    assert (result.target[0].diagonal() >= 1).all()  # R^tt starts from the identity


def test_relevancy_by_hand_on_one_layer_each_and_one_output():
    model = tiny_model(n_encoder_layers=1, n_decoder_layers=1, seed=2)
    src, tgt = torch.tensor([[5, 6, 7, 3]]), torch.tensor([[2, 8]])  # one row: explain token 8 after <s>
    trace = Trace(keep_graph=True)
    logits = model(src, tgt[:, :-1], trace=trace)
    score = torch.log_softmax(logits[0, 0], -1)[8]
    names = ["encoder.0.self_attn.weights", "decoder.0.self_attn.weights", "decoder.0.cross_attn.weights"]
    weights = [trace[n] for n in names]
    grads = torch.autograd.grad(score, weights)
    a_ss, a_tt, a_ts = (((g * w).clamp(min=0).mean(1))[0].detach() for g, w in zip(grads, weights, strict=True))
    r_ss = torch.eye(4, dtype=torch.float64) + a_ss  # eq. 6 on R^ss = I
    hat = r_ss - torch.eye(4, dtype=torch.float64)
    r_ss_bar = hat / hat.sum(-1, keepdim=True) + torch.eye(4, dtype=torch.float64)  # eqs. 8-9
    r_tt_bar = torch.tensor([[2.0 if a_tt.item() > 0 else 1.0]], dtype=torch.float64)  # 1x1: (Ā/Ā) + 1
    expected = r_tt_bar.T @ a_ts @ r_ss_bar  # eq. 10 on R^ts = 0
    result = attribute(model, src, tgt, "relevancy")
    torch.testing.assert_close(result.source[0], expected)
    torch.testing.assert_close(result.target[0], torch.eye(1, dtype=torch.float64) + a_tt)


def test_relevancy_against_an_independent_implementation_with_two_decoder_layers_and_several_rows():
    """One sentence and one explained row at a time (its own forward and backward, no copies), the rules of
    Chefer et al. 2021 (eqs. 6-10) written with explicit loops; a padded batch of two sentences, 2 + 2 layers."""
    model = tiny_model(n_encoder_layers=2, n_decoder_layers=2, seed=5)
    src, tgt = batch()
    result = attribute(model, src, tgt, "relevancy")
    eye = lambda n: torch.eye(n, dtype=torch.float64)  # noqa: E731

    def bar(r):  # eqs. 8-9, row by row
        out = r.clone()
        for i in range(r.size(0)):
            hat = r[i] - eye(r.size(0))[i]
            out[i] = (hat / hat.sum() if hat.sum() > 0 else torch.zeros_like(hat)) + eye(r.size(0))[i]
        return out

    for b, (s, t) in enumerate(((5, 5), (3, 3))):
        s_ids, t_ids = src[b:b + 1, :s], tgt[b:b + 1, :t]
        for row in range(t - 1):
            trace = Trace(keep_graph=True)
            logits = model(s_ids, t_ids[:, :-1], trace=trace)
            score = torch.log_softmax(logits[0, row], -1)[t_ids[0, row + 1]]
            names = [f"encoder.{i}.self_attn.weights" for i in range(2)] + [
                f"decoder.{i}.{k}.weights" for i in range(2) for k in ("self_attn", "cross_attn")]
            weights = [trace[n] for n in names]
            grads = torch.autograd.grad(score, weights)
            cam = {n: (g * w).clamp(min=0).mean(1)[0].detach() for n, g, w in zip(names, grads, weights, strict=True)}
            r_ss = eye(s)
            for i in range(2):
                r_ss = r_ss + cam[f"encoder.{i}.self_attn.weights"] @ r_ss
            r_tt, r_ts = eye(t - 1), torch.zeros(t - 1, s, dtype=torch.float64)
            for i in range(2):
                a_tt = cam[f"decoder.{i}.self_attn.weights"]
                r_tt = r_tt + a_tt @ r_tt
                r_ts = r_ts + a_tt @ r_ts
                r_ts = r_ts + bar(r_tt).T @ cam[f"decoder.{i}.cross_attn.weights"] @ bar(r_ss)
            torch.testing.assert_close(result.source[b, row, :s], r_ts[row])
            torch.testing.assert_close(result.target[b, row, : t - 1], r_tt[row])


def test_relevancy_helpers():
    weights = torch.tensor([[[[0.5, 0.5]], [[1.0, 0.0]]]])  # (1, 2 heads, 1, 2)
    grad = torch.tensor([[[[2.0, -2.0]], [[1.0, 3.0]]]])
    torch.testing.assert_close(weighted_attention(weights, grad), torch.tensor([[[1.0, 0.0]]]))
    r = torch.tensor([[[1.0, 0.0], [0.5, 1.5]]])
    torch.testing.assert_close(normalise_self(r), torch.tensor([[[1.0, 0.0], [0.5, 1.5]]]))
    r = torch.tensor([[[3.0, 1.0], [0.0, 1.0]]])
    torch.testing.assert_close(normalise_self(r), torch.tensor([[[5 / 3, 1 / 3], [0.0, 1.0]]]))


def test_logit_lens_last_layer_is_the_model():
    """The lens takes ``<s> y </s>`` as ``attribute`` does: its rows are the decoder input's, row t's last layer is
    the model's distribution after reading tgt[:, :t+1] (the one ``attribute`` explains at row t)."""
    for norm_first in (False, True):
        model = tiny_model(norm_first=norm_first)
        src, tgt = batch()  # tgt (2, 5) = <s> y </s>
        lens = logit_lens(model, src, tgt)
        assert lens.shape == (2, 2, 4, 12)  # (layers, B, T-1, V)
        torch.testing.assert_close(lens[-1], torch.log_softmax(model(src, tgt[:, :-1]), -1))
        torch.testing.assert_close(lens.exp().sum(-1), torch.ones(2, 2, 4, dtype=torch.float64))


def test_logit_lens_of_the_full_target_is_the_lens_of_the_decoder_input():
    """Every layer, by hand on the decoder input <s> y (what the lens read before it took <s> y </s>)."""
    model = tiny_model(n_decoder_layers=3)
    src, tgt = batch()
    trace = Trace()
    with torch.no_grad():
        model(src, tgt[:, :-1], trace=trace)
        by_hand = torch.stack([torch.log_softmax(model.generator(model.decoder.norm(trace[f"decoder.{layer}.output"])),
                                                 -1) for layer in range(3)])  # (3, B, T-1, V)
    torch.testing.assert_close(logit_lens(model, src, tgt), by_hand)
    with pytest.raises(ValueError, match="T >= 2"):
        logit_lens(model, src, tgt[:, :1])  # <s> alone: nothing is predicted


def test_logit_lens_top_is_the_lens_top_token_one_layer_at_a_time():
    """What the Explain page draws (each layer's top next token and its log-probability) without the whole
    (L, B, T-1, V) lens: the same ids and values as ``logit_lens(...).max(-1)``."""
    model = tiny_model(n_decoder_layers=3, norm_first=True)
    src, tgt = batch()
    ids, values = logit_lens_top(model, src, tgt)
    best = logit_lens(model, src, tgt).max(dim=-1)
    assert ids.shape == values.shape == (3, 2, 4)
    torch.testing.assert_close(ids, best.indices)
    torch.testing.assert_close(values, best.values)
    with pytest.raises(ValueError, match="T >= 2"):
        logit_lens_top(model, src, tgt[:, :1])


def test_the_maps_forward_records_every_site_but_the_logits():
    """``traced`` (the forward that attention, rollout, norm, ALTI+ and value zeroing read) stops at the decoder's
    output: the generator's projection onto the vocabulary, a third of a forward at NLLB size, is never read. Every
    other site is the full forward's."""
    from transformer.explain.attention_maps import traced

    model = tiny_model()
    src, tgt = batch()
    full = Trace()
    with torch.no_grad():
        model(src, tgt[:, :-1], trace=full)
    trace = traced(model, src, tgt)
    assert "logits" in full and "logits" not in trace
    assert set(trace.names()) == set(full.names()) - {"logits"}
    for name in trace.names():
        torch.testing.assert_close(trace[name], full[name])


def test_residual_stream():
    model = tiny_model()
    src, tgt = batch()
    frame = residual_stream(model, src, tgt)  # tgt = <s> y </s>, as attribute takes it
    assert list(frame.columns) == ["batch", "stack", "layer", "sublayer", "position", "update_norm", "stream_norm"]
    # encoder: 2 layers x 2 sublayers x 8 real source tokens; decoder: 2 x 3 x 7 real decoder inputs tgt[:, :-1]
    assert len(frame) == 2 * 2 * 8 + 2 * 3 * 7
    assert frame[frame["stack"] == "decoder"].position.max() == tgt.size(1) - 2
    assert set(frame.sublayer) == {"self_attn", "cross_attn", "feed_forward"}
    trace = Trace()
    model(src, tgt[:, :-1], trace=trace)
    # the stream into decoder layer 1 at the last decoder input is decoder layer 0's output there
    row = frame.query("batch == 0 and stack == 'decoder' and layer == 1 and sublayer == 'self_attn' "
                      "and position == 3").iloc[0]
    assert abs(row.stream_norm - trace["decoder.0.output"][0, 3].norm().item()) < 1e-9
    # the stream into layer 1's first sub-layer is layer 0's output
    row = frame.query("batch == 0 and stack == 'encoder' and layer == 1 and sublayer == 'self_attn' "
                      "and position == 2").iloc[0]
    assert abs(row.stream_norm - trace["encoder.0.output"][0, 2].norm().item()) < 1e-9
    # the update of encoder layer 0's self-attention, by hand: the attention on its input (post- or pre-LN)
    layer = model.encoder.layers[0]
    x = trace["src.input"]
    h = layer.self_attn_residual.norm(x) if model.config.norm_first else x
    with torch.no_grad():
        update = layer.self_attn(h, h, trace["encoder.mask"])
    row = frame.query("batch == 0 and stack == 'encoder' and layer == 0 and sublayer == 'self_attn' "
                      "and position == 1").iloc[0]
    assert abs(row.update_norm - update[0, 1].norm().item()) < 1e-9
    assert abs(row.stream_norm - x[0, 1].norm().item()) < 1e-9
    assert "encoder.0.self_attn.update" not in trace  # recorded only when asked for


def test_a_name_shared_by_a_function_and_its_module_stays_the_function():
    """``agreement`` is a function in agreement.py: importing the submodule (by asking for another of its names
    first) must not leave the package's ``agreement`` pointing at the module (seen: the Explain page failed with
    "'module' object is not callable" depending on import order)."""
    import subprocess
    import sys

    code = ("import transformer.explain as e; e.alignment_accuracy; "
            "from transformer.explain import agreement; assert callable(agreement), agreement")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
