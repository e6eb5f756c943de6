"""Greedy decoding (with and without the KV cache), beam search and sampling on small random models."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer import Transformer, TransformerConfig
from transformer.decoding import (
    beam_search,
    gnmt_length_penalty,
    greedy_decode,
    next_token_log_probs,
    sample,
    sampling_distribution,
)
from transformer.text.ids import BOS_ID, EOS_ID

VOCAB = 12
MAX_LEN = 16


def make_model(seed: int = 0, eos_bias: float = 2.0) -> Transformer:
    torch.manual_seed(seed)
    config = TransformerConfig(VOCAB, VOCAB, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0, max_len=MAX_LEN)
    model = Transformer(config).eval()
    with torch.no_grad():
        model.generator.bias[EOS_ID] += eos_bias  # so that some outputs end before max_len
    return model


@pytest.fixture(scope="module")
def model() -> Transformer:
    return make_model()


def padded_batch(seed: int, batch: int = 4, length: int = 7) -> torch.Tensor:
    """Random source ids 4..VOCAB-1, each row but the first cut short with PAD."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(4, VOCAB, (batch, length), generator=gen)
    for row in range(1, batch):
        keep = int(torch.randint(1, length + 1, (1,), generator=gen))
        src[row, keep:] = 0
    return src


def teacher_forced_log_probs(model: Transformer, src: torch.Tensor, tokens: list[int], finished: bool) -> list[float]:
    """log p of each generated token (EOS included when finished), from one full forward pass."""
    targets = [*tokens, EOS_ID] if finished else list(tokens)
    decoder_input = torch.tensor([[BOS_ID, *targets[:-1]]]) if targets else torch.tensor([[BOS_ID]])
    with torch.no_grad():
        log_probs = next_token_log_probs(model(src, decoder_input), model.config.pad_id)[0]  # (T, V)
    return [float(log_probs[t, token]) for t, token in enumerate(targets)]


# --- greedy: cache parity ---------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cached_and_uncached_greedy_give_identical_tokens(model, seed):
    src = padded_batch(seed)
    cached = greedy_decode(model, src, max_len=MAX_LEN)
    uncached = greedy_decode(model, src, max_len=MAX_LEN, use_cache=False)
    assert cached.tokens == uncached.tokens
    assert cached.finished == uncached.finished
    assert torch.equal(cached.ids, uncached.ids)
    assert cached.log_probs == pytest.approx(uncached.log_probs, abs=1e-4)
    assert any(cached.finished)  # the EOS bias makes some rows stop early


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), batch=st.integers(1, 4), length=st.integers(1, 9),
       model_seed=st.integers(0, 3))
def test_cache_parity_on_random_batches(seed, batch, length, model_seed):
    model = _MODELS.setdefault(model_seed, make_model(model_seed, eos_bias=0.5))
    src = padded_batch(seed, batch, length)
    assert (greedy_decode(model, src, max_len=12).tokens
            == greedy_decode(model, src, max_len=12, use_cache=False).tokens)


_MODELS: dict[int, Transformer] = {}


def test_greedy_output_format(model):
    src = padded_batch(3)
    result = greedy_decode(model, src, max_len=MAX_LEN)
    assert result.ids[:, 0].eq(BOS_ID).all()
    for row, (tokens, finished) in enumerate(zip(result.tokens, result.finished, strict=True)):
        assert EOS_ID not in tokens and BOS_ID not in tokens and 0 not in tokens
        ids = result.ids[row, 1:].tolist()
        assert ids[: len(tokens)] == tokens
        if finished:
            assert ids[len(tokens)] == EOS_ID and set(ids[len(tokens) + 1:]) <= {0}
        else:
            assert len(tokens) == MAX_LEN
        expected = sum(teacher_forced_log_probs(model, src[row: row + 1], tokens, finished))
        assert result.log_probs[row] == pytest.approx(expected, abs=1e-4)


