"""The pieces the layout extracted: reserved ids and sequences (text/ids.py), shared argument checks (checks.py)."""

from __future__ import annotations

import pytest
import torch

from transformer.checks import check_choice, check_int
from transformer.text.ids import BOS_ID, EOS_ID, PAD_ID, SPECIAL_PIECES, UNK_ID, pad, source_ids, target_ids
from transformer.text.tasks import make_task
from transformer.text.tokenizers import CharTokenizer, build_tokenizers


def test_reserved_ids_match_every_tokenizer() -> None:
    assert (PAD_ID, UNK_ID, BOS_ID, EOS_ID) == (0, 1, 2, 3)
    assert SPECIAL_PIECES == ("<pad>", "<unk>", "<s>", "</s>")
    splits = make_task("copy", n_train=50, n_valid=0, n_test=0, seed=0)
    for kind in ("char", "bpe"):
        tokenizer, _ = build_tokenizers(splits, kind=kind, vocab_size=60, shared=True)
        assert [tokenizer.id_to_piece(i) for i in range(4)] == list(SPECIAL_PIECES)
        assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.bos_id, tokenizer.eos_id) == (0, 1, 2, 3)


def test_source_and_target_sequences() -> None:
    tokenizer = CharTokenizer.from_texts(["abc"])
    a, b = tokenizer.encode("ab")
    assert source_ids(tokenizer, "ab") == [a, b, EOS_ID]  # the encoder reads the tokens, then EOS
    assert target_ids(tokenizer, "ab") == [BOS_ID, a, b, EOS_ID]  # the decoder reads [:-1], predicts [1:]


def test_pad_right_pads_to_the_longest_row() -> None:
    ids = pad([[5, 6, 7], [8]])
    assert ids.dtype == torch.long
    assert ids.tolist() == [[5, 6, 7], [8, PAD_ID, PAD_ID]]


@pytest.mark.parametrize("value", [0, -1, 1.5, "3", True, None])
def test_check_int_refuses(value) -> None:
    with pytest.raises(ValueError, match=r"n must be an integer >= 1"):
        check_int("n", value, 1)


def test_check_int_and_choice_accept() -> None:
    assert check_int("n", 3, 1) == 3
    check_choice("kind", "bpe", ("bpe", "char"))
    with pytest.raises(ValueError, match=r"unknown kind 'x'; valid choices: bpe, char"):
        check_choice("kind", "x", ("bpe", "char"))
