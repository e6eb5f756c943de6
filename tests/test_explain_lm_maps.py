"""The attention family, relevancy, ALTI+ and value zeroing of decoder-only models, the residual stream and
faithfulness, each against the model run by hand on the whole sequence (``model.lm`` with a trace, its own
sub-layer outputs, its values zeroed through ``intervene``): the rows at P - 1 + t, split into the prompt's
columns and the continuation's, on GPT-2, Llama (GQA, RoPE), Qwen3 (q/k norms) and Gemma-2 (sandwich norms,
soft-caps, sliding windows)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from decoder_models import build_pair
from lm_explain_helpers import NAMES, N, P, inputs, log_probs_by_hand, sequence, tolerance

from transformer.explain import attribute, faithfulness, residual_stream
from transformer.explain.alti import decomposition
from transformer.network.interventions import intervene
from transformer.network.trace import Trace

pytest.importorskip("transformers")
L = P + N - 1  # the sequence sentence 0 is read as


@pytest.fixture(scope="module", params=NAMES)
def model(request):
    return build_pair(request.param).ours


def traced_by_hand(model, src, tgt, b: int = 0, **options) -> Trace:  # noqa: ANN001
    ids, mask = sequence(src, tgt, b)
    trace = Trace(**options)
    with torch.no_grad():
        model.lm(ids, attention_mask=mask, trace=trace)
    return trace


def split_by_hand(row: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A row over the sequence (L,) -> source (P,) and target (N,) with the placeholder's column 0."""
    return row[:P], torch.cat([row.new_zeros(1), row[P:]])


def assert_rows(result, maps: torch.Tensor, atol: float) -> None:  # noqa: ANN001
    """result's rows of sentence 0 against maps (L, L) by hand, read at P - 1 + t."""
    for t in range(N):
        source, target = split_by_hand(maps[P - 1 + t])
        torch.testing.assert_close(result.source[0, t], source, atol=atol, rtol=0)
        if result.target is not None:
            torch.testing.assert_close(result.target[0, t], target, atol=atol, rtol=0)


def test_attention_and_rollout_read_the_one_stack(model):
    src, tgt = inputs()
    trace = traced_by_hand(model, src, tgt)
    layers = [trace.attention("decoder", layer)[0].mean(0) for layer in range(model.config.n_decoder_layers)]
    assert_rows(attribute(model, src, tgt, "attention"), layers[-1], 1e-12)
    rolled = torch.eye(L, dtype=torch.float64)
    for a in layers:  # Abnar & Zuidema: rownorm(0.5 A + 0.5 I), multiplied through
        mixed = 0.5 * a + 0.5 * torch.eye(L, dtype=torch.float64)
        rolled = (mixed / mixed.sum(-1, keepdim=True)) @ rolled
    assert_rows(attribute(model, src, tgt, "rollout"), rolled, 1e-12)


def test_norm_by_heads_and_groups(model):
    """‖Σ_h α_h f_h(x_j)‖ through the last self-attention, head h reading key/value head h // (H / H_kv), by loops;
    with a sandwich norm through its map at the row, whose images then add up to the network's own update."""
    src, tgt = inputs()
    trace = traced_by_hand(model, src, tgt, sublayers=True)
    last = model.config.n_decoder_layers - 1
    unit = model.decoder.layers[last]
    attn, residual = unit.self_attn, unit.self_attn_residual
    values_in = residual.norm(trace[f"decoder.{last}.self_attn.stream"])[0]  # (L, D)
    alpha = trace.attention("decoder", last)[0]  # (H, L, L)
    h_kv, d_k, start = attn.n_kv_heads, attn.d_k, attn.d_inner + attn.d_kv
    bias = attn.in_proj.bias
    result = attribute(model, src, tgt, "norm")
    for t in range(N):
        i = P - 1 + t
        vectors = torch.zeros(L, model.config.d_model, dtype=torch.float64)
        for h in range(attn.n_heads):
            g = h // (attn.n_heads // h_kv)
            rows = slice(start + g * d_k, start + (g + 1) * d_k)
            v = values_in @ attn.in_proj.weight[rows].T + (bias[rows] if bias is not None else 0)  # (L, d_k)
            vectors += alpha[h, i, :, None] * (v @ attn.w_o.weight[:, h * d_k:(h + 1) * d_k].T)
        if residual.post_norm is not None:  # Gemma: (1 + w) v / rms(u_i), u_i the whole update before the norm
            u = vectors.sum(0) + (attn.w_o.bias if attn.w_o.bias is not None else 0)
            vectors = (1 + residual.post_norm.weight) * vectors / torch.sqrt(u.pow(2).mean() + residual.post_norm.eps)
            update = trace[f"decoder.{last}.self_attn.update"][0, i]
            torch.testing.assert_close(vectors.sum(0), update, atol=1e-5 * float(update.abs().max()), rtol=0)
        expected = vectors[:P].norm(dim=-1).detach()
        torch.testing.assert_close(result.source[0, t], expected, atol=tolerance(model) * float(expected.max()),
                                   rtol=0)