def test_batched_greedy_equals_one_sentence_at_a_time(model):
    src = padded_batch(4)
    batched = greedy_decode(model, src, max_len=MAX_LEN)
    for row in range(src.size(0)):
        alone = src[row: row + 1, : int((src[row] != 0).sum())]  # without its padding
        assert greedy_decode(model, alone, max_len=MAX_LEN).tokens[0] == batched.tokens[row]


def test_eos_none_forces_the_full_length(model):
    result = greedy_decode(model, padded_batch(0, batch=2), max_len=10, stop_at_eos=False)
    assert [len(t) for t in result.tokens] == [10, 10] and result.finished == [False, False]


def test_greedy_with_ablation_keeps_cache_parity(model):
    src = padded_batch(5)
    ablate = {("cross", 0): [0], ("decoder", 1): [1]}
    assert (greedy_decode(model, src, max_len=MAX_LEN, ablate=ablate).tokens
            == greedy_decode(model, src, max_len=MAX_LEN, ablate=ablate, use_cache=False).tokens)


# --- recording -----------------------------------------------------------------------------


def test_recorded_steps_have_the_right_shapes_and_values(model):
    src = padded_batch(1, batch=3)
    k = 4
    result = greedy_decode(model, src, max_len=MAX_LEN, record=True, record_top_k=k)
    c = model.config
    assert len(result.steps) == result.ids.size(1) - 1
    for t, step in enumerate(result.steps):
        assert step.top_ids.shape == (3, k) and step.top_probs.shape == (3, k)
        assert step.cross_attention.shape == (3, c.n_decoder_layers, c.n_heads, src.size(1))
        assert (step.top_probs[:, :-1] >= step.top_probs[:, 1:]).all()  # sorted
        assert ((step.top_probs > 0) & (step.top_probs <= 1)).all()
        torch.testing.assert_close(step.cross_attention.sum(-1), torch.ones(3, c.n_decoder_layers, c.n_heads))
        pad = (src == 0)[:, None, None, :].expand_as(step.cross_attention)
        assert step.cross_attention[pad].eq(0).all()  # padding gets no attention
        assert torch.equal(step.token, result.ids[:, t + 1])
        active = step.active
        assert torch.equal(step.token[active], step.top_ids[active, 0])  # greedy takes the most likely
        torch.testing.assert_close(step.token_prob[active], step.top_probs[active, 0])
    assert result.steps[0].active.all()


