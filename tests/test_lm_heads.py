"""lm_head_summary on the tiny decoder-only families: shapes and ranges, chance by hand, determinism without the
global generator, heads made into previous-token, induction and copying heads by construction, and roles."""

from __future__ import annotations

import copy

import pandas as pd
import pytest
import torch
from decoder_models import WINDOW, build_pair
from explain_helpers import tiny_model

from transformer.explain import LM_ROLES, lm_head_roles, lm_head_summary, repeated_tokens
from transformer.explain.lm_heads import SCORES
from transformer.network.interventions import intervene
from transformer.network.trace import Trace

FAMILIES = ("gpt2", "llama", "mistral", "gemma3_text")  # learned positions + LayerNorm; GQA; sliding; both layer types
N_PROMPTS, REPEAT = 12, 4  # two chunks of CHUNK = 10; the induction target (3 back) within Mistral's window of 5
EXACT = 1e-12  # shares of 0/1 float64 weights over <= 9 keys, averaged over <= 96 queries: sums of a few roundings


@pytest.fixture(scope="module", params=FAMILIES)
def pair(request):
    return build_pair(request.param)


@pytest.fixture(scope="module")
def llama():
    return build_pair("llama")


def summary(model, **options):
    return lm_head_summary(model, n_prompts=N_PROMPTS, repeat_length=REPEAT, **options)


