"""head_summary's patterns on hand-made traces, its importance against explicit ablated forwards,
the roles' thresholds, and the pruning curve's bookkeeping."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from explain_helpers import batch, tiny_model

from transformer.decoding import greedy_decode
from transformer.explain import ROLES, head_summary, pruning_curve
from transformer.explain.head_patterns import pattern_rows
from transformer.explain.heads import POSITIONAL_THRESHOLD, head_roles
from transformer.network.config import SpecialIds
from transformer.network.trace import Trace
from transformer.text.ids import BOS_ID, EOS_ID, PAD_ID, UNK_ID

IDS = SpecialIds(PAD_ID, UNK_ID, BOS_ID, EOS_ID)


def hand_trace() -> tuple[Trace, torch.Tensor, torch.Tensor]:
    """One sentence: source "a b </s>", decoder input "<s> y <pad>"; one layer of each kind, 2 heads."""
    src = torch.tensor([[5, 6, EOS_ID]])
    dec = torch.tensor([[BOS_ID, 7, PAD_ID]])
    eye, uniform = torch.eye(3), torch.full((3, 3), 1 / 3)
    decoder = torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]])  # row 2 is padding: ignored
    trace = Trace()
    trace.record("encoder.0.self_attn.weights", torch.stack([eye, uniform])[None])  # (1, 2, 3, 3)
    trace.record("decoder.0.self_attn.weights", torch.stack([decoder, decoder])[None])
    trace.record("decoder.0.cross_attn.weights", torch.stack([uniform, eye])[None])
    return trace, src, dec


def test_patterns_by_hand():
    trace, src, dec = hand_trace()
    rows = {(r["kind"], r["head"]): r for r in pattern_rows(trace, src, dec, ids=IDS)}
    identity, even = rows[("encoder", 0)], rows[("encoder", 1)]
    assert (identity["entropy"], identity["distance"], identity["same"], identity["previous"]) == (0, 0, 1, 0)
    assert identity["special"] == pytest.approx(1 / 3)  # only the query </s> looks at </s>
    assert even["entropy"] == pytest.approx(math.log(3))
    assert even["distance"] == pytest.approx((1 + 2 / 3 + 1) / 3)  # rows: (0+1+2)/3, (1+0+1)/3, (2+1+0)/3
    assert (even["same"], even["previous"], even["next"]) == pytest.approx((1 / 3, 2 / 9, 2 / 9))
    decoder = rows[("decoder", 0)]  # queries <s> -> [1, 0], y -> [.5, .5]; the padding query left out
    assert decoder["entropy"] == pytest.approx((0 + math.log(2)) / 2)
    assert (decoder["same"], decoder["previous"], decoder["next"]) == pytest.approx((0.75, 0.25, 0.0))
    assert decoder["special"] == pytest.approx(0.75)  # weight on <s>
    assert decoder["distance"] == pytest.approx(0.25)
    cross = rows[("cross", 1)]  # queries 0 and 1 on source tokens 0 and 1: no </s>
    assert cross["entropy"] == 0 and cross["special"] == 0
    assert all(math.isnan(cross[c]) for c in ("distance", "same", "previous", "next", "alignment"))
    assert rows[("cross", 0)]["special"] == pytest.approx(1 / 3)


def test_alignment_share_by_hand():
    trace, src, dec = hand_trace()
    alignment = torch.zeros(1, 3, 3, dtype=torch.bool)
    alignment[0, 0, 0] = True  # row 0: true source 0; head 1 (identity) looks there, head 0 (uniform) at 0 too
    alignment[0, 1, 2] = True  # row 1: true source 2; identity looks at 1 (miss), uniform's argmax is 0 (miss)
    rows = {(r["kind"], r["head"]): r for r in pattern_rows(trace, src, dec, alignment=alignment, ids=IDS)}
    assert rows[("cross", 1)]["alignment"] == 0.5  # row 2 has no true source: not counted
    assert rows[("cross", 0)]["alignment"] == 0.5  # uniform: argmax is the first source token
    assert math.isnan(rows[("encoder", 0)]["alignment"])
    none = pattern_rows(trace, src, dec, alignment=torch.zeros(1, 3, 3, dtype=torch.bool), ids=IDS)
    assert all(math.isnan(r["alignment"]) for r in none)


def test_arc_shares_by_hand():
    trace, src, dec = hand_trace()
    weights = torch.tensor([[[0.1, 0.8, 0.1], [0.6, 0.2, 0.2], [0.1, 0.2, 0.7]]] * 2)[None]  # both heads
    weights[0, 1] = torch.eye(3)
    trace.record("encoder.0.self_attn.weights", weights)
    arcs = [[(0, 1, "amod"), (1, 0, "nsubj"), (2, 0, "nsubj")]]
    rows = {(r["kind"], r["head"]): r for r in pattern_rows(trace, src, dec, arcs=arcs, ids=IDS)}
    assert rows[("encoder", 0)]["rel_amod"] == 1.0  # dependent 0 looks most at 1, its head
    assert rows[("encoder", 0)]["rel_nsubj"] == 0.5  # 1 -> 0 yes; 2 -> 2, not 0
    assert rows[("encoder", 1)]["rel_amod"] == 0.0 and rows[("encoder", 1)]["rel_nsubj"] == 0.0  # identity
    assert math.isnan(rows[("cross", 0)]["rel_amod"]) and math.isnan(rows[("decoder", 1)]["rel_nsubj"])


def test_head_summary_columns_and_entropy_from_its_trace():
    model, (src, tgt) = tiny_model(), batch()
    frame = head_summary(model, src, tgt)
    assert list(frame.columns[:13]) == ["kind", "layer", "head", "entropy", "distance", "same", "previous", "next",
                                        "special", "importance", "importance_gradient",
                                        "importance_gradient_normalised", "alignment"]
    assert {"entropy_low", "entropy_high", "same_low", "alignment_high", "role", "role_detail"} <= set(frame.columns)
    real = frame.dropna(subset=["same"])
    assert ((real.same_low <= real.same + 1e-12) & (real.same <= real.same_high + 1e-12)).all()
    assert len(frame) == 2 * (2 + 2 + 2) and set(frame.role) <= set(ROLES)
    trace = Trace()
    model(src, tgt[:, :-1], trace=trace)
    weights = trace.attention("cross", 1)  # (B, H, T-1, S); sentence 1's decoder input has 1 padding query
    entropies = [-(w * w.log()).nansum() for b, length in ((0, 4), (1, 3)) for w in weights[b, 0, :length]]
    row = frame[(frame.kind == "cross") & (frame.layer == 1) & (frame["head"] == 0)].iloc[0]
    assert row.entropy == pytest.approx(float(sum(entropies) / len(entropies)), rel=1e-12)


def test_importance_is_the_ablated_loss_difference():
    model, (src, tgt) = tiny_model(), batch()
    frame = head_summary(model, src, tgt).set_index(["kind", "layer", "head"])

    def loss(ablate=None):
        with torch.no_grad():
            logits = model(src, tgt[:, :-1], ablate=ablate)
        return float(F.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten(), ignore_index=PAD_ID))

    for kind, layer, head in (("encoder", 1, 0), ("cross", 0, 1), ("decoder", 1, 1)):
        expected = loss({(kind, layer): [head]}) - loss()
        assert frame.loc[(kind, layer, head), "importance"] == pytest.approx(expected, abs=1e-12)


def test_ablation_in_length_chunks_is_the_same_sum(monkeypatch):
    """Chunks of one sentence, each cut to its own length, give the one-batch ablation losses exactly."""
    from transformer.explain import heads

    model, (src, tgt) = tiny_model(), batch()
    whole = heads.head_importance(model, src, tgt)
    monkeypatch.setattr(heads, "ABLATION_CHUNK", 1)
    chunks = heads.length_chunks(src, tgt, PAD_ID)
    assert [tuple(t.shape) for pair in chunks for t in pair] == [(1, 3), (1, 3), (1, 5), (1, 5)]  # shorter first
    chunked = heads.head_importance(model, src, tgt)
    assert chunked.keys() == whole.keys()
    assert all(chunked[key] == pytest.approx(whole[key], abs=1e-12) for key in whole)


def test_gradient_importance_in_chunks_of_sentences_is_the_same(monkeypatch):
    """Sentence b's loss depends only on its own gates: a sentence at a time gives the whole batch's numbers."""
    from transformer.explain import heads

    model, (src, tgt) = tiny_model(), batch()
    whole = heads.gradient_importance(model, src, tgt)
    monkeypatch.setattr(heads, "GRADIENT_CHUNK", 1)
    chunked = heads.gradient_importance(model, src, tgt)
    assert chunked.keys() == whole.keys() and len(whole) == 3 * 2 * model.config.n_heads
    assert all(chunked[key] == pytest.approx(whole[key], rel=1e-9, abs=1e-12) for key in whole)


def test_ablated_loss_in_length_chunks_is_the_mean_over_every_real_token(monkeypatch):
    from transformer.explain import heads

    model, (src, tgt) = tiny_model(), batch()
    ablate = {("cross", 0): [1], ("encoder", 1): [0]}
    with torch.no_grad():
        logits = model(src, tgt[:, :-1], ablate=ablate)
    expected = float(F.cross_entropy(logits.flatten(0, 1).double(), tgt[:, 1:].flatten(), ignore_index=PAD_ID))
    assert heads.ablated_loss(model, src, tgt, ablate) == pytest.approx(expected, rel=1e-12)
    monkeypatch.setattr(heads, "ABLATION_CHUNK", 1)
    assert heads.ablated_loss(model, src, tgt, ablate) == pytest.approx(expected, rel=1e-9)


def test_gradient_importance_is_michels_expected_absolute_gate_gradient():
    """Independent of the gate hooks: scaling head h's output by ξ scales W^O's columns of head h, so
    ∂L_b/∂ξ_h = Σ (∂L_b/∂W^O ⊙ W^O) over those columns; per sentence from the parameters' own gradients."""
    model, (src, tgt) = tiny_model(), batch()
    summary = head_summary(model, src, tgt, importance="gradient")
    assert summary.importance.isna().all() and (summary.importance_gradient >= 0).all()  # ablation skipped
    both = head_summary(model, src, tgt)
    pd.testing.assert_series_equal(both.importance_gradient, summary.importance_gradient)
    assert both.importance.notna().all()
    d_k = model.config.d_model // model.config.n_heads
    expected: dict[tuple[str, int, int], list[float]] = {}
    for b in range(src.size(0)):
        model.zero_grad()
        logits = model(src[b:b + 1], tgt[b:b + 1, :-1])
        F.cross_entropy(logits[0], tgt[b, 1:], ignore_index=PAD_ID).backward()
        for kind, stack, sub in (("encoder", "encoder", "self_attn"), ("decoder", "decoder", "self_attn"),
                                 ("cross", "decoder", "cross_attn")):
            for layer in range(2):
                w_o = getattr(getattr(model, stack).layers[layer], sub).w_o.weight
                for head in range(model.config.n_heads):
                    columns = slice(head * d_k, (head + 1) * d_k)
                    gate_grad = float((w_o.grad[:, columns] * w_o.detach()[:, columns]).sum())
                    expected.setdefault((kind, layer, head), []).append(abs(gate_grad))
    model.zero_grad()
    for row in summary.itertuples():
        assert math.isclose(row.importance_gradient, sum(expected[(row.kind, row.layer, row.head)]) / src.size(0),
                            rel_tol=1e-9, abs_tol=1e-12)
    assert not any(m._forward_pre_hooks for m in model.modules())  # the gates lived on a private view
    with pytest.raises(ValueError, match="importance"):
        head_summary(model, src, tgt, importance="taylor")


