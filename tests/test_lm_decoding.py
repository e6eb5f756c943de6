"""Decoding a decoder-only model (transformer/decoding/lm.py) against ``transformers``' ``generate()`` on the same
tiny models (tests/decoder_models.py): greedy ids, beam search's ids and scores, EOS lists, ``min_new_tokens``; and
against itself: a left-padded batch row by row, the cached path against the full recomputation, sampling's seed and
supports.

The reference runs on batches of prompts of one length each (no padding): ``transformers``' eager attention over a
left-padded batch with a sliding window smaller than the padding fills the padded positions' hidden states with
NaN (a query with every key masked), which then reach the real ones (0 * NaN); our masks never produce such a row,
and the padded batch is proven against each row alone instead.
"""

from __future__ import annotations

import pytest
import torch
from decoder_models import NAMES, VOCAB, WINDOW, Pair, build_pair

from transformer import Transformer, TransformerConfig
from transformer.decoding import lm_beam_search, lm_generate, lm_greedy, lm_sample

pytest.importorskip("transformers")
LENGTHS = (1, 4, 8, 13, 19, 26)  # prompt lengths, 5 prompts each: 30 prompts per family
PER_LENGTH = 5
NEW = 3 * WINDOW + 1  # new tokens: the sliding window (5) crossed three times
EOS = 2
# Beam scores are float32 sums (log_softmax of float32 logits, as generate computes them) of at most NEW terms,
# each rounded to within eps of the running sum's size, then divided by the length penalty: |error| <= NEW * eps *
# (1 + |log_prob|) relative to the sum; the logits of both models agree to 1e-10 (float64) before the cast.
EPS32 = torch.finfo(torch.float32).eps


@pytest.fixture(scope="module", params=NAMES)
def pair(request) -> Pair:
    return build_pair(request.param)


def prompts(length: int, seed: int) -> torch.Tensor:
    """(PER_LENGTH, length) random ids, never a special id (0 pad, 1 bos, 2 eos)."""
    return torch.randint(3, VOCAB, (PER_LENGTH, length), generator=torch.Generator().manual_seed(seed))


def reference_generate(pair: Pair, ids: torch.Tensor, **options):  # noqa: ANN201  (a transformers output)
    with torch.no_grad():
        return pair.reference.generate(ids, attention_mask=torch.ones_like(ids), pad_token_id=0,
                                       max_new_tokens=options.pop("max_new_tokens", NEW), **options)


def continuation(row: list[int], eos: set[int]) -> tuple[list[int], bool]:
    """A generated row (prompt removed) cut at its first EOS: (tokens, whether EOS came)."""
    end = next((i for i, token in enumerate(row) if token in eos), None)
    return (row, False) if end is None else (row[:end], True)


def test_greedy_equals_generate_on_30_prompts(pair: Pair) -> None:
    finished = 0
    for n, length in enumerate(LENGTHS):
        ids = prompts(length, n)
        theirs = reference_generate(pair, ids, do_sample=False)
        ours = lm_greedy(pair.ours, ids, max_new_tokens=NEW)
        for row in range(PER_LENGTH):
            assert (ours.tokens[row], ours.finished[row]) == continuation(theirs[row, length:].tolist(), {EOS}), \
                (pair.name, length, row)
        assert torch.equal(ours.ids[:, :length], ids)  # ids: the prompt, then the continuation
        finished += sum(ours.finished)
    assert finished < len(LENGTHS) * PER_LENGTH  # most rows run the whole NEW steps, past the window


@pytest.mark.parametrize("length_penalty, early_stopping", [(1.0, False), (0.6, True), (1.5, "never"),
                                                            (0.0, False), (-0.5, True), (2.0, False)])