def test_columns_shapes_ranges_and_groups(pair):
    c = pair.ours.config
    told = []
    frame = summary(pair.ours, progress=lambda share, what: told.append((share, what)))
    assert len(frame) == c.n_decoder_layers * c.n_heads
    assert list(frame.columns[:6]) == ["kind", "layer", "head", "kv_head", "layer_type", "window"]
    for name in SCORES:
        for column in (name, f"{name}_low", f"{name}_high", f"{name}_baseline"):
            assert frame[column].between(0, 1).all(), column
    assert (frame.kv_head == frame["head"] // (c.n_heads // c.kv_heads)).all()  # GQA: 2 query heads per kv head
    assert set(frame.role) <= set(LM_ROLES) and (frame.undefined == "").all()
    sliding = frame.layer_type == "sliding"
    assert (frame.window[sliding] == WINDOW).all() and frame.window[~sliding].isna().all()
    assert [share for share, _ in told] == [0.0, 10 / 12, 1.0] and told[0][1] == "prompts 1-10 of 12"


def test_chance_by_hand(pair):
    """Uniform attention over [BOS] r r (T = 9): query i has min(i + 1, window) keys."""
    c = pair.ours.config
    frame = summary(pair.ours).set_index(["layer", "head"])
    t = 1 + 2 * REPEAT
    for layer in range(c.n_decoder_layers):
        window = c.sliding_window if c.layer_type(layer) == "sliding" else t
        keys = [min(i + 1, window) for i in range(t)]
        row = frame.loc[(layer, 0)]
        assert row.previous_token_baseline == pytest.approx(sum(1 / k for k in keys[1:]) / (t - 1), abs=EXACT)
        assert row.sink_baseline == pytest.approx(sum(1 / keys[i] for i in range(1, min(window, t))) /
                                                  (min(window, t) - 1), abs=EXACT)
        second = range(REPEAT + 1, t)
        assert row.induction_baseline == pytest.approx(sum(1 / keys[i] for i in second) / REPEAT, abs=EXACT)
        assert row.copying_baseline == 0.5


def test_deterministic_for_a_seed_and_global_rng_untouched(llama):
    state = torch.random.get_rng_state()
    first = summary(llama.ours, seed=3)
    assert torch.equal(torch.random.get_rng_state(), state)
    pd.testing.assert_frame_equal(first, summary(llama.ours, seed=3))
    assert not first.induction.equals(summary(llama.ours, seed=4).induction)


def test_repeated_tokens_avoid_special_ids_and_repeat():
    ids = repeated_tokens(12, 30, 5, seed=0, bos=1, exclude={0, 1, 2, 7})
    assert ids.shape == (30, 11) and (ids[:, 0] == 1).all()
    body = ids[:, 1:]
    assert torch.equal(body[:, :5], body[:, 5:])
    assert not torch.isin(body, torch.tensor([0, 1, 2, 7])).any()
    assert all(len(set(row.tolist())) == 5 for row in body[:, :5])  # distinct within a repeat: one earlier copy
    with pytest.raises(ValueError, match="distinct ordinary tokens"):
        repeated_tokens(12, 1, 9, exclude={0, 1, 2, 7})


def test_sliding_window_shorter_than_the_repeat_is_undefined_not_zero():
    model = build_pair("mistral").ours  # every layer slides over 5 keys; a repeat of 6: targets 5 and 6 back
    frame = lm_head_summary(model, n_prompts=4, repeat_length=6)
    assert frame.induction.isna().all() and frame.duplicate_token.isna().all()
    assert frame.undefined.str.startswith("duplicate_token, induction: no query sees its target").all()
    assert frame.previous_token.notna().all()


def exact_pattern(t: int, offset_of) -> torch.Tensor:  # noqa: ANN001
    """(T, T): query i all on key i - offset_of(i) (None: itself)."""
    weights = torch.zeros(t, t, dtype=torch.float64)
    for i in range(t):
        weights[i, i - (offset_of(i) or 0)] = 1.0
    return weights


def test_heads_made_previous_token_and_induction_heads(llama):
    """Head 0 of layer 0 edited into an exact previous-token head, head 1 of layer 1 into an exact induction head
    (the second repeat's query i -> key i - (n - 1)): each scores 1, the others do not, and the roles follow."""
    t = 1 + 2 * REPEAT
    previous = exact_pattern(t, lambda i: 1 if i else None)
    induction = exact_pattern(t, lambda i: REPEAT - 1 if i > REPEAT else None)
    edits = {("decoder.0.self_attn.weights", 0): lambda w: previous.expand_as(w).to(w.dtype),
             ("decoder.1.self_attn.weights", 1): lambda w: induction.expand_as(w).to(w.dtype)}
    with intervene(edits):
        frame = summary(llama.ours).set_index(["layer", "head"])
    assert frame.loc[(0, 0)].previous_token == pytest.approx(1.0, abs=EXACT)
    assert frame.loc[(0, 0)].role == "previous-token" and "100% of its weight on the previous token" in \
        frame.loc[(0, 0)].claim
    assert frame.loc[(1, 1)].induction == pytest.approx(1.0, abs=EXACT)
    assert frame.loc[(1, 1)].induction_low == pytest.approx(1.0, abs=EXACT)
    assert frame.loc[(1, 1)].role in ("induction", "prefix-matching")
    others = frame.drop([(0, 0), (1, 1)])
    assert others.previous_token.max() < 0.9 and others.induction.max() < 0.9


def copying_model(llama_pair, head: int, sign: float):  # noqa: ANN001, ANN201
    """Llama with its unembedding set so that head ``head`` of layer 0 copies (sign 1) or anti-copies (-1).

    Layer 0's values depend on the token alone (rotary positions never touch values), so the head writes
    u_t = W_O^h v_t whenever it attends to token t. Unembedding rows e_t = sign * u_t / |u_t| (divided by the
    final norm's gain, set to large values of both signs so that forgetting it breaks the ranking) make the
    direct logit of token k when attending to j equal sign * (u_k / |u_k|) . u_j: largest at k = j by
    Cauchy-Schwarz."""
    model = copy.deepcopy(llama_pair.ours)
    c = model.config
    with torch.no_grad():
        gain = torch.linspace(-2, 2, c.d_model, dtype=torch.float64)
        model.decoder.norm.weight.copy_(gain + 0.5 * torch.sign(gain))
        trace = Trace()
        model.decode_states(torch.arange(c.tgt_vocab_size)[None], None, None, trace=trace)
        kv = head // (c.n_heads // c.kv_heads)
        values = trace["decoder.0.self_attn.values"][0, kv]  # (V, d_k)
        w_o = model.decoder.layers[0].self_attn.w_o.weight[:, head * c.d_k:(head + 1) * c.d_k]  # (D, d_k)
        u = values @ w_o.T  # (V, D)
        model.generator.weight.copy_(sign * u / u.norm(dim=-1, keepdim=True) / model.decoder.norm.weight)
    return model


@pytest.mark.parametrize("head", [1, 2])  # kv heads 0 and 1
def test_copying_by_construction(llama, head):
    frame = summary(copying_model(llama, head, 1.0)).set_index(["layer", "head"])
    assert frame.loc[(0, head)].copying == 1.0
    assert frame.loc[(0, head), "copying_low"] == 1.0
    others = frame.loc[0].drop(head)
    assert others.copying.max() < 1.0  # another head's value path is not the one the unembedding was built on
    anti = summary(copying_model(llama, head, -1.0)).set_index(["layer", "head"])
    assert anti.loc[(0, head)].copying == 0.0


def test_roles_need_threshold_and_beating_chance():
    base = {name: 0.0 for name in SCORES} | {f"{name}_baseline": 0.1 for name in SCORES}
    base |= {f"{name}_low": 0.0 for name in SCORES} | {f"{name}_high": 0.1 for name in SCORES}
    base["copying_baseline"] = 0.5

    def role(**scores):
        row = dict(base)
        for name, (score, low) in scores.items():
            row[name], row[f"{name}_low"], row[f"{name}_high"] = score, low, score
        return lm_head_roles(pd.DataFrame([row])).iloc[0]

    assert role(induction=(0.8, 0.7), copying=(0.9, 0.85)).role == "induction"
    assert role(induction=(0.8, 0.7), copying=(0.6, 0.55)).role == "prefix-matching"
    assert role(induction=(0.8, 0.05)).role == "mixed"  # the interval reaches below chance: no claim
    assert "so no role" in role(induction=(0.8, 0.05)).claim
    assert role(previous_token=(0.6, 0.5), sink=(0.7, 0.6)).role == "previous-token"
    assert role(sink=(0.7, 0.6), copying=(0.9, 0.8)).role == "sink"
    assert role(copying=(0.9, 0.8)).role == "copying"
    assert role(duplicate_token=(float("nan"), float("nan"))).role == "mixed"


def test_bad_inputs(llama):
    with pytest.raises(ValueError, match="repeat_length must be an integer >= 2"):
        lm_head_summary(llama.ours, repeat_length=1)
    with pytest.raises(ValueError, match="max_len of 64"):
        lm_head_summary(llama.ours, repeat_length=32)
    with pytest.raises(ValueError, match="n_prompts"):
        lm_head_summary(llama.ours, n_prompts=0)
    with pytest.raises(ValueError, match="takes a decoder-only model; an encoder-decoder's heads: head_summary"):
        lm_head_summary(tiny_model())
    llama.ours.train()
    try:
        with pytest.raises(ValueError, match="training mode"):
            lm_head_summary(llama.ours)
    finally:
        llama.ours.eval()