def test_gradient_importance_normalised_per_layer_as_michel_et_al_and_the_pruning_order():
    """I_h / sqrt(sum of I^2 over the heads of its (kind, layer)), as Michel et al.'s code does before pruning; the
    gradient pruning curve follows it. By hand on the tiny model's 12 heads: encoder 0 (3, 4) -> (0.6, 0.8);
    encoder 1 (0, 0) -> (0, 0); decoder 0 (1, 0) -> (1, 0); decoder 1 (2, 2), cross 0 (5, 5) -> both 1/sqrt 2;
    cross 1 (0.3, 0.4) -> (0.6, 0.8). Raw, cross 0 would go last and cross 1 before encoder 0."""
    from transformer.explain.heads import layer_normalised

    raw = [3, 4, 0, 0, 1, 0, 2, 2, 5, 5, 0.3, 0.4]
    keys = [(kind, layer, head) for kind in ("encoder", "decoder", "cross") for layer in (0, 1) for head in (0, 1)]
    frame = pd.DataFrame(keys, columns=["kind", "layer", "head"]).assign(importance_gradient=raw)
    half = 0.5 ** 0.5
    assert layer_normalised(frame).tolist() == pytest.approx([0.6, 0.8, 0, 0, 1, 0, half, half, half, half, 0.6, 0.8])
    model, (src, tgt) = tiny_model(), batch()
    curve = pruning_curve(model, src, tgt, frame, by="gradient", every=12)
    by_hand = [2, 3, 5, 0, 10, 6, 7, 8, 9, 1, 11, 4]  # 0s first, then 0.6s, 1/sqrt 2s, 0.8s, 1; ties in row order
    assert list(curve.heads_off.iloc[-1]) == [keys[i] for i in by_hand]
    summary = head_summary(model, src, tgt, importance="gradient")
    norms = summary.groupby(["kind", "layer"]).importance_gradient_normalised.apply(lambda v: (v ** 2).sum())
    assert norms.to_numpy() == pytest.approx(1.0)
    pd.testing.assert_series_equal(summary.importance_gradient_normalised, layer_normalised(summary),
                                   check_names=False)


