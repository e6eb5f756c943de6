"""Word alignments read off an attribution map, and their alignment error rate against gold links.

- ``word_ids``: which word each piece belongs to (SentencePiece marks a word's start with "▁"; a character
  tokenizer's words are separated by space characters; special pieces and bare spaces belong to none).
- ``word_alignment``: the argmax source piece of every output piece's row, lifted to word pairs (a target
  word links to a source word when any of their pieces do), the way the alignment literature reads
  attention (e.g. Garg et al. 2019, "Jointly Learning to Align and Translate with Transformer Models").
  ``shift=True`` is Shift-Att (Chen et al. 2020, "Accurate Word Alignment Induction from Neural Machine
  Translation"): a target token is aligned with the row where it is the decoder's *input*, one step later
  than the row that predicts it, since that is where the decoder has read the word.
- ``alignment_error_rate``: Och & Ney 2003, "A Systematic Comparison of Various Statistical Alignment
  Models", over a corpus: AER = 1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|), with P including S.
- ``undefined_words``: the target words whose rows a method leaves undefined (NaN), to leave out of AER.
- ``read_pharaoh``: gold links in the format of fast_align and the alignment test sets: one sentence per
  line, "i-j" a sure link and "i?j" or "ipj" a possible one, source word index first, counted from 0.

Pairs are (source word, target word) everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

from torch import Tensor

Links = set[tuple[int, int]]
SPECIAL = {"<s>", "</s>", "<pad>", "<unk>"}
_LINK = re.compile(r"^(\d+)([-?p])(\d+)$")


def word_ids(pieces: Sequence[str], unit: str = "word", *, special: Collection[str] = ()) -> list[int]:
    """The word index of every piece (-1 for special pieces and bare spaces); ``unit="piece"``: each real piece
    is a word of its own (for character tasks whose whole input is one word). ``special``: more pieces that belong
    to no word (a multilingual model's language codes). A word starts at SentencePiece's "▁" and at byte-level
    BPE's "Ġ" (BART: a space before the word)."""
    if unit not in ("word", "piece"):
        raise ValueError(f"unit must be 'word' or 'piece', got {unit!r}")
    ids, current, start_next = [], -1, True
    for piece in pieces:
        if piece in SPECIAL or piece in special or not piece.strip(" ▁Ġ"):
            ids.append(-1)
            start_next = True  # a space (or a lone "▁") ends the word before it
            continue
        if unit == "piece" or start_next or piece.startswith(("▁", "Ġ")):
            current += 1
        ids.append(current)
        start_next = False
    return ids


def word_alignment(scores: Tensor, src_words: Sequence[int], tgt_words: Sequence[int], *,
                   shift: bool = False) -> Links:
    """scores (T-1, S): row t explains output piece t (``attribute(...).source[b]``, one sentence); src_words (S,)
    and tgt_words (T-1,) from ``word_ids`` -> the (source word, target word) links.

    Each row's argmax over the source pieces that belong to a word; ``shift``: output piece t takes row t+1. An
    undefined row (NaN: ALTI+, value zeroing) links nothing; ``undefined_words`` names the target words it hits."""
    rows, columns = scores.shape
    if len(src_words) != columns or len(tgt_words) != rows:
        raise ValueError(f"scores are {tuple(scores.shape)} but there are {len(tgt_words)} target and "
                         f"{len(src_words)} source word ids")
    real_columns = [j for j, w in enumerate(src_words) if w >= 0]
    if not real_columns:
        return set()
    links: Links = set()
    for t, target_word in enumerate(tgt_words):
        row = t + 1 if shift else t
        if target_word < 0 or row >= rows:
            continue
        values = scores[row, real_columns]
        if bool((values != values).any()):  # NaN, in a tensor or an array alike
            continue
        links.add((src_words[real_columns[int(values.argmax())]], target_word))
    return links


def undefined_words(scores: Tensor, tgt_words: Sequence[int], *, shift: bool = False) -> set[int]:
    """The target words that have an undefined row (NaN) in ``scores`` (T-1, S), read as ``word_alignment`` reads
    rows: such a word is left out of AER on both sides (its links and its gold links), never scored as a miss."""
    undefined = (scores != scores).any(1)  # (T-1,): NaN, in a tensor or an array alike
    rows = scores.shape[0]
    return {w for t, w in enumerate(tgt_words) if w >= 0 and (t + 1 if shift else t) < rows
            and bool(undefined[t + 1 if shift else t])}


def alignment_error_rate(predicted: Sequence[Links], sure: Sequence[Links],
                         possible: Sequence[Links] | None = None) -> float:
    """Och & Ney's AER over a corpus (one set of links per sentence); ``possible`` defaults to ``sure`` and is
    taken to include it. 0 is perfect; NaN when there are neither predicted nor sure links."""
    if len(predicted) != len(sure) or (possible is not None and len(possible) != len(sure)):
        raise ValueError("predicted, sure (and possible) need one set of links per sentence each")
    hits_sure = hits_possible = n_predicted = n_sure = 0
    for index, (a, s) in enumerate(zip(predicted, sure, strict=True)):
        p = s | (possible[index] if possible is not None else set())
        hits_sure += len(a & s)
        hits_possible += len(a & p)
        n_predicted += len(a)
        n_sure += len(s)
    if n_predicted + n_sure == 0:
        return float("nan")
    return 1.0 - (hits_sure + hits_possible) / (n_predicted + n_sure)


def read_pharaoh(text: str) -> tuple[list[Links], list[Links]]:
    """Pharaoh-format gold alignments -> (sure, possible) links per line. ValueError names a bad line."""
    sure: list[Links] = []
    possible: list[Links] = []
    for number, line in enumerate(text.splitlines(), start=1):
        s: Links = set()
        p: Links = set()
        for token in line.split():
            match = _LINK.match(token)
            if match is None:
                raise ValueError(f"line {number}: {token!r} is not a link like 3-2 (sure) or 3?2 / 3p2 (possible)")
            link = (int(match.group(1)), int(match.group(3)))
            (s if match.group(2) == "-" else p).add(link)
        sure.append(s)
        possible.append(p)
    return sure, possible


def gold_links(truth: Tensor, src_words: Sequence[int], tgt_words: Sequence[int]) -> Links:
    """A piece-level true alignment (T-1, S) bool (``true_alignment``) -> its word links."""
    rows, columns = truth.nonzero(as_tuple=True)
    return {(src_words[j], tgt_words[t]) for t, j in zip(rows.tolist(), columns.tolist(), strict=True)
            if src_words[j] >= 0 and tgt_words[t] >= 0}
