"""ERASER's comprehensiveness and sufficiency (explain/eraser.py) on a hand-built model whose decisive source
token is known, against explicit forwards, and beside the random ranking every method must beat."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from explain_helpers import batch, tiny_model

from transformer.explain import Attribution, attribute, faithfulness, faithfulness_summary
from transformer.explain import eraser as faithfulness_module
from transformer.explain.gradients import default_baseline
from transformer.network.config import TransformerConfig
from transformer.network.model import Transformer

DECISIVE, READ, WRITE, TARGET = 5, 7, 0, 4  # the decisive source id, the embedding dim read, the dim written, y
SRC = torch.tensor([[6, DECISIVE, 7, 8, 3]])  # the decisive token at position 1, then </s>
TGT = torch.tensor([[2, TARGET, TARGET, TARGET]])  # three rows, each explaining y = 4


def decisive_model() -> Transformer:
    """A model whose output depends on one source token only: pre-LN, no final norm, every sub-layer's output
    weights 0 but the cross-attention's, whose zero queries and keys attend uniformly and whose value reads embedding
    dim READ (0 for every token but DECISIVE, <unk> and <pad> included) into the stream's dim WRITE, which the
    generator turns into y's logit. Removing DECISIVE (by <unk> or the zero embedding) lowers p(y); removing any
    other token leaves every number the output depends on exactly as it was."""
    config = TransformerConfig(src_vocab_size=10, tgt_vocab_size=10, d_model=8, n_heads=2, n_layers=1, d_ff=8,
                               dropout=0.0, norm_first=True, final_norm=False, max_len=16)
    model = Transformer(config).double().eval()
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
        model.src_embed.weight.copy_(torch.randn(10, 8, generator=generator, dtype=torch.float64))
        model.tgt_embed.weight.copy_(torch.randn(10, 8, generator=generator, dtype=torch.float64))
        model.src_embed.weight[:, READ] = 0.0
        model.src_embed.weight[DECISIVE, READ] = 1.0
        cross = model.decoder.layers[0].cross_attn
        cross.in_proj.weight[2 * 8 + 0, READ] = 1.0  # head 0's first value unit reads dim READ
        cross.w_o.weight[WRITE, 0] = 1.0
        model.generator.weight[TARGET, WRITE] = 1.0
    return model


def oracle(scores_at_decisive: float) -> Attribution:
    """An attribution whose every row scores the decisive token ``scores_at_decisive`` and the rest 0."""
    source = torch.zeros(1, TGT.size(1) - 1, SRC.size(1), dtype=torch.float64)
    source[:, :, 1] = scores_at_decisive
    return Attribution("occlusion", source)


def probabilities(model: Transformer, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """p(tgt[t+1]) per row, by a plain forward: (B, T-1)."""
    with torch.no_grad():
        log_probs = model(src, tgt[:, :-1]).log_softmax(-1)
    return log_probs.gather(-1, tgt[:, 1:, None])[..., 0].exp()


def method_rows(table):  # noqa: ANN001, ANN201
    return table[table.ranking == "method"].reset_index(drop=True)


def test_counts_round_up_to_at_least_one_token():
    assert faithfulness_module.counts(20) == [1, 1, 2, 4, 10]
    assert faithfulness_module.counts(4) == [1, 1, 1, 1, 2]
    assert faithfulness_module.counts(1) == [1, 1, 1, 1, 1]
    assert faithfulness_module.counts(100) == [1, 5, 10, 20, 50]  # exact products stay exact


def test_the_decisive_token_ranked_first_is_comprehensive_and_sufficient():
    model = decisive_model()
    full = probabilities(model, SRC, TGT)[0]
    without = probabilities(model, SRC.masked_fill(SRC == DECISIVE, model.config.unk_id), TGT)[0]
    drop = full - without  # (3,): what removing the decisive token costs each row
    assert (drop > 0.01).all()
    table = method_rows(faithfulness(model, SRC, TGT, oracle(1.0)))
    # float64 through identical arithmetic for the untouched dims: the other tokens' removal is exact, so the
    # tolerances are float64 rounding of a softmax (a few ulps of 1)
    for k in ("1%", "5%", "10%", "20%", "50%"):
        torch.testing.assert_close(torch.tensor(table[f"comprehensiveness@{k}"].to_numpy()), drop, rtol=0, atol=1e-12)
        torch.testing.assert_close(torch.tensor(table[f"sufficiency@{k}"].to_numpy()), torch.zeros(3), rtol=0,
                                   atol=1e-12, check_dtype=False)
    torch.testing.assert_close(torch.tensor(table["soft comprehensiveness"].to_numpy()), drop, rtol=0, atol=1e-12)
    assert table["soft sufficiency"].abs().max() < 1e-12
    torch.testing.assert_close(torch.tensor(table["p"].to_numpy()), full, rtol=0, atol=1e-12)


def test_the_decisive_token_ranked_last_is_neither():
    model = decisive_model()
    full = probabilities(model, SRC, TGT)[0]
    without = probabilities(model, SRC.masked_fill(SRC == DECISIVE, model.config.unk_id), TGT)[0]
    table = method_rows(faithfulness(model, SRC, TGT, oracle(-1.0)))
    assert table["comprehensiveness"].abs().max() < 1e-12  # n = 4 removable: at most 2 removed, never the last
    torch.testing.assert_close(torch.tensor(table["sufficiency"].to_numpy()), full - without, rtol=0, atol=1e-12)
    assert table["soft comprehensiveness"].abs().max() < 1e-12
    torch.testing.assert_close(torch.tensor(table["soft sufficiency"].to_numpy()), full - without, rtol=0, atol=1e-12)


def test_only_the_right_ranking_beats_random():
    model = decisive_model()
    good = faithfulness_summary(faithfulness(model, SRC, TGT, oracle(1.0))).set_index("measure")
    bad = faithfulness_summary(faithfulness(model, SRC, TGT, oracle(-1.0))).set_index("measure")
    assert good.loc["comprehensiveness", "beats_random"] and good.loc["sufficiency", "beats_random"]
    assert not bad.loc["comprehensiveness", "beats_random"] and not bad.loc["sufficiency", "beats_random"]
    # the random ranking removes the decisive token with the chance its place gives it: strictly in between
    assert 0 < good.loc["comprehensiveness", "random"] < good.loc["comprehensiveness", "method"]


def test_occlusion_finds_the_decisive_token():
    model = decisive_model()
    summary = faithfulness_summary(faithfulness(model, SRC, TGT, attribute(model, SRC, TGT, "occlusion")))
    assert summary.set_index("measure")["beats_random"].all()


def test_special_tokens_are_never_removed():
    model = decisive_model()
    special = torch.tensor([[False, True, False, False, True]])  # the decisive token marked special
    table = faithfulness(model, SRC, TGT, oracle(1.0), special=special)
    assert (table.n == 3).all()
    assert table["comprehensiveness"].abs().max() < 1e-12  # nothing that matters was ever removed
    assert table["sufficiency"].abs().max() < 1e-12


def test_hard_measures_against_explicit_forwards_on_a_padded_batch(monkeypatch):
    """A random model: each row's top-c tokens replaced by <unk> ids in a plain forward; the copies run in chunks
    of 3 (a tiny budget), and the padded sentence gets what it gets alone."""
    model = tiny_model()
    src, tgt = batch()
    attribution = attribute(model, src, tgt, "attention")
    full = faithfulness(model, src, tgt, attribution)
    monkeypatch.setattr(faithfulness_module, "COPY_BUDGET", 3 * 4 * 10 * (16 + 4 * 8 + 2 * 10))
    chunked = faithfulness(model, src, tgt, attribution)
    measures = [c for c in full.columns if "@" in c]
    torch.testing.assert_close(torch.tensor(chunked[measures].to_numpy()), torch.tensor(full[measures].to_numpy()))
    unk, eos = model.config.unk_id, model.config.eos_id
    table = method_rows(full)
    for _, line in table.iterrows():
        b, t = int(line.batch), int(line.row)
        real = (src[b] != 0) & (src[b] != eos)
        scores = attribution.source[b, t].masked_fill(~real, -math.inf)
        order = scores.argsort(descending=True, stable=True)[:int(real.sum())]
        for k, c in zip(("1%", "50%"), faithfulness_module.counts(int(real.sum()), (0.01, 0.5)), strict=True):
            removed = src[b:b + 1].clone()
            removed[0, order[:c]] = unk
            kept = src[b:b + 1].clone()
            kept[0, order[c:]] = unk
            p = probabilities(model, src[b:b + 1], tgt[b:b + 1])[0, t]
            # float64 forwards of the same ids, batched differently: rounding of a few ulps
            assert line[f"comprehensiveness@{k}"] == pytest.approx(
                float(p - probabilities(model, removed, tgt[b:b + 1])[0, t]), abs=1e-12)
            assert line[f"sufficiency@{k}"] == pytest.approx(
                float(p - probabilities(model, kept, tgt[b:b + 1])[0, t]), abs=1e-12)
    alone = method_rows(faithfulness(model, src[1:, :3], tgt[1:, :3], attribute(model, src[1:, :3], tgt[1:, :3],
                                                                               "attention")))
    padded = table[table.batch == 1].reset_index(drop=True)
    torch.testing.assert_close(torch.tensor(alone[measures].to_numpy()), torch.tensor(padded[measures].to_numpy()))


def test_removal_is_the_methods_own_baseline():
    model = tiny_model()
    src, tgt = batch()
    assert faithfulness_module.removal(attribute(model, src, tgt, "occlusion"), model.config) == "unk"
    assert faithfulness_module.removal(attribute(model, src, tgt, "input_x_gradient"), model.config) == "zero"
    ig = attribute(model, src, tgt, "integrated_gradients", baseline="pad", n_steps=4)
    assert faithfulness_module.removal(ig, model.config) == "pad"
    default = attribute(model, src, tgt, "integrated_gradients", n_steps=4)  # the model's own baseline
    assert faithfulness_module.removal(default, model.config) == default_baseline(model.config) == "zero"
    singular = dataclasses.replace(model.config, positional="relative", norm_first=True)
    assert faithfulness_module.removal(default, singular) == "pad"  # T5's switches: singular at zero
    assert set(faithfulness(model, src, tgt, ig).removal) == {"pad"}
    assert set(faithfulness(model, src, tgt, ig, baseline="zero").removal) == {"zero"}


def test_undefined_rows_stay_undefined_and_nothing_global_changes():
    model = tiny_model()
    src, tgt = batch()
    source = attribute(model, src, tgt, "attention").source.clone()
    source[0, 1] = float("nan")
    before_rng, before_state = torch.get_rng_state(), {k: v.clone() for k, v in model.state_dict().items()}
    table = faithfulness(model, src, tgt, Attribution("attention", source))
    assert torch.equal(torch.get_rng_state(), before_rng)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before_state.items())
    method = method_rows(table)
    undefined = method[(method.batch == 0) & (method.row == 1)]
    assert undefined[["comprehensiveness", "sufficiency", "soft comprehensiveness", "soft sufficiency"]].isna().all(
        axis=None)
    assert not table[table.ranking == "random"]["comprehensiveness"].isna().any()  # the baseline still is defined
    summary = faithfulness_summary(table)
    assert (summary.undefined == 1).all()


def test_bad_arguments_are_refused():
    model = tiny_model()
    src, tgt = batch()
    good = attribute(model, src, tgt, "attention")
    with pytest.raises(ValueError, match="shape"):
        faithfulness(model, src, tgt, Attribution("attention", good.source[:, :2]))
    with pytest.raises(ValueError, match="baseline"):
        faithfulness(model, src, tgt, good, baseline="mask")
    with pytest.raises(ValueError, match="no token that may be removed"):
        faithfulness(model, src, tgt, good, special=src != 0)


def _plain_probabilities(self, masks, soft, pair_copy, pair_row):  # noqa: ANN001, ANN202
    """``_Sentence._probabilities`` by the definition, with none of its savings: each (copy, row) pair gets its own
    forward of its own perturbed source alone, the decoder over the whole target, the full log-softmax."""
    from transformer.explain.pairs import decoder_states, source_embedding

    model = self.model
    with torch.no_grad():
        embed = source_embedding(model)(self.src)  # (1, S, D)
        removed = self._removed(embed)
        out = []
        for copy, row in zip(pair_copy.tolist(), self.rows[pair_row].tolist(), strict=True):
            keep = masks[copy][:, None] if copy < masks.size(0) else soft[copy - masks.size(0)]  # (S, 1|D)
            source = torch.where(keep, embed, removed)  # (1, S, D)
            log_probs = model.generator(decoder_states(model, self.src, self.tgt[:, :-1], source)).log_softmax(-1)
            out.append(log_probs[0, row, self.tgt[0, row + 1]].exp())
    return torch.stack(out).double()


def _decoder_only_model() -> Transformer:
    """A tiny float64 decoder-only model (rotary positions, grouped key/value heads), seeded locally."""
    config = TransformerConfig(src_vocab_size=12, tgt_vocab_size=12, d_model=16, n_heads=4, n_kv_heads=2,
                               n_layers=2, d_ff=16, dropout=0.0, max_len=32, decoder_only=True, positional="rotary",
                               norm="rms_float32", norm_first=True, gated_ff=True, activation="silu", bias=False)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return Transformer(config).double().eval()


@pytest.mark.parametrize("decoder_only", [False, True])
# a pass per length, the default's merging, one pass; and chunks of one copy (and 24 or 43 rows of logits)
@pytest.mark.parametrize(("pass_cost", "per_chunk"), [(0, 3), (64, 3), (10**9, 3), (64, 1)])
def test_the_batched_forwards_equal_one_plain_forward_per_pair(monkeypatch, decoder_only, pass_cost, per_chunk):
    """The whole table (method and random, hard and soft) against ``_plain_probabilities``: the copies shared, sorted
    by length, chunked (a tiny budget), the decoder stopped at each copy's last read row and the generator applied
    only at the read rows, in chunks, change the order of float64 sums, nothing else."""
    model = _decoder_only_model() if decoder_only else tiny_model()
    src, tgt = batch()
    if decoder_only:  # a prompt of 5 and its continuation (pairs.lm_pair's layout): no padding in a decoder-only row
        src, tgt = src[:1], tgt[:1]
    attribution = attribute(model, src, tgt, "attention")
    monkeypatch.setattr(faithfulness_module, "PASS_COST", pass_cost)
    c, s, t = model.config, src.size(1), tgt.size(1) - 1
    per_copy = 4 * (s + t) * (c.d_ff + 4 * c.d_model + c.n_heads * (s + t))  # eraser._chunk's bytes per copy
    monkeypatch.setattr(faithfulness_module, "COPY_BUDGET", per_chunk * per_copy)
    assert faithfulness_module._chunk(model, s, t) == per_chunk  # logits: per_chunk * per_copy // (8 * 12) rows
    fast = faithfulness(model, src, tgt, attribution)
    monkeypatch.setattr(faithfulness_module._Sentence, "_probabilities", _plain_probabilities)
    plain = faithfulness(model, src, tgt, attribution)
    numbers = [c for c in plain.columns if plain[c].dtype.kind == "f"]
    assert (fast.drop(columns=numbers) == plain.drop(columns=numbers)).all(axis=None)
    # float64 (ε = 2.2e-16): the same sums of a few hundred terms of size ≤ 10, in other orders and blockings, so
    # each p moves by well under 1e3 ε ≈ 2e-13 and a difference of two p's by twice that; 1e-12 leaves room
    torch.testing.assert_close(torch.tensor(fast[numbers].to_numpy()), torch.tensor(plain[numbers].to_numpy()),
                               rtol=0, atol=1e-12, equal_nan=True)