def test_roles_follow_thresholds_and_precedence():
    nan = float("nan")
    base = dict(kind="encoder", same=0.1, previous=0.1, next=0.1, special=0.1, alignment=nan, rel_nsubj=0.1)
    cases = [
        (dict(previous=POSITIONAL_THRESHOLD, rel_nsubj=0.9), ("positional", "previous")),  # positional first
        (dict(rel_nsubj=0.5, special=0.9), ("syntactic", "nsubj")),
        (dict(kind="cross", same=nan, previous=nan, next=nan, rel_nsubj=nan, alignment=0.5, special=0.6),
         ("alignment", "")),
        (dict(kind="cross", same=nan, previous=nan, next=nan, rel_nsubj=nan, alignment=0.2, special=0.6,
              special_token="</s>"), ("no-op", "</s>")),  # the detail is the token that gets the weight
        (dict(kind="decoder", same=0.3, rel_nsubj=nan, special=0.5, special_token="<pad>"), ("no-op", "<pad>")),
        (dict(kind="decoder", same=0.3, rel_nsubj=nan, special=0.5), ("no-op", "special tokens")),  # none named
        (dict(same=0.49, rel_nsubj=0.49, special=0.49), ("mixed", "")),
        (dict(kind="decoder", rel_nsubj=nan, agree_nsubj=0.5, agree_det=0.7, special=0.9), ("agreement", "det")),
        (dict(kind="decoder", previous=0.5, rel_nsubj=nan, agree_det=0.9), ("positional", "previous")),
    ]
    frame = head_roles(pd.DataFrame([{**base, **change} for change, _ in cases]))
    assert list(zip(frame.role, frame.role_detail, strict=True)) == [want for _, want in cases]


