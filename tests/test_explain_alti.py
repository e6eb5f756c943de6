"""ALTI+ (Ferrando et al. 2022) against an independent computation written with loops over tokens and heads,
on post-LN and pre-LN models with a padded batch; and the decomposition it rests on, checked against the
network's own sub-layer outputs, every kind of block, with every LayerNorm's γ and β moved off 1 and 0."""

from __future__ import annotations

import pytest
import torch
from explain_helpers import batch, perturb_norms, t5_model, tiny_model

from transformer.explain import attribute, source_share
from transformer.network.trace import Trace


def layer_norm_of_row(norm, z_row, v):
    """The LayerNorm of the row z written as a linear map of v (its σ from z), as in the paper."""
    sigma = torch.sqrt(z_row.var(unbiased=False) + norm.eps)
    return norm.weight * (v - v.mean()) / sigma


def block(attention, norm, x_q, x_kv, weights, norm_first, cross):
    """One sentence: per query i, the contributors' vectors and y_i, by loops."""
    d, h, d_k = attention.d_model, attention.n_heads, attention.d_k
    w_v, b_v = attention.in_proj.weight[2 * d:], attention.in_proj.bias[2 * d:]
    w_o, b_o = attention.w_o.weight, attention.w_o.bias
    # pre-LN normalises the stream it updates: the values of a self-attention, never the memory a cross-attention reads
    kv = torch.stack([norm(row) for row in x_kv]) if norm_first and not cross else x_kv
    rows = []
    for i in range(x_q.size(0)):
        moved = []
        for j in range(x_kv.size(0)):
            vector = torch.zeros(d, dtype=torch.float64)
            for head in range(h):
                part = slice(head * d_k, (head + 1) * d_k)
                value = kv[j] @ w_v[part].T + b_v[part]  # (d_k,)
                vector = vector + weights[head, i, j] * (value @ w_o[:, part].T)
            if not cross and i == j:
                vector = vector + x_q[i]
            moved.append(vector)
        if cross:
            moved.insert(0, x_q[i].clone())
        z = sum(moved) + b_o
        if norm_first:
            rows.append((moved, z))
        else:
            rows.append(([layer_norm_of_row(norm, z, v) for v in moved], norm(z)))
    return rows


def contributions(rows):
    out = []
    for vectors, y in rows:
        close = [max(0.0, float(y.abs().sum() - (y - v).abs().sum())) for v in vectors]
        out.append([c / sum(close) for c in close])
    return torch.tensor(out, dtype=torch.float64)


def by_loops(model, src, dec, only=None):
    """ALTI+ of one sentence composed by explicit loops; ``only``: decoder layer ``only``'s own mixing (no roll-out:
    source from its cross-attention over the encoder outputs, target c^res times its self-attention's shares)."""
    c = model.config
    trace = Trace()
    with torch.no_grad():
        model(src, dec, trace=trace)
        r_enc = None
        for layer in range(c.n_encoder_layers):
            x = (trace["src.input"] if layer == 0 else trace[f"encoder.{layer - 1}.output"])[0]
            unit = model.encoder.layers[layer]
            mixing = contributions(block(unit.self_attn, unit.self_attn_residual.norm, x, x,
                                         trace.attention("encoder", layer)[0], c.norm_first, cross=False))
            r_enc = mixing if r_enc is None else mixing @ r_enc
        t = dec.size(1)
        target, source = torch.eye(t, dtype=torch.float64), torch.zeros(t, src.size(1), dtype=torch.float64)
        for layer in range(c.n_decoder_layers):
            x = (trace["tgt.input"] if layer == 0 else trace[f"decoder.{layer - 1}.output"])[0]
            unit = model.decoder.layers[layer]
            mixing = contributions(block(unit.self_attn, unit.self_attn_residual.norm, x, x,
                                         trace.attention("decoder", layer)[0], c.norm_first, cross=False))
            target, source = mixing @ target, mixing @ source
            after = unit.self_attn_residual(x[None], lambda h: unit.self_attn(h, h, trace["decoder.mask"]))[0]
            cross = contributions(block(unit.cross_attn, unit.cross_attn_residual.norm, after,
                                        trace["encoder.output"][0], trace.attention("cross", layer)[0], c.norm_first,
                                        cross=True))
            if layer == only:
                return cross[:, 1:], cross[:, :1] * mixing
            target = cross[:, :1] * target
            source = cross[:, :1] * source + cross[:, 1:] @ r_enc
    return source, target


@pytest.mark.parametrize("norm_first", [False, True])
def test_alti_plus_against_loops_on_each_sentence_of_a_padded_batch(norm_first):
    model = perturb_norms(tiny_model(n_encoder_layers=2, n_decoder_layers=2, norm_first=norm_first))
    src, tgt = batch()
    result = attribute(model, src, tgt, "alti")
    for b, (s, t) in enumerate(((5, 5), (3, 3))):  # real lengths of source and target in batch()
        source, target = by_loops(model, src[b:b + 1, :s], tgt[b:b + 1, :t - 1])
        torch.testing.assert_close(result.source[b, : t - 1, :s], source)
        torch.testing.assert_close(result.target[b, : t - 1, : t - 1], target)
        share = source_share(result.source)[b, : t - 1]
        torch.testing.assert_close(share + result.target[b, : t - 1].sum(-1), torch.ones_like(share))
        assert (result.source >= 0).all() and (result.target >= 0).all()
        assert ((share > 0) & (share < 1)).all()


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("layer", [0, 1, -1])
def test_alti_plus_of_one_decoder_layer_against_loops(norm_first, layer):
    model = perturb_norms(tiny_model(n_encoder_layers=2, n_decoder_layers=2, norm_first=norm_first))
    src, tgt = batch()
    result = attribute(model, src, tgt, "alti", layer=layer)
    for b, (s, t) in enumerate(((5, 5), (3, 3))):
        source, target = by_loops(model, src[b:b + 1, :s], tgt[b:b + 1, :t - 1], only=layer % 2)
        torch.testing.assert_close(result.source[b, : t - 1, :s], source)
        torch.testing.assert_close(result.target[b, : t - 1, : t - 1], target)
        sums = result.source[b, : t - 1].sum(-1) + result.target[b, : t - 1].sum(-1)
        torch.testing.assert_close(sums, torch.ones_like(sums))


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize(("kind", "layer"), [("encoder", 1), ("decoder", 0), ("decoder", 1), ("cross", 0),
                                             ("cross", 1)])