def test_alti_decomposition_sums_to_the_networks_own_block_output(model):
    """Σ_j T_i(x_j) (+ b_O where the model has biases) is the self-attention block's output x + update that the
    network computed, every layer: GPT-2's LayerNorm and biases, RMSNorm and GQA, Gemma's sandwich norm read at
    the row (vectors.py). To float32 rounding where the network normalises in float32."""
    src, tgt = inputs()
    for b in range(2):
        trace = traced_by_hand(model, src, tgt, b, sublayers=True)
        for layer in range(model.config.n_decoder_layers):
            with torch.no_grad():
                vectors, output = decomposition(model, trace, "decoder", layer)
            real = trace[f"decoder.{layer}.self_attn.stream"] + trace[f"decoder.{layer}.self_attn.update"]
            b_o = model.decoder.layers[layer].self_attn.w_o.bias
            found = vectors.sum(2) + (b_o if b_o is not None else 0)
            keep = sequence(src, tgt, b)[0] != 0  # padding queries are no one's concern
            atol = tolerance(model) * float(real.abs().max())
            torch.testing.assert_close(output[keep], real[keep], atol=atol, rtol=0)
            torch.testing.assert_close(found[keep], real[keep], atol=atol, rtol=0)


def test_value_zeroing_is_the_whole_model_run_with_a_tokens_values_zeroed(model):
    """A layer's own map (option ``layer``): C_l[i, j] = 1 - cos between layer l's output with position j's values
    zeroed in the whole forward (``intervene`` on ``model.lm``) and without, rows normalised; value zeroing runs
    the layer alone with the traced mask and rotation, and must measure the same."""
    src, tgt = inputs()
    ids, _ = sequence(src, tgt, 0)
    for layer in (0, model.config.n_decoder_layers - 1):  # Gemma-2: a sliding layer, then a full one
        clean = traced_by_hand(model, src, tgt)[f"decoder.{layer}.output"][0]  # (L, D)
        distances = torch.zeros(L, L, dtype=torch.float64)
        for j in range(L):
            def zero(values, j=j):  # noqa: ANN001, ANN202
                values = values.clone()
                values[:, :, j] = 0
                return values
            trace = Trace()
            with torch.no_grad(), intervene({f"decoder.{layer}.self_attn.values": zero}):
                model.lm(ids, trace=trace)
            distances[:, j] = (1 - F.cosine_similarity(trace[f"decoder.{layer}.output"][0], clean, dim=-1)).clamp(0)
        shares = distances / distances.sum(-1, keepdim=True)
        assert_rows(attribute(model, src, tgt, "value_zeroing", layer=layer), shares, 10 * tolerance(model))


def test_relevancy_by_autograd_on_the_whole_sequence(model):
    """Chefer et al.'s single-stream rule by hand: R = I, R += E_h[(∇A ⊙ A)^+] R per layer, ∇ of each row's own
    log-probability by autograd through ``model.lm``."""
    src, tgt = inputs()
    ids, _ = sequence(src, tgt, 0)
    result = attribute(model, src, tgt, "relevancy")
    for t in range(N):
        trace = Trace(keep_graph=True)
        with torch.enable_grad():
            logits = model.lm(ids, trace=trace)
            weights = [trace.attention("decoder", layer) for layer in range(model.config.n_decoder_layers)]
            score = torch.log_softmax(logits[0, P - 1 + t], -1)[tgt[0, t + 1]]
            grads = torch.autograd.grad(score, weights)
        relevance = torch.eye(L, dtype=torch.float64)
        for a, g in zip(weights, grads, strict=True):
            relevance = relevance + (g * a).clamp(min=0).mean(1)[0].detach() @ relevance
        source, target = split_by_hand(relevance[P - 1 + t])
        scale = float(relevance[P - 1 + t].abs().max())
        torch.testing.assert_close(result.source[0, t], source, atol=tolerance(model) * scale, rtol=0)
        torch.testing.assert_close(result.target[0, t], target, atol=tolerance(model) * scale, rtol=0)


def test_residual_stream_is_one_stack_over_the_sequence(model):
    src, tgt = inputs()
    table = residual_stream(model, src, tgt)
    assert set(table["stack"]) == {"decoder"} and set(table.sublayer) == {"self_attn", "feed_forward"}
    layers = model.config.n_decoder_layers
    assert (table.batch == 0).sum() == layers * 2 * L
    assert sorted(set(table[table.batch == 1].position)) == list(range(2, L))  # the left padding left out
    trace = traced_by_hand(model, src, tgt, sublayers=True)
    for position in (P - 1, L - 1):
        row = table[(table.batch == 0) & (table.layer == 1) & (table.sublayer == "feed_forward")
                    & (table.position == position)]
        expected = trace["decoder.1.feed_forward.update"][0, position].norm()
        assert float(row.update_norm.iloc[0]) == pytest.approx(float(expected), rel=1e-12)


def test_faithfulness_reads_p_off_the_model_and_keeps_the_bos(model):
    src, tgt = inputs()
    src = src.clone()
    src[0, 0] = model.config.bos_id  # special: never removed (a prompt without its BOS is one never seen)
    table = faithfulness(model, src, tgt, attribute(model, src, tgt, "occlusion"), n_random=1)
    method = table[table.ranking == "method"]
    for b in range(2):
        rows = method[method.batch == b]
        with torch.no_grad():
            expected = log_probs_by_hand(model, src, tgt, b).exp()[torch.tensor(rows.row.to_list())]
        torch.testing.assert_close(torch.tensor(rows.p.to_list(), dtype=torch.float64), expected,
                                   atol=tolerance(model), rtol=0)
    assert set(method[method.batch == 0].n) == {P - 1} and set(method[method.batch == 1].n) == {P - 2}