def test_bad_annotations_are_refused():
    model, (src, tgt) = tiny_model(), batch()
    with pytest.raises(ValueError, match="alignment must be a bool tensor"):
        head_summary(model, src, tgt, alignment=torch.zeros(2, 5, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="real source tokens"):
        head_summary(model, src, tgt, arcs=[[], [(0, 4, "x")]])  # sentence 1's position 4 is padding
    with pytest.raises(ValueError, match="one list per sentence"):
        head_summary(model, src, tgt, arcs=[[]])
    with pytest.raises(ValueError, match="real target tokens"):
        head_summary(model, src, tgt, target_arcs=[[], [(0, tgt.size(1) - 1, "det")]])  # past tgt_ids[:, 1:]


def test_head_summary_scores_agreement_on_the_decoder_with_target_arcs():
    model, (src, tgt) = tiny_model(), batch()
    frame = head_summary(model, src, tgt, target_arcs=[[(0, 1, "det"), (1, 2, "nsubj")], [(0, 1, "det")]],
                         importance="gradient")
    decoder = frame[frame.kind == "decoder"]
    assert decoder.agree_det.notna().all() and frame[frame.kind != "decoder"].agree_det.isna().all()
    assert (decoder.agree_det_baseline == 1.0).all()  # both det arcs: row 1 -> key 1, offset 0


def test_pruning_curve_bookkeeping():
    model, (src, _) = tiny_model(seed=3), batch()
    with torch.no_grad():
        model.generator.bias[EOS_ID] += 1.25  # a test model that ends its outputs: lengths 5 and 2
    own = greedy_decode(model, src, max_len=8)  # the model's own outputs as references: step 0 matches all
    assert all(own.finished)
    tgt = own.ids.clone()  # out of inference mode
    importance = head_summary(model, src, tgt)
    curve = pruning_curve(model, src, tgt, importance)
    order = importance.sort_values("importance", kind="stable")
    heads = list(zip(order.kind, order.layer, order["head"], strict=True))
    assert list(curve.n_heads_off) == list(range(len(heads) + 1))
    assert [list(h) for h in curve.heads_off] == [heads[:n] for n in range(len(heads) + 1)]
    with torch.no_grad():
        loss = F.cross_entropy(model(src, tgt[:, :-1]).flatten(0, 1), tgt[:, 1:].flatten(), ignore_index=PAD_ID)
    assert curve.exact_match[0] == 1.0 and curve.loss[0] == pytest.approx(float(loss), abs=1e-12)
    ablate: dict = {}
    for kind, layer, head in heads[:3]:
        ablate.setdefault((kind, layer), []).append(head)
    expected = greedy_decode(model, src, max_len=tgt.size(1) - 1, ablate=ablate)
    refs = [row[1:row.index(EOS_ID)] for row in tgt.tolist()]
    right = sum(f and t == r for t, f, r in zip(expected.tokens, expected.finished, refs, strict=True))
    assert curve.exact_match[3] == right / len(refs)
    with pytest.raises(ValueError, match="missing"):
        pruning_curve(model, src, tgt, importance.drop(columns="importance"))


def test_a_pruning_curve_every_k_heads_keeps_those_steps_of_the_full_curve():
    model, (src, tgt) = tiny_model(), batch()
    summary = head_summary(model, src, tgt)
    full = pruning_curve(model, src, tgt, summary)
    assert len(summary) == 12  # at every=5: steps 0, 5, 10 and 12 (all off)
    sparse = pruning_curve(model, src, tgt, summary, every=5)
    assert list(sparse.n_heads_off) == [0, 5, 10, 12]
    pd.testing.assert_frame_equal(sparse, full.iloc[list(sparse.n_heads_off)].reset_index(drop=True))
    for bad in (0, -2, 1.5):
        with pytest.raises(ValueError, match="every"):
            pruning_curve(model, src, tgt, summary, every=bad)


def test_pruning_curve_follows_the_measure_it_is_given():
    model, (src, tgt) = tiny_model(), batch()
    summary = head_summary(model, src, tgt)
    for by, column in (("ablation", "importance"), ("gradient", "importance_gradient_normalised")):
        curve = pruning_curve(model, src, tgt, summary, by=by)
        order = summary.sort_values(column, kind="stable")
        assert list(curve.heads_off.iloc[-1]) == list(zip(order.kind, order.layer, order["head"], strict=True))
    assert list(pruning_curve(model, src, tgt, summary, by="gradient").heads_off.iloc[-1]) != \
        list(pruning_curve(model, src, tgt, summary).heads_off.iloc[-1])  # the two orders differ on this model
    with pytest.raises(ValueError, match="not computed"):
        pruning_curve(model, src, tgt, head_summary(model, src, tgt, importance="gradient"), by="ablation")
    with pytest.raises(ValueError, match="by"):
        pruning_curve(model, src, tgt, summary, by="taylor")


def test_agreement_heads_on_a_hand_built_decoder_attention():
    """Three sentences, decoder input of 6 real tokens; German arcs on target positions (the token row t predicts).
    Agreement arc (earlier word e, later word l) -> row l looks at key e + 1 (the input position holding e)."""
    target_arcs = [[(0, 2, "det"), (2, 4, "nsubj"), (4, 5, "amod"), (0, 5, "obj")],  # rows/keys 2/1, 4/3, 5/5
                   [(3, 1, "det"), (2, 5, "nsubj"), (2, 4, "amod")],  # 3/2, 5/3, 4/3
                   [(1, 2, "det"), (1, 3, "nsubj"), (5, 1, "amod")]]  # 2/2, 3/2, 5/2
    exact = torch.zeros(3, 6, 6)
    exact[:, :, 0] = 1.0  # rows without an arc look at <s>
    for b, sentence in enumerate(target_arcs):
        for dep, head, rel in sentence:
            if rel != "obj":
                exact[b, max(dep, head)] = 0.0
                exact[b, max(dep, head), min(dep, head) + 1] = 1.0
    previous = torch.zeros(6, 6)
    previous[0, 0] = 1.0
    previous[torch.arange(1, 6), torch.arange(0, 5)] = 1.0  # each row on the key before it
    trace = Trace()
    trace.record("encoder.0.self_attn.weights", torch.full((3, 2, 3, 3), 1 / 3))
    trace.record("decoder.0.self_attn.weights", torch.stack([exact, previous.expand(3, 6, 6)], dim=1))
    trace.record("decoder.0.cross_attn.weights", torch.full((3, 2, 6, 3), 1 / 3))
    src, dec = torch.tensor([[5, 6, EOS_ID]] * 3), torch.tensor([[BOS_ID, 7, 8, 9, 10, 11]] * 3)
    rows = pd.DataFrame(pattern_rows(trace, src, dec, ids=IDS, target_arcs=target_arcs))
    assert not any(c.startswith("agree_obj") for c in rows.columns)  # only relations that agree
    along, positional = rows[rows.kind == "decoder"].to_dict("records")
    # the best fixed offset: det -1 (2 of 3), nsubj -1 (2 of 3), amod 0, -1 or -3 (1 of 3)
    assert (along["agree_det_baseline"], along["agree_nsubj_baseline"], along["agree_amod_baseline"]) == \
        pytest.approx((2 / 3, 2 / 3, 1 / 3))
    for rel in ("det", "nsubj", "amod"):
        assert along[f"agree_{rel}"] == 1.0 and along[f"agree_{rel}_low"] == 1.0
        assert positional[f"agree_{rel}"] == pytest.approx(positional[f"agree_{rel}_baseline"])
    assert rows[rows.kind != "decoder"].agree_det.isna().all()
    roles = head_roles(rows)
    decoder = roles[roles.kind == "decoder"]
    assert list(decoder.role) == ["agreement", "positional"]


def test_progress_is_told_before_every_step_and_ends_at_one(monkeypatch):
    """head_summary: the traced forward, one ablation per head, one gradient chunk per GRADIENT_CHUNK sentences,
    then 1.0; shares never go back. pruning_curve: once per step, then 1.0. Same numbers as without progress."""
    from transformer.explain import heads

    monkeypatch.setattr(heads, "GRADIENT_CHUNK", 1)  # two chunks for the two sentences
    model, (src, tgt) = tiny_model(), batch()
    told: list[tuple[float, str]] = []
    summary = head_summary(model, src, tgt, progress=lambda share, what: told.append((share, what)))
    pd.testing.assert_frame_equal(summary, head_summary(model, src, tgt))
    shares, whats = [s for s, _ in told], [w for _, w in told]
    assert len(told) == 1 + 12 + 2 + 1 and shares[0] == 0.0 and shares[-1] == 1.0
    assert shares == sorted(shares) and len(set(shares)) == len(shares)
    assert whats[1] == "ablation importance: encoder layer 0 head 0 off"
    assert whats[-2] == "gradient importance: sentences 2-2 of 2"
    cost = heads.STEP_COST  # the ablations' share: 12 heads at half a forward each
    assert shares[13] == pytest.approx((cost["patterns"] + 12 * cost["ablation"]) / (cost["patterns"] + 12 * cost[
        "ablation"] + cost["gradient"]))
    told.clear()
    head_summary(model, src, tgt, importance="gradient", progress=lambda share, what: told.append((share, what)))
    assert [s for s, _ in told] == pytest.approx([0.0, 0.25, 0.625, 1.0])  # patterns 1, gradient 3 in two chunks
    told.clear()
    curve = pruning_curve(model, src, tgt, summary, every=5, progress=lambda share, what: told.append((share, what)))
    pd.testing.assert_frame_equal(curve, pruning_curve(model, src, tgt, summary, every=5))
    assert told == [(0.0, "decoding with 0 of 12 heads off"), (0.25, "decoding with 5 of 12 heads off"),
                    (0.5, "decoding with 10 of 12 heads off"), (0.75, "decoding with 12 of 12 heads off"),
                    (1.0, "done")]


def test_within_maps_a_parts_progress_onto_its_slice():
    from transformer.explain.progress import within

    told: list = []
    part = within(lambda share, what: told.append((share, what)), 0.5, 0.75, "gradient: ")
    part(0.0, "a")
    part(0.5, "b")
    part(2.0, "c")  # clamped to the slice
    assert told == [(0.5, "gradient: a"), (0.625, "gradient: b"), (0.75, "gradient: c")]
    assert within(None, 0.0, 1.0) is None


@pytest.mark.parametrize(("layout", "start", "source_code", "target_code"),
                         [("mbart50", "</s>", "en_XX", "de_DE"), ("nllb", "</s>", "eng_Latn", "deu_Latn"),
                          ("t5", "<pad>", None, None)])
def test_special_is_every_special_token_of_the_tokenizer_and_names_the_real_one(
        family_tokenizers, layout: str, start: str, source_code: str | None, target_code: str | None):
    """A multilingual source is ``[source code] words </s>`` and its decoder input ``</s> [target code] words``;
    T5's are ``words </s>`` and ``<pad> words``. Heads that put all their weight on the source code, on the forced
    target code or on the decoder's start are no-op heads whose detail is that token as the tokenizer writes it,
    since "special" is every token the tokenizer calls special (``special_tokens``), not a list of our own."""
    from transformer.hub.fast_tokenizer import load_fast_tokenizer

    tok = load_fast_tokenizer(family_tokenizers[layout], layout, decoder_start_id=0 if layout == "t5" else 2)
    assert tok.id_to_piece(tok.bos_id) == start
    words = [tok.encode(word)[0] for word in ("the", "house", "is", "small")]
    prefix = [tok.lang_code_ids[source_code]] if source_code else []
    forced = [tok.lang_code_ids[target_code]] if target_code else []
    src = torch.tensor([[*prefix, *words, tok.eos_id]])
    dec = torch.tensor([[tok.bos_id, *forced, *words]])  # (1, T): long enough that no fixed offset explains a head
    s, t = src.size(1), dec.size(1)
    sink = 0 if source_code else s - 1  # the source code, else </s>
    source_sink = torch.zeros(s, s)
    source_sink[:, sink] = 1.0  # (S, S): every query on one key
    cross = torch.zeros(t, s)
    cross[:, sink] = 1.0
    last = len(forced)  # decoder key of the forced code (multilingual), else the start
    on_code = torch.zeros(t, t)
    for q in range(t):
        on_code[q, min(q, last)] = 1.0  # the causal mask lets query 0 see only the start
    on_start = torch.zeros(t, t)
    on_start[:, 0] = 1.0
    trace = Trace()
    trace.record("encoder.0.self_attn.weights", source_sink[None, None])  # (1, 1, S, S)
    trace.record("decoder.0.self_attn.weights", torch.stack([on_code, on_start])[None])  # (1, 2, T, T)
    trace.record("decoder.0.cross_attn.weights", torch.stack([cross, cross])[None])
    ids = SpecialIds(tok.pad_id, tok.unk_id, tok.bos_id, tok.eos_id)
    rows = pd.DataFrame(pattern_rows(trace, src, dec, ids=ids, special=(tok.special_tokens(), tok.special_tokens())))
    frame = head_roles(rows).set_index(["kind", "head"])
    source_piece = source_code or "</s>"
    for key, piece in ((("encoder", 0), source_piece), (("cross", 0), source_piece),
                       (("decoder", 0), target_code or start), (("decoder", 1), start)):
        head = frame.loc[key]
        # every real query's whole weight is on special tokens: weights of exactly 0 and 1, summed exactly
        assert head.special == 1.0, key
        assert (head.role, head.role_detail) == ("no-op", piece), key
        assert piece in head.claim
