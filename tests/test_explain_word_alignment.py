"""Word alignments from attribution maps and Och & Ney's alignment error rate, on hand-made cases and on the
shipped reverse model, whose true alignment is the anti-diagonal."""

from __future__ import annotations

import math

import pytest
import torch

from transformer.explain import (
    alignment_error_rate,
    attribute,
    gold_links,
    read_pharaoh,
    true_alignment,
    undefined_words,
    word_alignment,
    word_ids,
)
from transformer.pipeline import load_pretrained
from transformer.text.ids import target_ids


def test_word_ids_group_sentencepiece_and_characters():
    assert word_ids(["▁the", "▁ho", "use", "▁is", "</s>"]) == [0, 1, 1, 2, -1]
    assert word_ids(["a", "b", " ", "c", "</s>"]) == [0, 0, -1, 1, -1]
    assert word_ids(["▁", "x", "▁y"]) == [-1, 0, 1]  # a lone "▁" starts the next word
    assert word_ids(["a", "b", "</s>"], unit="piece") == [0, 1, -1]
    with pytest.raises(ValueError, match="unit"):
        word_ids(["a"], unit="char")


def test_word_alignment_takes_each_rows_argmax_and_shift_att_the_next_row():
    # rows explain output pieces ["▁das", "▁Ha", "us", "</s>"]; columns are source pieces ["▁the", "▁house", "</s>"]
    scores = torch.tensor([[0.7, 0.2, 0.1],
                           [0.1, 0.3, 0.6],  # </s> is not a word: the argmax over real columns is "house"
                           [0.2, 0.8, 0.0],
                           [0.9, 0.1, 0.0]])
    src, tgt = word_ids(["▁the", "▁house", "</s>"]), word_ids(["▁das", "▁Ha", "us", "</s>"])
    assert word_alignment(scores, src, tgt) == {(0, 0), (1, 1)}
    assert word_alignment(scores, src, tgt, shift=True) == {(1, 0), (1, 1), (0, 1)}  # rows 1, 2, 3
    with pytest.raises(ValueError, match="word ids"):
        word_alignment(scores, src, tgt[:2])


def test_an_undefined_row_links_nothing_and_its_word_is_named():
    nan = float("nan")
    scores = torch.tensor([[0.7, 0.2, 0.1], [nan, nan, nan], [0.2, 0.8, 0.0], [0.9, 0.1, 0.0]])
    src, tgt = word_ids(["▁the", "▁house", "</s>"]), word_ids(["▁das", "▁Ha", "us", "</s>"])
    assert word_alignment(scores, src, tgt) == {(0, 0), (1, 1)}  # "us" links "house"; "▁Ha" (undefined) nothing
    assert word_alignment(scores.numpy(), src, tgt) == {(0, 0), (1, 1)}  # an array alike
    assert undefined_words(scores, tgt) == {1} and undefined_words(scores, tgt, shift=True) == {0}
    assert undefined_words(scores[[0, 2, 3]], tgt[:3]) == set()


def test_aer_by_hand_and_the_pharaoh_format():
    sure, possible = read_pharaoh("0-0 1-1 2?2\n0p1\n")
    assert sure == [{(0, 0), (1, 1)}, set()] and possible == [{(2, 2)}, {(0, 1)}]
    predicted = [{(0, 0), (2, 2), (2, 1)}, {(0, 1)}]
    # |A| = 4, |S| = 2, |A ∩ S| = 1, |A ∩ P| = 3 (P includes S): 1 - (1 + 3) / (4 + 2)
    assert math.isclose(alignment_error_rate(predicted, sure, possible), 1 - 4 / 6)
    assert alignment_error_rate([{(0, 0)}], [{(0, 0)}]) == 0.0
    assert math.isnan(alignment_error_rate([set()], [set()]))
    with pytest.raises(ValueError, match="line 2"):
        read_pharaoh("0-0\n1:2\n")
    with pytest.raises(ValueError, match="one set of links per sentence"):
        alignment_error_rate([set()], [set(), set()])


def test_attention_on_the_reverse_model_aligns_almost_perfectly():
    pipe = load_pretrained("reverse")
    predicted, sure = [], []
    for text in ["abc123xyz", "hello42world", "q8w7e6r5t4"]:
        output = pipe.translate(text)
        src, tgt = pipe.encode_source(text), torch.tensor([target_ids(pipe.tgt_tokenizer, output)])
        src_pieces, out_pieces = [*text, "</s>"], [*output, "</s>"]
        src_words, tgt_words = word_ids(src_pieces, unit="piece"), word_ids(out_pieces, unit="piece")
        truth = true_alignment("reverse", text, output, src_pieces, out_pieces)
        sure.append(gold_links(truth, src_words, tgt_words))
        predicted.append(word_alignment(attribute(pipe.model, src, tgt, "attention").source[0], src_words, tgt_words))
    assert len(sure[0]) == 9 and (0, 8) in sure[0]  # character 0 of the source is the last of the output
    assert alignment_error_rate(predicted, sure) <= 0.05
    assert alignment_error_rate([{(j, j) for j in range(len(s))} for s in sure], sure) > 0.8  # the diagonal fails
