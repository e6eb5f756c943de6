"""The decoder-only head scores as pure functions: hand-built attention tensors with hand-computed answers, chance
from uniform attention within the causal (and sliding) mask, and TransformerLens's detect_head formula."""

from __future__ import annotations

import pytest
import torch

from transformer.explain.lm_head_patterns import (
    ATTENTION_SCORES,
    attention_counts,
    chance_weights,
    copying_counts,
    pattern_scores,
    visible_keys,
)

BOS = 1
IDS = torch.tensor([[BOS, 5, 6, 7, 5, 6, 7]])  # [BOS] r r with n = 3: T = 7, the second repeat at 4, 5, 6
T, N = 7, 3
# Shares of float64 weights that are 0 and 1 (or 1/k) summed over 7 keys and averaged over <= 6 queries: a few
# roundings of 2^-53 each.
EXACT = 1e-14


def head(offsets: dict[int, int]) -> torch.Tensor:
    """(T, T): query i puts all its weight on key i - offsets[i], itself where no offset is given."""
    weights = torch.zeros(T, T, dtype=torch.float64)
    for i in range(T):
        weights[i, i - offsets.get(i, 0)] = 1.0
    return weights


PREVIOUS = head({i: 1 for i in range(1, T)})
INDUCTION = head({i: N - 1 for i in range(N + 1, T)})  # second repeat -> the token after the earlier copy
DUPLICATE = head({i: N for i in range(N + 1, T)})  # second repeat -> the earlier copy itself
SINK = head({i: i for i in range(T)})  # everything on the first token


def test_exact_heads_score_one_and_nothing_else():
    weights = torch.stack([PREVIOUS, INDUCTION, DUPLICATE, SINK])[None, None]  # (1, 1, 4, T, T)
    scores = pattern_scores(weights, IDS)
    expected = {"previous_token": [1, 0, 0, 1 / 6],  # the sink head's query 1 looks at key 0 = its previous
                "induction": [0, 1, 0, 0],
                "duplicate_token": [0, 0, 1, 0],
                "sink": [1 / 6, 0, 0, 1]}  # the previous-token head's query 1 looks at the first token
    for name, values in expected.items():
        torch.testing.assert_close(scores[name][0], torch.tensor(values, dtype=torch.float64), atol=EXACT, rtol=0)


def test_uniform_attention_scores_chance_by_hand():
    full = visible_keys(T, [None])
    scores = pattern_scores(chance_weights(full).expand(1, 1, 1, T, T), IDS, full)
    harmonic = sum(1 / (i + 1) for i in range(1, T)) / (T - 1)  # query i spreads over its i + 1 keys
    second = sum(1 / (i + 1) for i in range(N + 1, T)) / N  # the second repeat's queries, one target each
    assert scores["previous_token"].item() == pytest.approx(harmonic, abs=EXACT)
    assert scores["sink"].item() == pytest.approx(harmonic, abs=EXACT)
    assert scores["induction"].item() == pytest.approx(second, abs=EXACT)
    assert scores["duplicate_token"].item() == pytest.approx(second, abs=EXACT)


def test_a_sliding_window_changes_chance_and_what_is_defined():
    visible = visible_keys(T, [3])  # query i sees i-2 .. i
    assert visible[0].sum(-1).tolist() == [1, 2, 3, 3, 3, 3, 3]
    scores = pattern_scores(chance_weights(visible), IDS, visible)
    assert scores["previous_token"].item() == pytest.approx((1 / 2 + 5 / 3) / 6, abs=EXACT)
    assert scores["sink"].item() == pytest.approx((1 / 2 + 1 / 3) / 2, abs=EXACT)  # only queries 1, 2 see key 0
    assert scores["induction"].item() == pytest.approx(1 / 3, abs=EXACT)  # the target, 2 back, is in the window
    assert torch.isnan(scores["duplicate_token"]).all()  # 3 back is out of every window: no query counts
    hits, counts = attention_counts("duplicate_token", chance_weights(visible), IDS, visible)
    assert counts.tolist() == [[0.0]] and hits.tolist() == [[[0.0]]]


