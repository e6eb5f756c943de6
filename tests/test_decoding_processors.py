"""The logits processors (forced BOS / EOS, bad words, no repeated n-gram, min length) against ``transformers``'
own, and in all three decoders."""

from __future__ import annotations

import pytest
import torch

from transformer import Transformer, TransformerConfig
from transformer.decoding import (
    ForcedBOS,
    ForcedEOS,
    GenerationRules,
    MinLength,
    NoBadWords,
    NoRepeatNGram,
    beam_search,
    greedy_decode,
    sample,
)
from transformer.text.ids import EOS_ID

VOCAB, MAX_LEN = 12, 16


def scores_and_prefixes(seed: int, rows: int = 6, length: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    scores = torch.log_softmax(torch.randn(rows, VOCAB, generator=gen), dim=-1)
    prefix = torch.randint(0, VOCAB, (rows, length), generator=gen)
    if length >= 2:
        prefix[0, -2:] = torch.tensor([5, 6])  # some row ends with a bad word's head
    prefix[1, -1] = 9
    return scores, prefix


@pytest.mark.parametrize("length", [1, 2, 5])
def test_forced_bos_and_eos_equal_transformers(length):
    reference = pytest.importorskip("transformers.generation.logits_process")
    scores, prefix = scores_and_prefixes(length, length=length)
    ours, theirs = ForcedBOS(7), reference.ForcedBOSTokenLogitsProcessor(7)
    assert torch.equal(ours(prefix, scores.clone()), theirs(prefix, scores.clone()))
    for max_length in (2, 3, 6, 7):
        ours, theirs = ForcedEOS(max_length, 3), reference.ForcedEOSTokenLogitsProcessor(max_length, 3)
        assert torch.equal(ours(prefix, scores.clone()), theirs(prefix, scores.clone())), max_length


@pytest.mark.parametrize("seed", range(4))
def test_no_bad_words_equals_transformers(seed):
    reference = pytest.importorskip("transformers.generation.logits_process")
    words = [[1], [4], [5, 6, 2], [9, 8], [EOS_ID], [6, 11]]
    for length in (1, 2, 4):
        scores, prefix = scores_and_prefixes(seed, length=length)
        expected = reference.NoBadWordsLogitsProcessor(words, eos_token_id=EOS_ID)(prefix, scores.clone())
        got = NoBadWords(words, eos_id=EOS_ID)(prefix, scores.clone())
        assert torch.equal(got, expected)
        assert torch.isneginf(got[:, 1]).all() and not torch.isneginf(got[:, EOS_ID]).any()


@pytest.mark.parametrize("seed", range(3))
def test_many_bad_words_of_every_length_equal_transformers(seed):
    """NoBadWords matches all its longer sequences in one comparison (right-aligned heads): the same bans as
    transformers' loop over them, for sequences of 1 to 6 ids, repeated last ids and prefixes shorter than a head."""
    reference = pytest.importorskip("transformers.generation.logits_process")
    gen = torch.Generator().manual_seed(seed)
    words = [torch.randint(0, 4, (int(n),), generator=gen).tolist()
             for n in torch.randint(1, 7, (200,), generator=gen)]
    words = [w for w in words if w != [EOS_ID]] + [[5, 6, 2], [9, 8]]
    for length in (1, 2, 3, 5, 8):
        scores, prefix = scores_and_prefixes(seed, length=length)
        prefix = prefix % 4  # few distinct ids: many heads match
        expected = reference.NoBadWordsLogitsProcessor(words, eos_token_id=EOS_ID)(prefix, scores.clone())
        assert torch.equal(NoBadWords(words, eos_id=EOS_ID)(prefix, scores.clone()), expected), length


def test_bad_words_are_checked():
    for bad in ([], [[]], [[-1]]):
        with pytest.raises(ValueError, match="bad_words_ids"):
            NoBadWords(bad)


@pytest.mark.parametrize("ngram_size", [1, 2, 3, 4])
def test_no_repeat_ngram_equals_transformers(ngram_size):
    reference = pytest.importorskip("transformers.generation.logits_process")
    for seed in range(3):
        for length in (1, 2, 3, 6, 12):
            scores, prefix = scores_and_prefixes(seed, length=length)
            prefix = prefix % 4  # few distinct ids: n-grams repeat
            expected = reference.NoRepeatNGramLogitsProcessor(ngram_size)(prefix, scores.clone())
            assert torch.equal(NoRepeatNGram(ngram_size)(prefix, scores.clone()), expected), (seed, length)
    prefix = torch.tensor([[0, 1, 2, 1]])
    assert torch.isneginf(NoRepeatNGram(2)(prefix, torch.zeros(1, VOCAB))[0]).nonzero().flatten().tolist() == [2]
    with pytest.raises(ValueError, match="no_repeat_ngram_size"):
        NoRepeatNGram(0)


def test_min_length_equals_transformers():
    reference = pytest.importorskip("transformers.generation.logits_process")
    for length in (1, 2, 4, 5, 8):
        scores, prefix = scores_and_prefixes(length, length=length)
        for min_length in (0, 1, 3, 5, 6):
            expected = reference.MinLengthLogitsProcessor(min_length, EOS_ID)(prefix, scores.clone())
            assert torch.equal(MinLength(min_length, EOS_ID)(prefix, scores.clone()), expected), (length, min_length)


def test_rules_give_transformers_order_and_lengths():
    rules = GenerationRules(forced_bos_id=7, forced_eos_id=3, bad_words_ids=((4,),), eos_id=3,
                            no_repeat_ngram_size=3, min_length=4)
    ngram, bad, minimum, bos, eos = rules.processors(max_len=5)
    assert isinstance(ngram, NoRepeatNGram) and ngram.n == 3 and isinstance(bad, NoBadWords)
    assert (minimum.min_length, minimum.eos_ids) == (4, [3])
    assert bos.bos_id == 7 and (eos.max_length, eos.eos_id) == (6, 3)
    assert GenerationRules().processors(5) == []


@pytest.fixture(scope="module")
def model() -> Transformer:
    torch.manual_seed(0)
    config = TransformerConfig(VOCAB, VOCAB, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0, max_len=MAX_LEN)
    return Transformer(config).eval()


def decoded(model: Transformer, strategy: str, rules: GenerationRules | None, max_len: int = 6) -> list[list[int]]:
    """Each row's generated ids, EOS kept (the ids after the decoder start)."""
    src = torch.randint(4, VOCAB, (3, 5), generator=torch.Generator().manual_seed(1))
    if strategy == "beam":
        results = beam_search(model, src, beam_size=3, max_len=max_len, rules=rules)
        return [[*r.best.tokens, *([EOS_ID] if r.best.finished else [])] for r in results]
    run = greedy_decode if strategy == "greedy" else sample
    extra = {} if strategy == "greedy" else {"seed": 0}
    result = run(model, src, max_len=max_len, rules=rules, **extra)
    return [[*tokens, *([EOS_ID] if done else [])] for tokens, done in zip(result.tokens, result.finished, strict=True)]


@pytest.mark.parametrize("strategy", ["greedy", "sampling", "beam"])
def test_every_decoder_applies_the_rules(model, strategy):
    free = decoded(model, strategy, None)
    assert any(row[:1] != [9] for row in free)  # the rules below change something
    rules = GenerationRules(forced_bos_id=9, forced_eos_id=EOS_ID, bad_words_ids=((5,), (9, 6)), eos_id=EOS_ID)
    for row in decoded(model, strategy, rules):
        assert row[0] == 9, row  # forced first
        assert 5 not in row and (9, 6) not in set(zip(row, row[1:], strict=False))
        assert row[-1] == EOS_ID and len(row) <= 6  # ends by the bound: forced at the last step at the latest


@pytest.mark.parametrize("strategy", ["greedy", "sampling", "beam"])
def test_forced_eos_lands_on_the_last_step(model, strategy):
    rules = GenerationRules(forced_eos_id=EOS_ID, bad_words_ids=((EOS_ID,), (0,)))  # eos otherwise never chosen
    for row in decoded(model, strategy, GenerationRules(bad_words_ids=((EOS_ID,),), eos_id=None), max_len=4):
        assert EOS_ID not in row and len(row) == 4
    for row in decoded(model, strategy, rules, max_len=4):
        assert row[-1] == EOS_ID and len(row) == 4


@pytest.mark.parametrize("strategy", ["greedy", "sampling", "beam"])
def test_every_decoder_applies_min_length_and_no_repeat_ngram(model, strategy):
    eager = Transformer(model.config).eval()  # a model that wants to end at once and to repeat itself
    eager.load_state_dict(model.state_dict())
    with torch.no_grad():
        eager.generator.bias[EOS_ID] += 12.0
        eager.generator.bias[7] += 8.0
    assert all(row == [EOS_ID] for row in decoded(eager, strategy, None))
    rules = GenerationRules(eos_id=EOS_ID, min_length=5, no_repeat_ngram_size=1)
    for row in decoded(eager, strategy, rules, max_len=8):
        assert EOS_ID not in row[:4] and row[4] == EOS_ID, row  # 4 tokens, then the end it wanted at once
        assert row.count(7) == 1 and len(set(row)) == len(row)  # its second choice once, no token twice