def test_beam_search_equals_generate_in_ids_and_scores(length_penalty: float, early_stopping: bool | str) -> None:
    for n, name in enumerate(("gpt2", "mistral", "gemma2", "qwen3")):
        pair = build_pair(name)
        length = LENGTHS[n + 1]
        ids = prompts(length, 10 + n)
        make_likely(pair, ids, [EOS], 0.3)  # hypotheses end at many lengths: the stopping rules matter
        theirs = reference_generate(pair, ids, num_beams=4, num_return_sequences=4, length_penalty=length_penalty,
                                    early_stopping=early_stopping, output_scores=True, return_dict_in_generate=True)
        ours = lm_beam_search(pair.ours, ids, max_new_tokens=NEW, beam_size=4, length_penalty=length_penalty,
                              early_stopping=early_stopping, n_best=4)
        for row, result in enumerate(ours):  # the 4 hypotheses generate() returns, best first
            for k, hypothesis in enumerate(result.hypotheses):
                assert (list(hypothesis.tokens), hypothesis.finished) == continuation(
                    theirs.sequences[4 * row + k, length:].tolist(), {EOS}), (name, row, k)
                tolerance = NEW * EPS32 * (1 + abs(hypothesis.log_prob))
                assert abs(hypothesis.score - theirs.sequences_scores[4 * row + k].item()) <= tolerance, (name, row)


def greedy_counts(pair: Pair, ids: torch.Tensor) -> torch.Tensor:
    """(V,) how often greedy decoding (no EOS) produces each token after ``ids``, the special ids counted 0."""
    tokens = torch.tensor(sum(lm_greedy(pair.ours, ids, max_new_tokens=NEW, eos_id=[]).tokens, []))
    counts = torch.bincount(tokens, minlength=VOCAB)
    counts[:3] = 0
    return counts


def make_likely(pair: Pair, ids: torch.Tensor, targets: list[int], noise: float) -> None:
    """Tiny random models seldom end: the rows of ``targets`` in the output matrix (both models') made the row of
    the token greedy decoding produces most often after ``ids``, plus N(0, ``noise``^2), so that the targets
    compete with it at many steps (tied embeddings change with it, in both models alike)."""
    frequent = int(greedy_counts(pair, ids).argmax())
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        rows = pair.ours.generator.weight[frequent] + noise * torch.randn(
            len(targets), pair.ours.generator.weight.size(1), generator=generator, dtype=torch.float64)
        for weight in (pair.reference.get_output_embeddings().weight, pair.ours.generator.weight):
            weight[targets] = rows


def likely_eos(pair: Pair, ids: torch.Tensor) -> list[int]:
    """Four EOS ids (the four tokens greedy decoding produces least often) made to compete with the most frequent
    one (``make_likely``), so that at many steps more than half of the 2 * beams best candidates end: what
    ``max(2, 1 + n_eos) * beams`` candidates are for (beam search still has beams to go on with)."""
    counts = greedy_counts(pair, ids)
    counts[:3] = counts.max() + 1  # never a special id
    eos = [int(i) for i in counts.argsort()[:4]]
    make_likely(pair, ids, eos, 0.02)
    return eos


@pytest.mark.parametrize("name", ["llama", "gemma3_text"])
def test_a_list_of_eos_ids_stops_at_any_in_greedy_and_beam_search(name: str) -> None:
    pair = build_pair(name)
    ids = prompts(6, 20)
    eos = likely_eos(pair, ids)
    theirs = reference_generate(pair, ids, do_sample=False, eos_token_id=eos)
    ours = lm_greedy(pair.ours, ids, max_new_tokens=NEW, eos_id=eos)
    for row in range(PER_LENGTH):
        assert (ours.tokens[row], ours.finished[row]) == continuation(theirs[row, 6:].tolist(), set(eos)), row
    ended = {int(ours.ids[row, 6 + len(ours.tokens[row])]) for row in range(PER_LENGTH) if ours.finished[row]}
    assert ended and ended <= set(eos)
    # every one of the 3 hypotheses generate() keeps (num_return_sequences), not only the best
    beams = reference_generate(pair, ids, num_beams=3, num_return_sequences=3, eos_token_id=eos, output_scores=True,
                               return_dict_in_generate=True)
    ours_beams = lm_beam_search(pair.ours, ids, max_new_tokens=NEW, beam_size=3, eos_id=eos, n_best=3)
    for row, result in enumerate(ours_beams):
        for k, hypothesis in enumerate(result.hypotheses):
            assert (list(hypothesis.tokens), hypothesis.finished) == continuation(
                beams.sequences[3 * row + k, 6:].tolist(), set(eos)), (row, k)
            assert abs(hypothesis.score - beams.sequences_scores[3 * row + k].item()) <= NEW * EPS32 * (1 + abs(
                hypothesis.log_prob))


