"""Every tokenizer kind round-trips task text, keeps ids 0..3 reserved, and saves without pickle."""

from __future__ import annotations

import pytest

from transformer.text.tasks import make_task
from transformer.text.tokenizers import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    SPECIAL_PIECES,
    UNK_ID,
    CharTokenizer,
    SentencePieceTokenizer,
    build_tokenizers,
    load_tokenizer,
)

KINDS = ("bpe", "unigram", "char")


@pytest.fixture(scope="module")
def splits():
    return make_task("numbers", n_train=400, n_valid=20, n_test=20, seed=5)


@pytest.fixture(scope="module")
def tokenizers(splits):
    """One shared tokenizer per kind, trained once for the whole module."""
    return {kind: build_tokenizers(splits, kind=kind, vocab_size=200)[0] for kind in KINDS}


@pytest.mark.parametrize("kind", KINDS)
def test_round_trip_on_unseen_task_text(tokenizers, splits, kind):
    tok = tokenizers[kind]
    assert tok.kind == kind
    for src, tgt in splits.test:
        for text in (src, tgt):
            ids = tok.encode(text)
            assert UNK_ID not in ids
            assert tok.decode(ids) == text
            assert tok.decode([BOS_ID, *ids, EOS_ID, PAD_ID, PAD_ID]) == text  # specials are dropped


def test_round_trip_on_string_and_date_tasks():
    for task, kind in (("reverse", "bpe"), ("dates", "unigram"), ("sort", "char")):
        s = make_task(task, n_train=300, n_valid=10, n_test=10)
        tok, _ = build_tokenizers(s, kind=kind, vocab_size=120)
        assert all(tok.decode(tok.encode(src)) == src for src, _ in s.test)


@pytest.mark.parametrize("kind", KINDS)
def test_reserved_ids_and_pieces(tokenizers, kind):
    tok = tokenizers[kind]
    assert (tok.pad_id, tok.unk_id, tok.bos_id, tok.eos_id) == (0, 1, 2, 3)
    assert tuple(tok.id_to_piece(i) for i in range(4)) == SPECIAL_PIECES == ("<pad>", "<unk>", "<s>", "</s>")
    assert [tok.piece_to_id(p) for p in SPECIAL_PIECES] == [0, 1, 2, 3]
    assert BOS_ID not in tok.encode("one") and EOS_ID not in tok.encode("one")


@pytest.mark.parametrize("kind", KINDS)
def test_unknown_characters_become_unk(tokenizers, kind):
    tok = tokenizers[kind]
    ids = tok.encode("one ж")
    assert ids[-1] == UNK_ID and UNK_ID not in ids[:-1]
    assert tok.pieces("one ж")[-1] == "<unk>"
    assert tok.decode(ids).endswith("⁇")
    assert tok.piece_to_id("no such piece") == UNK_ID


@pytest.mark.parametrize("kind", KINDS)
def test_vocab_table(tokenizers, kind):
    tok = tokenizers[kind]
    table = tok.vocab()
    assert list(table.columns) == ["id", "piece", "score"]
    assert len(table) == tok.vocab_size and list(table["id"]) == list(range(tok.vocab_size))
    assert list(table["piece"][:4]) == list(SPECIAL_PIECES)
    assert table["piece"].is_unique
    assert tok.pieces("twenty") == [table["piece"][i] for i in tok.encode("twenty")]


@pytest.mark.parametrize("kind", KINDS)
def test_save_and_load_give_identical_ids(tokenizers, splits, tmp_path, kind):
    tok = tokenizers[kind]
    paths = tok.save(tmp_path, "src")
    assert [p.name for p in paths] == (["src.chars.json"] if kind == "char" else ["src.model"])
    loaded = load_tokenizer(tmp_path, "src")
    assert loaded.kind == kind and loaded.vocab_size == tok.vocab_size
    for src, tgt in splits.valid:
        assert loaded.encode(src) == tok.encode(src) and loaded.encode(tgt) == tok.encode(tgt)
    assert loaded.vocab().equals(tok.vocab())


