"""The sentences task's true structure at the piece level: true_alignment and dependency_arcs,
with a character tokenizer and a BPE tokenizer, and their errors."""

from __future__ import annotations

import pytest

from transformer.explain import dependency_arcs, true_alignment
from transformer.text import sentences
from transformer.text.tasks import make_task
from transformer.text.tokenizers import build_tokenizers

SRC = "when the big cat sees a dog, the men sleep with my mother"
TGT = "wenn die große Katze einen Hund sieht, schlafen die Männer mit meiner Mutter"


@pytest.fixture(scope="module")
def splits():
    return make_task("sentences", n_train=2000, n_valid=50, n_test=50, seed=11)


@pytest.fixture(scope="module", params=["char", "bpe"])
def tokenizer(request, splits):
    src_tok, tgt_tok = build_tokenizers(splits, kind=request.param, vocab_size=400)
    return src_tok, tgt_tok


def _pieces(tok, text: str) -> list[str]:
    return [tok.id_to_piece(i) for i in tok.encode(text)] + ["</s>"]


def _word_of(text: str) -> list[int | None]:
    """Per character, the index of the word it belongs to (None for spaces)."""
    owner: list[int | None] = [None] * len(text)
    for w, (_, start, end) in enumerate(sentences.words(text)):
        owner[start:end] = [w] * (end - start)
    return owner


def test_hand_written_alignment_with_character_pieces():
    align = true_alignment("sentences", SRC, TGT, [*SRC, "</s>"], [*TGT, "</s>"])
    assert align.shape == (len(TGT) + 1, len(SRC) + 1)
    row = {k: set(align[k].nonzero()[:, 0].tolist()) for k in range(len(TGT))}
    sees = set(range(SRC.index("sees"), SRC.index("sees") + 4))
    assert row[TGT.index("sieht")] == sees and row[TGT.index("sieht") + 4] == sees  # the verb went last
    assert row[TGT.index("schlafen")] == set(range(SRC.index("sleep"), SRC.index("sleep") + 5))
    assert row[TGT.index(",")] == {SRC.index(",")}
    assert row[TGT.index(" ")] == set() and not align[-1].any() and not align[:, -1].any()


def test_alignment_is_lifted_from_words_to_pieces(tokenizer, splits):
    """Output piece i <- source piece j exactly when they overlap an aligned pair of words."""
    src_tok, tgt_tok = tokenizer
    from transformer.explain.alignment import piece_spans

    for src, tgt in splits.test[:30]:
        src_pieces, tgt_pieces = _pieces(src_tok, src), _pieces(tgt_tok, tgt)
        align = true_alignment("sentences", src, tgt, src_pieces, tgt_pieces)
        structure = sentences.parse(src)
        src_owner, tgt_owner = _word_of(src), _word_of(tgt)
        src_spans, tgt_spans = piece_spans(src, src_pieces), piece_spans(tgt, tgt_pieces)
        for i, t_span in enumerate(tgt_spans):
            t_words = {tgt_owner[c] for c in range(*t_span)} - {None} if t_span else set()
            s_words = {j for w in t_words for j in structure.alignment[w]}
            expected = [bool(s_span) and bool({src_owner[c] for c in range(*s_span)} & s_words)
                        for s_span in src_spans]
            assert align[i].tolist() == expected, (src, tgt, tgt_pieces[i])
        assert align[:-1].any(1).sum() >= len(structure.tgt_words)  # every German word has a source


def test_dependency_arcs_at_the_first_piece_of_each_word(tokenizer, splits):
    src_tok, _ = tokenizer
    from transformer.explain.alignment import piece_spans

    for src, _ in splits.test[:30]:
        pieces = _pieces(src_tok, src)
        arcs = dependency_arcs("sentences", src, pieces)
        structure = sentences.parse(src)
        assert [r for _, _, r in arcs] == [r for _, _, r in structure.arcs]
        spans = piece_spans(src, pieces)
        for (dep, head, _), (w_dep, w_head, _) in zip(arcs, structure.arcs, strict=True):
            for piece, word in ((dep, w_dep), (head, w_head)):
                _, start, end = sentences.words(src)[word]
                assert spans[piece][0] <= start < spans[piece][1] or start <= spans[piece][0] < end
                assert all(not s or s[1] <= start or s[0] >= end for s in spans[:piece])  # the FIRST piece


def test_hand_written_arcs_with_character_pieces():
    src = "the big dog sees the cat"
    arcs = dependency_arcs("sentences", src, [*src, "</s>"])
    assert set(arcs) == {(0, 8, "det"), (4, 8, "amod"), (8, 12, "nsubj"), (17, 21, "det"), (21, 12, "obj")}


def test_hand_written_german_arcs_with_character_pieces():
    german = "der große Hund sieht die Katze"
    arcs = dependency_arcs("sentences", "the big dog sees the cat", [*german, "</s>"], side="target")
    assert set(arcs) == {(0, 10, "det"), (4, 10, "amod"), (10, 15, "nsubj"), (21, 25, "det"), (25, 15, "obj")}
    assert dependency_arcs("sentences", "the big dog sees the cat", [*german], side="target", tgt_text=german) == arcs


def test_german_arcs_at_the_first_piece_of_each_german_word(tokenizer, splits):
    _, tgt_tok = tokenizer
    from transformer.explain.alignment import piece_spans

    for src, tgt in splits.test[:30]:
        pieces = _pieces(tgt_tok, tgt)
        arcs = dependency_arcs("sentences", src, pieces, side="target", tgt_text=tgt)
        structure = sentences.parse(src)
        assert [r for _, _, r in arcs] == [r for _, _, r in structure.target_arcs]
        spans = piece_spans(tgt, pieces)
        for (dep, head, _), (w_dep, w_head, _) in zip(arcs, structure.target_arcs, strict=True):
            for piece, word in ((dep, w_dep), (head, w_head)):
                _, start, end = sentences.words(tgt)[word]
                assert spans[piece][0] <= start < spans[piece][1] or start <= spans[piece][0] < end
                assert all(not s or s[1] <= start or s[0] >= end for s in spans[:piece])  # the FIRST piece


def test_structure_errors():
    with pytest.raises(ValueError, match="only for the reference translation"):
        true_alignment("sentences", "the dog sleeps", "der Hund schlaeft", [*"the dog sleeps"],
                       [*"der Hund schlaeft"])
    with pytest.raises(ValueError, match="cannot parse"):
        true_alignment("sentences", "the dog see", "x", [*"the dog see"], ["x"])
    with pytest.raises(ValueError, match="no dependency arcs"):
        dependency_arcs("copy", "abc", ["a", "b", "c"])
    with pytest.raises(ValueError, match="only for the reference"):
        dependency_arcs("sentences", "the dog sleeps", [*"der Hund pennt"], side="target", tgt_text="der Hund pennt")
    with pytest.raises(ValueError, match="side"):
        dependency_arcs("sentences", "the dog sleeps", [*"the dog sleeps"], side="german")
    with pytest.raises(ValueError, match="spell"):
        dependency_arcs("sentences", "the dog sleeps", ["▁the", "▁cat", "▁sleeps"])