def test_score_names_are_checked():
    with pytest.raises(ValueError, match="score must be one of"):
        attention_counts("induction_head", PREVIOUS[None, None, None], IDS)


def tl_detection_patterns(ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """TransformerLens's head_detector.py patterns, rewritten from its code: previous token a diagonal below the
    main one; duplicate token the equal-token cells off the diagonal, lower triangle; induction the duplicate
    pattern rolled one key right, first column zeroed, lower triangle."""
    t = ids.numel()
    previous = torch.zeros(t, t)
    previous[1:, :-1] = torch.eye(t - 1)
    equal = (ids[None, :] == ids[:, None]).float()
    equal.fill_diagonal_(0)
    duplicate = torch.tril(equal)
    shifted = torch.roll(duplicate, shifts=1, dims=1)
    induction = torch.tril(torch.cat([torch.zeros(t, 1), shifted[:, 1:]], dim=1))
    return {"previous_token": torch.tril(previous), "duplicate_token": duplicate, "induction": induction}


def test_matches_transformer_lens_detect_head_up_to_its_denominator():
    """detect_head(error_measure="mul") = sum(pattern * detection) / sum(pattern): a share over all T rows; ours is
    the same sum over the queries that have a target, so TL's = ours * counted / T, on any attention and any
    ids (here with accidental repeats, not only a clean [BOS] r r)."""
    ids = torch.tensor([[BOS, 4, 4, 5, 4, 6, 5, 7, 6]])
    t = ids.size(1)
    generator = torch.Generator().manual_seed(0)
    scores = torch.randn(3, t, t, generator=generator, dtype=torch.float64)
    weights = scores.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf")).softmax(-1)
    for name, detection in tl_detection_patterns(ids[0]).items():
        hits, counts = attention_counts(name, weights[None, None], ids)
        ours = hits[0, 0] / counts[0, 0]
        tl = (weights * detection.double()).sum((-2, -1)) / weights.sum((-2, -1))  # (3,): their formula
        torch.testing.assert_close(ours * counts[0, 0] / t, tl, atol=1e-15, rtol=0)  # sums of <= 81 products


def test_every_score_stays_in_zero_one_on_random_attention():
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 9, (4, 12), generator=generator)
    visible = visible_keys(12, [None, 4])
    raw = torch.randn(4, 2, 3, 12, 12, generator=generator, dtype=torch.float64)
    weights = raw.masked_fill(~visible[None, :, None], float("-inf")).softmax(-1)
    for name in ATTENTION_SCORES:
        score = pattern_scores(weights, ids, visible)[name]
        assert ((score >= 0) & (score <= 1) | score.isnan()).all(), name


def test_copying_percentile_by_hand():
    assert copying_counts(torch.eye(4)[None])[0].item() == 4.0  # the attended token on top of every row: 1 each
    assert copying_counts(-torch.eye(4)[None])[0].item() == 0.0  # always below the others
    assert copying_counts(torch.ones(1, 4, 4))[0].item() == 2.0  # all tied: a half per row
    logits = torch.tensor([[[3.0, 1.0, 2.0],  # own 3 above both: 1
                            [0.0, 1.0, 2.0],  # own 1 above one, below one: 1/2
                            [5.0, 5.0, 5.0]]])  # ties with both: 1/2
    hits, counts = copying_counts(logits)
    assert hits.tolist() == [2.0] and counts.tolist() == [3.0]
    with pytest.raises(ValueError, match="n >= 2"):
        copying_counts(torch.ones(1, 1, 1))


def test_copying_chance_is_one_half_for_a_token_blind_head():
    """For any fixed logits, the attended token's percentile averaged over which token it is: exactly 1/2. A head
    whose output ignores what it reads writes the same row whatever the token, so its rows are one row."""
    generator = torch.Generator().manual_seed(2)
    row = torch.randn(9, generator=generator, dtype=torch.float64)
    hits, counts = copying_counts(row.expand(9, 9)[None])
    assert (hits / counts).item() == pytest.approx(0.5, abs=EXACT)
