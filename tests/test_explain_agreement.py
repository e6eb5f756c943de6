"""agreement (Spearman's ρ by hand), alignment_accuracy, and true_alignment for the built-in tasks."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from transformer.explain import agreement, alignment_accuracy, true_alignment


def test_agreement_spearman_by_hand():
    a = torch.tensor([[1.0, 2.0, 0.0], [3.0, 4.0, 0.0]])  # last column is padding (0 in every method)
    b = torch.tensor([[4.0, 3.0, 0.0], [2.0, 1.0, 0.0]])  # exactly reversed ranks
    c = torch.tensor([[10.0, 20.0, 0.0], [30.0, 50.0, 0.0]])  # same ranks as a
    table = agreement({"a": a, "b": b, "c": c})
    assert list(table.index) == ["a", "b", "c"] and list(table.columns) == ["a", "b", "c"]
    assert table.loc["a", "b"] == pytest.approx(-1.0)
    assert table.loc["a", "c"] == pytest.approx(1.0) and table.loc["c", "a"] == pytest.approx(1.0)
    assert table.loc["b", "b"] == 1.0
    d = torch.tensor([[1.0, 3.0, 0.0], [2.0, 4.0, 0.0]])  # ranks 1,3,2,4 against a's 1,2,3,4: ρ = 1 - 6·2/(4·15)
    assert agreement({"a": a, "d": d}).loc["a", "d"] == pytest.approx(0.8)


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n, ties given their mean rank (the reference, by hand)."""
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(1, len(x) + 1)
    for value in np.unique(x):
        ranks[x == value] = ranks[x == value].mean()
    return ranks


def test_agreement_each_pair_over_the_cells_both_define_with_ties():
    """Every pair ranked over the cells both methods define (NaN in either leaves the cell out of that pair only),
    ties averaged, against Pearson's r of ranks computed here; a constant method is NaN against the others."""
    gen = torch.Generator().manual_seed(0)
    maps = {name: torch.rand(5, 6, generator=gen) + 0.1 for name in "abcdef"}
    maps["b"] = (maps["a"] * 3).round() / 3  # many ties
    maps["c"][1] = float("nan")  # an undefined row
    maps["d"][:, 2] = float("nan")  # undefined cells in another place
    maps["e"][:] = 0.5  # constant
    table = agreement(maps)
    for x, y in [(x, y) for x in maps for y in maps if x != y]:
        u, v = maps[x].flatten().double().numpy(), maps[y].flatten().double().numpy()
        both = ~np.isnan(u) & ~np.isnan(v)
        ru, rv = _average_ranks(u[both]), _average_ranks(v[both])
        expected = np.nan if "e" in (x, y) else np.corrcoef(ru, rv)[0, 1]
        assert table.loc[x, y] == pytest.approx(expected, nan_ok=True, abs=1e-12), (x, y)
    assert (np.diag(table.to_numpy()) == 1.0).all()


def test_agreement_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="same shape"):
        agreement({"a": torch.zeros(2, 3), "b": torch.zeros(3, 2)})


def test_alignment_accuracy():
    attr = torch.tensor([[0.1, 0.9, 0.0], [0.8, 0.2, 0.0], [0.3, 0.3, 0.4]])
    truth = torch.tensor([[False, True, False], [False, True, False], [False, False, False]])
    assert alignment_accuracy(attr, truth) == 0.5  # third row has no true token: not counted
    assert math.isnan(alignment_accuracy(attr, torch.zeros(3, 3, dtype=torch.bool)))


def test_true_alignment_copy_reverse_sort():
    src, pieces = "abca", ["a", "b", "c", "a", "</s>"]
    copy = true_alignment("copy", src, src, pieces, [*src, "</s>"])
    assert copy.shape == (5, 5)
    assert torch.equal(copy[:4, :4], torch.eye(4, dtype=torch.bool)) and not copy[4].any() and not copy[:, 4].any()
    rev = true_alignment("reverse", src, src[::-1], pieces, [*src[::-1], "</s>"])
    assert torch.equal(rev[:4, :4], torch.eye(4, dtype=torch.bool).flip(1))
    srt = true_alignment("sort", src, "aabc", pieces, ["a", "a", "b", "c", "</s>"])
    assert srt[0].tolist() == [True, False, False, True, False]  # either "a" is a true source
    assert srt[3].tolist() == [False, False, True, False, False]


def test_true_alignment_dates_fields():
    src = "2026-11-21"
    out = "Samstag, 21. November 2026"
    align = true_alignment("dates", src, out, [*src, "</s>"], [*out, "</s>"])
    year, month, day = [0, 1, 2, 3], [5, 6], [8, 9]
    row = {i: set(align[i].nonzero()[:, 0].tolist()) for i in range(len(out))}
    assert row[out.index("21")] == set(day)  # "21" <- the day's digits
    assert row[out.index("N")] == set(month)  # "November" <- the month
    assert row[out.index("2026")] == set(year)
    assert row[0] == set(year + month + day)  # the weekday depends on the whole date
    assert row[out.index(",")] == set() and row[out.index(".")] == set()


def test_true_alignment_with_sentencepiece_pieces():
    align = true_alignment("copy", "ab cd", "ab cd", ["▁ab", "▁c", "d", "</s>"], ["▁ab", "▁cd", "</s>"])
    assert align.tolist() == [[True, False, False, False], [False, True, True, False], [False] * 4]


def test_true_alignment_errors():
    with pytest.raises(ValueError, match="numbers"):
        true_alignment("numbers", "seven", "sieben", ["s"], ["s"])
    with pytest.raises(ValueError, match="spell"):
        true_alignment("copy", "abc", "abc", ["a", "x", "c"], ["a", "b", "c"])
    with pytest.raises(ValueError, match="ISO"):
        true_alignment("dates", "21.11.2026", "x", [*"21.11.2026"], ["x"])


def test_undefined_rows_count_nowhere():
    """NaN rows (ALTI+, value zeroing) leave the rank correlation pairwise and the accuracy: never ranked as 0,
    never an argmax."""
    a = torch.tensor([[4.0, 3.0, 1.0], [2.0, 1.0, 0.5], [1.0, 2.0, 3.0]])
    b = a.clone()
    b[1] = float("nan")
    c = -a
    table = agreement({"a": a, "b": b, "c": c})
    assert table.loc["a", "b"] == pytest.approx(1.0) and table.loc["a", "c"] == pytest.approx(-1.0)
    truth = torch.tensor([[True, False, False], [False, False, True], [False, False, True]])
    assert alignment_accuracy(b, truth) == 1.0  # the undefined row 1 (whose argmax would be NaN's) is left out
    assert alignment_accuracy(a, truth) == pytest.approx(2 / 3)
    assert math.isnan(alignment_accuracy(torch.full((3, 3), float("nan")), truth))