def test_min_new_tokens_forbids_every_eos_until_then() -> None:
    pair = build_pair("qwen2")
    ids = prompts(5, 30)
    eos = [EOS, int(greedy_counts(pair, ids).argmax())]  # the most frequent token ends too
    free = lm_greedy(pair.ours, ids, max_new_tokens=NEW, eos_id=eos)
    assert min(len(t) for t, done in zip(free.tokens, free.finished, strict=True) if done) < 6  # would end sooner
    theirs = reference_generate(pair, ids, do_sample=False, eos_token_id=eos, min_new_tokens=6)
    ours = lm_greedy(pair.ours, ids, max_new_tokens=NEW, eos_id=eos, min_new_tokens=6)
    for row in range(PER_LENGTH):
        assert (ours.tokens[row], ours.finished[row]) == continuation(theirs[row, 5:].tolist(), set(eos)), row
        assert len(ours.tokens[row]) >= 6
    beams = lm_beam_search(pair.ours, ids, max_new_tokens=NEW, beam_size=3, eos_id=eos, min_new_tokens=6)
    assert all(len(h.tokens) >= 6 for result in beams for h in result.hypotheses)


def left_padded(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(4, 12) ids and mask: rows of 12, 9, 3 and 7 tokens, left-padded with the pad id 0."""
    ids = torch.randint(3, VOCAB, (4, 12), generator=torch.Generator().manual_seed(seed))
    mask = torch.ones_like(ids)
    for row, pad in ((1, 3), (2, 9), (3, 5)):
        ids[row, :pad], mask[row, :pad] = 0, 0
    return ids, mask


@pytest.mark.parametrize("name", ["gpt2", "mistral", "gemma2"])
def test_a_left_padded_batch_gives_each_row_what_it_gives_alone(name: str) -> None:
    pair = build_pair(name)
    ids, mask = left_padded(40)
    greedy = lm_greedy(pair.ours, ids, attention_mask=mask, max_new_tokens=NEW)
    beams = lm_beam_search(pair.ours, ids, attention_mask=mask, max_new_tokens=NEW, beam_size=3)
    for row in range(4):
        alone = ids[row : row + 1, mask[row].bool()]
        assert lm_greedy(pair.ours, alone, max_new_tokens=NEW).tokens[0] == greedy.tokens[row], row
        best = lm_beam_search(pair.ours, alone, max_new_tokens=NEW, beam_size=3)[0].best
        assert best.tokens == beams[row].best.tokens, row
        # a padded row's float32 softmax sums more (masked) cells than the row alone: float32 rounding apart
        assert abs(best.score - beams[row].best.score) <= NEW * EPS32 * (1 + abs(best.log_prob)), row


@pytest.mark.parametrize("name", ["mistral", "gemma2", "gemma3_text"])
def test_the_cached_path_equals_recomputing_the_whole_sequence(name: str) -> None:
    """Past the sliding window (NEW > 3 windows): the cache keeps a sliding layer's last window - 1 keys."""
    pair = build_pair(name)
    ids, mask = left_padded(50)
    cached = lm_greedy(pair.ours, ids, attention_mask=mask, max_new_tokens=NEW, record=True)
    full = lm_greedy(pair.ours, ids, attention_mask=mask, max_new_tokens=NEW, record=True, use_cache=False)
    assert cached.tokens == full.tokens and torch.equal(cached.ids, full.ids)
    for one, other in zip(cached.steps, full.steps, strict=True):
        # float32 softmax over a row's keys (window or all) in another order: a few eps of a probability <= 1
        assert (one.top_probs - other.top_probs).abs().max() <= 16 * EPS32
        assert (one.cross_attention - other.cross_attention).abs().max() <= 16 * EPS32
    step = cached.steps[-1]
    n_layers, heads = pair.ours.config.n_decoder_layers, pair.ours.config.n_heads
    assert step.cross_attention.shape == (4, n_layers, heads, 12)  # the newest query over the prompt
    sliding = [layer for layer in range(n_layers) if pair.ours.config.layer_type(layer) == "sliding"]
    assert sliding and (step.cross_attention[:, sliding] == 0).all()  # the prompt is out of the window by then
    first = lm_beam_search(pair.ours, ids, attention_mask=mask, max_new_tokens=3, beam_size=2, record=True)[0]
    assert first.history[0].cross_attention.shape == (1, n_layers, heads, 12)  # one live beam at the first step
    assert first.history[0].top_ids.shape == (1, 5)


def test_sampling_is_reproducible_with_a_seed_and_stays_in_top_k_and_top_p() -> None:
    pair = build_pair("llama")
    ids = prompts(7, 60)
    state = torch.get_rng_state()
    first = lm_sample(pair.ours, ids, max_new_tokens=NEW, seed=3, top_k=4, record=True, eos_id=[])
    again = lm_sample(pair.ours, ids, max_new_tokens=NEW, seed=3, top_k=4, eos_id=[])
    other = lm_sample(pair.ours, ids, max_new_tokens=NEW, seed=4, top_k=4, eos_id=[])
    nucleus = lm_sample(pair.ours, ids, max_new_tokens=NEW, seed=3, top_p=0.5, record=True, eos_id=[])
    assert torch.equal(torch.get_rng_state(), state)  # a call-local generator: the global one untouched
    assert first.tokens == again.tokens != other.tokens
    with torch.no_grad():
        for result, keep in ((first, "top_k"), (nucleus, "top_p")):
            logits = pair.ours.lm(result.ids)[:, ids.size(1) - 1 : -1].float()  # (B, NEW, V): each step's
            probs = logits.softmax(-1)
            chosen = result.ids[:, ids.size(1):]
            p_chosen = probs.gather(-1, chosen[..., None])
            rank = (probs > p_chosen).sum(-1)  # how many tokens are more likely than the chosen one
            if keep == "top_k":
                assert (rank < 4).all()
            else:  # in the nucleus: the tokens more likely than it sum to less than top_p
                before = (probs * (probs > p_chosen)).sum(-1)
                assert (before < 0.5 + 1e-6).all()
            assert all(len(step.top_probs[0].nonzero()) <= (4 if keep == "top_k" else VOCAB) for step in
                       result.steps)


def test_lm_generate_picks_the_strategy_and_honours_a_time_budget() -> None:
    pair = build_pair("gpt2")
    ids = prompts(4, 70)
    assert lm_generate(pair.ours, ids, max_new_tokens=NEW)[0] == lm_greedy(pair.ours, ids, max_new_tokens=NEW).tokens
    beam = lm_beam_search(pair.ours, ids, max_new_tokens=NEW, beam_size=2)
    assert lm_generate(pair.ours, ids, max_new_tokens=NEW, beam_size=2)[0] == [list(r.best.tokens) for r in beam]
    sampled = lm_sample(pair.ours, ids, max_new_tokens=NEW, top_k=5, seed=1).tokens
    assert lm_generate(pair.ours, ids, max_new_tokens=NEW, top_k=5, seed=1)[0] == sampled
    tokens, timed_out = lm_generate(pair.ours, ids, max_new_tokens=NEW, time_budget=1e-9)
    assert timed_out and all(len(row) <= 1 for row in tokens)  # the first step always runs, then none
    translation = Transformer(TransformerConfig(VOCAB, VOCAB, d_model=16, n_heads=2, n_layers=1, d_ff=32)).eval()
    with pytest.raises(ValueError, match="decoder-only"):
        lm_greedy(translation, ids, max_new_tokens=2)
    with pytest.raises(ValueError, match="exceed the model's positions"):
        lm_greedy(pair.ours, ids, max_new_tokens=64)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        lm_greedy(pair.ours, ids, max_new_tokens=2, eos_id=[2, VOCAB])
    with pytest.raises(ValueError, match="attention_mask"):
        lm_greedy(pair.ours, ids, max_new_tokens=2, attention_mask=torch.zeros_like(ids))