def test_recording_does_not_change_the_tokens_and_matches_uncached(model):
    src = padded_batch(2)
    plain = greedy_decode(model, src, max_len=MAX_LEN)
    cached = greedy_decode(model, src, max_len=MAX_LEN, record=True)
    uncached = greedy_decode(model, src, max_len=MAX_LEN, record=True, use_cache=False)
    assert plain.tokens == cached.tokens == uncached.tokens
    for a, b in zip(cached.steps, uncached.steps, strict=True):
        assert torch.equal(a.active, b.active)
        # rows that finished are fed PAD, which only the uncached decoder masks: compare live rows
        torch.testing.assert_close(a.cross_attention[a.active], b.cross_attention[a.active], atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(a.top_probs[a.active], b.top_probs[a.active], atol=1e-5, rtol=1e-4)


# --- beam search -------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1])
def test_beam_size_one_equals_greedy(model, seed):
    src = padded_batch(seed)
    greedy = greedy_decode(model, src, max_len=MAX_LEN)
    beams = beam_search(model, src, beam_size=1, max_len=MAX_LEN)
    assert [list(r.best.tokens) for r in beams] == greedy.tokens
    assert [r.best.finished for r in beams] == greedy.finished
    assert [r.best.log_prob for r in beams] == pytest.approx(greedy.log_probs, abs=1e-4)


@pytest.mark.parametrize(("alpha", "norm"), [(0.0, "gnmt"), (0.6, "gnmt"), (1.0, "gnmt"), (1.0, "hf"), (2.0, "hf")])
def test_beam_scores_are_teacher_forced_log_probs_over_the_length_penalty(model, alpha, norm):
    """GNMT's ((5 + |Y|) / 6) ** alpha, or transformers' |Y| ** alpha (|Y|: generated tokens with EOS)."""
    src = padded_batch(7, batch=3)
    results = beam_search(model, src, beam_size=3, max_len=MAX_LEN, length_penalty=alpha, length_norm=norm)
    checked = 0
    for row, result in enumerate(results):
        for h in result.hypotheses:
            log_prob = sum(teacher_forced_log_probs(model, src[row: row + 1], list(h.tokens), h.finished))
            assert h.log_prob == pytest.approx(log_prob, abs=1e-4)
            length = len(h.tokens) + int(h.finished)  # generated tokens, EOS included
            assert h.length == length
            penalty = ((5 + length) / 6) ** alpha if norm == "gnmt" else length ** alpha
            assert h.score == pytest.approx(log_prob / penalty, abs=1e-4)
            checked += 1
    assert checked >= 3


def test_beam_results_are_sorted_and_n_best_cuts(model):
    src = padded_batch(8)
    full = beam_search(model, src, beam_size=4, max_len=MAX_LEN)
    best2 = beam_search(model, src, beam_size=4, max_len=MAX_LEN, n_best=2)
    for a, b in zip(full, best2, strict=True):
        scores = [h.score for h in a.hypotheses]
        assert scores == sorted(scores, reverse=True) and len(scores) >= 1
        assert b.hypotheses == a.hypotheses[:2]
        assert a.best is a.hypotheses[0]


def test_beam_search_is_at_least_as_likely_as_greedy_without_length_penalty():
    """With alpha = 0 every hypothesis is scored by its log_prob, whether it ended with EOS or
    was cut off at max_len, so greedy's output, finished or not, is a score beam search must reach."""
    model = make_model(0, eos_bias=1.5)  # chosen so that greedy finishes some rows and not others
    src = padded_batch(9)
    greedy = greedy_decode(model, src, max_len=6)
    beams = beam_search(model, src, beam_size=4, max_len=6, length_penalty=0.0, early_stopping=False)
    assert any(greedy.finished) and not all(greedy.finished)  # both kinds of row are checked
    for result, greedy_log_prob in zip(beams, greedy.log_probs, strict=True):
        assert result.best.score == pytest.approx(result.best.log_prob)
        assert result.best.score >= greedy_log_prob - 1e-4
    assert any(r.best.score > lp + 0.1 for r, lp in zip(beams, greedy.log_probs, strict=True))  # it did search


def test_without_early_stopping_the_best_score_is_no_worse(model):
    src = padded_batch(10)
    early = beam_search(model, src, beam_size=3, max_len=MAX_LEN, early_stopping=True)
    full = beam_search(model, src, beam_size=3, max_len=MAX_LEN)  # the default, as in the pipeline
    for a, b in zip(early, full, strict=True):
        assert b.best.score >= a.best.score - 1e-6
        assert len(b.history) >= len(a.history)


def test_batched_beam_search_equals_one_sentence_at_a_time(model):
    src = padded_batch(11, batch=3)
    batched = beam_search(model, src, beam_size=3, max_len=MAX_LEN)
    for row in range(3):
        alone = src[row: row + 1, : int((src[row] != 0).sum())]
        single = beam_search(model, alone, beam_size=3, max_len=MAX_LEN)[0]
        assert [h.tokens for h in single.hypotheses] == [h.tokens for h in batched[row].hypotheses]


def test_beam_history_forms_a_tree(model):
    src = padded_batch(12, batch=2)
    beam_size = 3
    for result in beam_search(model, src, beam_size=beam_size, max_len=MAX_LEN, record=True, record_top_k=4):
        first = result.history[0]
        assert len(first.beams) == 1 and first.beams[0].tokens == () and first.beams[0].parent is None
        for step, following in zip(result.history, result.history[1:], strict=False):
            kept = [c for c in step.candidates if c.outcome == "kept"]
            assert len(kept) == len(following.beams) <= beam_size
            for candidate, beam in zip(kept, following.beams, strict=True):
                assert beam.parent == candidate.beam
                assert beam.tokens == (*step.beams[candidate.beam].tokens, candidate.token)
                assert beam.log_prob == pytest.approx(candidate.log_prob)
        for step in result.history:
            n = len(step.beams)
            assert len(step.candidates) <= 2 * beam_size
            totals = [c.log_prob for c in step.candidates]
            assert totals == sorted(totals, reverse=True)
            for c in step.candidates:
                assert c.log_prob == pytest.approx(step.beams[c.beam].log_prob + c.token_log_prob, abs=1e-5)
                assert c.outcome in ("kept", "finished", "pruned")
            assert step.top_ids.shape == step.top_probs.shape == (n, 4)
            assert step.cross_attention.shape == (n, 2, 2, src.size(1))
            torch.testing.assert_close(step.cross_attention.sum(-1), torch.ones(n, 2, 2))
        finished = [c for s in result.history for c in s.candidates if c.outcome == "finished"]
        assert len(finished) == sum(h.finished for h in result.hypotheses)


def test_beam_search_ends_at_max_len_with_unfinished_hypotheses():
    model = make_model(3, eos_bias=-20.0)  # EOS is never likely
    results = beam_search(model, padded_batch(0, batch=2), beam_size=2, max_len=5)
    for result in results:
        assert len(result.hypotheses) == 2
        assert all(not h.finished and len(h.tokens) == 5 for h in result.hypotheses)
        assert all(h.score == pytest.approx(h.log_prob / gnmt_length_penalty(5, 0.6)) for h in result.hypotheses)


# --- sampling --------------------------------------------------------------------------------


def test_sampling_is_reproducible_with_a_seed_and_leaves_the_global_rng_alone(model):
    src = padded_batch(13)
    state = torch.get_rng_state()
    a = sample(model, src, max_len=MAX_LEN, temperature=1.5, seed=42)
    b = sample(model, src, max_len=MAX_LEN, temperature=1.5, seed=42)
    assert torch.equal(torch.get_rng_state(), state)
    assert a.tokens == b.tokens
    others = [sample(model, src, max_len=MAX_LEN, temperature=1.5, seed=s).tokens for s in range(5)]
    assert any(tokens != a.tokens for tokens in others)  # the seed does matter


def test_top_k_one_equals_greedy(model):
    src = padded_batch(14)
    greedy = greedy_decode(model, src, max_len=MAX_LEN)
    sampled = sample(model, src, max_len=MAX_LEN, top_k=1, temperature=3.0, seed=0)
    assert sampled.tokens == greedy.tokens
    assert sampled.log_probs == pytest.approx(greedy.log_probs, abs=1e-5)


def test_sampling_records_the_reshaped_distribution(model):
    result = sample(model, padded_batch(15), max_len=8, top_k=3, seed=1, record=True, record_top_k=5)
    for step in result.steps:
        assert (step.top_probs[:, 3:] == 0).all()  # only three tokens can be drawn
        torch.testing.assert_close(step.top_probs[:, :3].sum(-1), torch.ones(4))
        assert (step.token_prob[step.active] > 0).all()


def test_sampling_distribution_cuts():
    log_probs = torch.log(torch.tensor([[0.5, 0.25, 0.15, 0.1]]))
    torch.testing.assert_close(sampling_distribution(log_probs), log_probs.exp())
    top2 = sampling_distribution(log_probs, top_k=2)
    torch.testing.assert_close(top2, torch.tensor([[2 / 3, 1 / 3, 0.0, 0.0]]))
    nucleus = sampling_distribution(log_probs, top_p=0.7)  # 0.5 < 0.7 <= 0.75: two tokens
    torch.testing.assert_close(nucleus, torch.tensor([[2 / 3, 1 / 3, 0.0, 0.0]]))
    assert (sampling_distribution(log_probs, top_p=0.4) == torch.tensor([[1.0, 0, 0, 0]])).all()
    cold = sampling_distribution(log_probs, temperature=0.05)
    assert cold[0, 0] > 0.999
    hot = sampling_distribution(log_probs, temperature=100.0)
    torch.testing.assert_close(hot, torch.full((1, 4), 0.25), atol=1e-2, rtol=0)


# --- argument checks ---------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs", [
    {"temperature": 0}, {"temperature": -1.0}, {"temperature": math.nan}, {"temperature": math.inf},
    {"top_k": 0}, {"top_k": 1.5}, {"top_p": 0.0}, {"top_p": 1.5}, {"top_p": -0.1}, {"seed": -1},
])
def test_sampling_rejects_bad_arguments(model, kwargs):
    with pytest.raises(ValueError):
        sample(model, padded_batch(0), max_len=5, **kwargs)