def test_the_decomposition_sums_to_the_sub_layer_output(norm_first, kind, layer):
    """Σ_j T_i(x_j) + the biases is the attention sub-layer's real output, computed by the network's own
    SublayerConnection: pre-LN y = x + Attn(LN(x), ·), whose bias part is b_O; post-LN y = LN(x + Attn(x, ·)),
    whose bias part is L_i(b_O) + β. float64, every LayerNorm moved off γ = 1, β = 0."""
    from transformer.explain.alti import decomposition

    model = perturb_norms(tiny_model(norm_first=norm_first))
    src, tgt = batch()
    trace = Trace()
    with torch.no_grad():
        model(src, tgt[:, :-1], trace=trace)
        vectors, output = decomposition(model, trace, kind, layer)
        stack = "encoder" if kind == "encoder" else "decoder"
        unit = getattr(model, stack).layers[layer]
        x = trace[f"{'src' if stack == 'encoder' else 'tgt'}.input"] if layer == 0 else \
            trace[f"{stack}.{layer - 1}.output"]
        self_mask = trace["encoder.mask"] if stack == "encoder" else trace["decoder.mask"]
        if kind == "cross":
            x = unit.self_attn_residual(x, lambda h: unit.self_attn(h, h, self_mask))
            memory = trace["encoder.output"]
            attention, sublayer = unit.cross_attn, unit.cross_attn_residual
            real = sublayer(x, lambda h: attention(h, memory, trace["cross.mask"]))
        else:
            attention, sublayer = unit.self_attn, unit.self_attn_residual
            real = sublayer(x, lambda h: attention(h, h, self_mask))
        b_o, norm = attention.w_o.bias, sublayer.norm
        if norm_first:
            bias_part = b_o
        else:
            # the post-LN sum z = x + Attn(x, ·) from the modules, and L_i(b_O) + β with z's own σ_i
            read = memory if kind == "cross" else x
            z = x + attention(x, read, trace["cross.mask"] if kind == "cross" else self_mask)
            sigma = torch.sqrt(z.var(-1, unbiased=False, keepdim=True) + norm.eps)
            bias_part = norm.weight * (b_o - b_o.mean()) / sigma + norm.bias
    real_rows = (tgt[:, 1:] != 0) if stack == "decoder" else (src != 0)  # padding queries are no one's concern
    torch.testing.assert_close(output[real_rows], real[real_rows], atol=1e-6, rtol=0)
    torch.testing.assert_close((vectors.sum(2) + bias_part)[real_rows], real[real_rows], atol=1e-6, rtol=0)


@pytest.mark.parametrize(("kind", "layer"), [("encoder", 0), ("encoder", 1), ("decoder", 1), ("cross", 0),
                                             ("cross", 1)])
def test_the_decomposition_holds_on_t5(kind, layer):
    """T5: pre-RMSNorm (γ off 1), no biases, relative position bias in the scores. Σ_j T_i(x_j) is the
    sub-layer's real output x + Attn(RMSNorm(x), ·) with the bias the forward added, exactly: no bias part."""
    from transformer.explain.alti import decomposition

    model = t5_model()
    src, tgt = batch()
    trace = Trace()
    with torch.no_grad():
        model(src, tgt[:, :-1], trace=trace)
        vectors, output = decomposition(model, trace, kind, layer)
        stack = "encoder" if kind == "encoder" else "decoder"
        unit = getattr(model, stack).layers[layer]
        x = trace[f"{'src' if stack == 'encoder' else 'tgt'}.input"] if layer == 0 else \
            trace[f"{stack}.{layer - 1}.output"]
        self_mask = trace["encoder.mask"] if stack == "encoder" else trace["decoder.mask"]
        bias = trace[f"{stack}.position_bias"]  # (1, H, L, L)
        after_self = unit.self_attn_residual(x, lambda h: unit.self_attn(h, h, self_mask, position_bias=bias))
        if kind == "cross":
            memory = trace["encoder.output"]
            real = unit.cross_attn_residual(after_self, lambda h: unit.cross_attn(h, memory, trace["cross.mask"]))
        else:
            real = after_self
    assert unit.self_attn.w_o.bias is None and not unit.self_attn.scale
    real_rows = (tgt[:, 1:] != 0) if stack == "decoder" else (src != 0)
    torch.testing.assert_close(vectors.sum(2)[real_rows], real[real_rows], atol=1e-10, rtol=0)
    torch.testing.assert_close(output[real_rows], real[real_rows], atol=1e-10, rtol=0)