def test_missing_or_corrupt_files_raise_value_error(tmp_path):
    with pytest.raises(ValueError, match="no tokenizer 'src'"):
        load_tokenizer(tmp_path, "src")
    (tmp_path / "src.model").write_bytes(b"definitely not a protobuf")
    with pytest.raises(ValueError, match="not a valid SentencePiece model"):
        load_tokenizer(tmp_path, "src")
    (tmp_path / "tgt.chars.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a valid character tokenizer"):
        load_tokenizer(tmp_path, "tgt")


def test_training_is_deterministic_and_separate_tokenizers_differ(splits):
    texts = [src for src, _ in splits.train]
    a = SentencePieceTokenizer.train(texts, vocab_size=100)
    b = SentencePieceTokenizer.train(texts, vocab_size=100)
    assert a.vocab().equals(b.vocab())
    src_tok, tgt_tok = build_tokenizers(splits, kind="char", shared=False)
    assert src_tok is not tgt_tok and "ü" not in list(src_tok.vocab()["piece"])
    shared_a, shared_b = build_tokenizers(splits, kind="char")
    assert shared_a is shared_b


def test_bad_training_arguments_raise_clear_value_errors(splits):
    with pytest.raises(ValueError, match="vocab_size=10 is too small"):
        SentencePieceTokenizer.train([tgt for _, tgt in splits.train], vocab_size=10)
    with pytest.raises(ValueError, match="valid choices: bpe, unigram, char"):
        build_tokenizers(splits, kind="word")
    with pytest.raises(ValueError, match="no text"):
        SentencePieceTokenizer.train(["", " "], vocab_size=50)


def test_char_tokenizer_ids_are_sorted_after_the_reserved_ones():
    tok = CharTokenizer.from_texts(["cab", "bb"])
    assert tok.encode("abc") == [4, 5, 6] and tok.vocab_size == 7
    assert list(tok.vocab()["score"]) == [0, 0, 0, 0, 1, 3, 1]
    with pytest.raises(ValueError, match="out of range"):
        tok.decode([7])


PIECE = b"\x0a\x08\x0a\x01x\x15\x00\x00\x80\xbf"  # field 1 (a SentencePiece): piece "x", score -1.0 (a fixed32)


@pytest.mark.parametrize("kind", ["bpe", "unigram"])
def test_spm_pieces_are_counted_on_the_protobuf_bytes(tokenizers, tmp_path, kind):
    from transformer.text.tokenizers import count_spm_pieces

    proto = tokenizers[kind]._sp.serialized_model_proto()
    assert count_spm_pieces(proto) == tokenizers[kind].vocab_size  # the trainer and normalizer specs skipped
    assert count_spm_pieces(proto + PIECE * 3) == tokenizers[kind].vocab_size + 3  # repeated fields may follow
    assert count_spm_pieces(proto + PIECE * 1000, stop_after=10) == 11  # the walk stops past the bound
    for bad in (proto + b"\x0a\xff", proto + b"\x0a\x7f", b"\x0b"):  # a truncated length, a field past the end
        with pytest.raises(ValueError, match="not a valid SentencePiece model"):
            count_spm_pieces(bad)


def test_an_spm_of_other_than_the_configs_pieces_is_refused_before_parsing(tokenizers, tmp_path, monkeypatch):
    import transformer.text.tokenizers as tokenizers_module

    tok = tokenizers["bpe"]
    tok.save(tmp_path, "src")
    path = tmp_path / "src.model"
    path.write_bytes(path.read_bytes() + PIECE * 100_000)  # 1 MB: far under the 16 MB cap
    parsed = []
    monkeypatch.setattr(tokenizers_module, "SentencePieceTokenizer", lambda proto: parsed.append(proto))
    with pytest.raises(ValueError, match=f"holds more than {tok.vocab_size + 1:,} pieces but config.json says "
                                         f"{tok.vocab_size:,}"):
        load_tokenizer(tmp_path, "src", tok.vocab_size)
    assert not parsed  # refused on the count, never handed to sentencepiece
    load_tokenizer(tmp_path, "src")  # without a size to compare with it is parsed as before
    assert parsed