@pytest.mark.parametrize("kwargs", [{"beam_size": 0}, {"beam_size": 2, "n_best": 0},
                                    {"beam_size": 2, "length_penalty": math.nan},
                                    {"beam_size": 2, "early_stopping": "sometimes"},
                                    {"beam_size": 2, "length_norm": "fairseq"}])
def test_beam_search_rejects_bad_arguments(model, kwargs):
    with pytest.raises(ValueError):
        beam_search(model, padded_batch(0), max_len=5, **kwargs)


def test_max_len_and_inputs_are_checked(model):
    with pytest.raises(ValueError, match="max_len"):
        greedy_decode(model, padded_batch(0), max_len=MAX_LEN + 1)
    with pytest.raises(ValueError, match="max_len"):
        greedy_decode(model, padded_batch(0), max_len=0)
    with pytest.raises(ValueError, match="src_ids"):
        greedy_decode(model, torch.tensor([4, 5]), max_len=5)
    with pytest.raises(ValueError, match="src_ids"):
        greedy_decode(model, torch.zeros(1, 0, dtype=torch.long), max_len=5)


def test_a_model_in_training_mode_is_refused():
    model = make_model(1).train()
    with pytest.raises(ValueError, match="eval"):
        greedy_decode(model, padded_batch(0), max_len=5)


# --- the time budget (issue 33: a model that never says </s> decoded for minutes) -------------------------


@pytest.mark.parametrize("strategy", ["greedy", "sample", "beam"])
def test_a_spent_time_budget_stops_decoding_after_one_step_and_says_so(strategy):
    never_ends = make_model(eos_bias=-1e9)  # a generator that never says </s>
    src = padded_batch(0, batch=2)
    decode = {"greedy": lambda **k: greedy_decode(never_ends, src, **k),
              "sample": lambda **k: sample(never_ends, src, seed=0, **k),
              "beam": lambda **k: beam_search(never_ends, src, beam_size=2, **k)}[strategy]
    full, cut = decode(max_len=MAX_LEN), decode(max_len=MAX_LEN, time_budget=1e-9)
    if strategy == "beam":
        assert not any(r.timed_out for r in full) and all(r.timed_out for r in cut)
        assert [len(r.best.tokens) for r in full] == [MAX_LEN] * 2 and [len(r.best.tokens) for r in cut] == [1, 1]
        assert all(not h.finished for r in cut for h in r.hypotheses)
    else:
        assert not full.timed_out and cut.timed_out
        assert [len(t) for t in full.tokens] == [MAX_LEN] * 2 and [len(t) for t in cut.tokens] == [1, 1]
        assert cut.finished == [False, False]


def test_a_generous_time_budget_changes_nothing(model):
    src = padded_batch(1)
    assert greedy_decode(model, src, max_len=MAX_LEN, time_budget=60).tokens == \
        greedy_decode(model, src, max_len=MAX_LEN).tokens


@pytest.mark.parametrize("budget", [0, -1, float("nan"), float("inf"), True, "5"])
def test_a_bad_time_budget_is_refused(model, budget):
    with pytest.raises(ValueError, match="time_budget must be a number of seconds > 0"):
        greedy_decode(model, padded_batch(0), max_len=4, time_budget=budget)
