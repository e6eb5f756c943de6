"""True alignments of the built-in tasks: which source tokens each output token comes from.

The ground truth for ``alignment_accuracy`` (the gold-alignment check of attention in
Ferrando & Costa-jussà 2021, "Attention Weights in Transformer NMT Fail Aligning Words
Between Sequences but Largely Explain Model Predictions"). Alignments are defined on
characters, then lifted to pieces: output piece p is aligned to source piece q when a
character of p comes from a character of q. So they hold for any tokenizer whose pieces
spell the text (character, and SentencePiece with "▁" for spaces).

- copy: output character k <- source character k.
- reverse: output character k <- source character n-1-k.
- sort: output character c <- every source position holding c (equal characters are
  interchangeable, so all of them are true).
- dates (ISO source "YYYY-MM-DD"): each output field from its source field: the year's
  digits <- the year, the day's number <- the day, the month's name or number <- the
  month; a weekday name ("full" format) depends on all three. Separators ("-", ".", ",",
  spaces) come from no source token.
- sentences: each German word from the English word it translates (``text.sentences``: the
  grammar's own alignment, re-derived from the source by ``parse``); a German comma from the
  English comma, or else from the conjunction it announces. Only the reference translation has
  a known alignment: any other output text raises ValueError. Every character of a word carries
  the word's sources, so a piece inherits the sources of the word(s) it lies in.
- numbers: not given. A number word in the output depends on several source words at
  once ("siebenundvierzig" <- "forty-seven", with the order swapped), and BPE pieces cut
  across those words, so no piece-level ground truth is exact.

Special pieces (``<s>``, ``</s>``, ``<pad>``, ``<unk>``) are aligned to nothing, so the
``</s>`` row counts in no accuracy.

``dependency_arcs`` gives the true syntax for ``sentences``: (dependent, head, relation) arcs
between the pieces of the source (``side="source"``) or of the German reference
(``side="target"``), relations named as in Universal Dependencies v2 (``text.sentences``: det,
det:poss, amod, nsubj, obj, case, obl, mark, advcl, ccomp). A word of several pieces is
represented by its FIRST piece, both as dependent and as head.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch
from babel.dates import get_month_names
from torch import Tensor

from ..text import sentences
from ..text.ids import SPECIAL_PIECES

TASKS_WITH_ALIGNMENT = ("copy", "reverse", "sort", "dates", "sentences")
TASKS_WITH_ARCS = ("sentences",)
_MONTH_LOCALES = ("de", "en", "fr", "es", "it")


def true_alignment(
    task: str, src_text: str, tgt_text: str, src_pieces: Sequence[str], tgt_pieces: Sequence[str]
) -> Tensor:
    """-> (len(tgt_pieces), len(src_pieces)) bool: True where output piece i comes from source piece j.

    Pass the pieces as the model sees them (source pieces then "</s>"; output pieces then
    "</s>" to match ``Attribution.source``'s rows). Raises ValueError for a task without an
    alignment or pieces that do not spell the text.
    """
    if task not in TASKS_WITH_ALIGNMENT:
        raise ValueError(f"no true alignment for task {task!r}; available: {', '.join(TASKS_WITH_ALIGNMENT)}"
                         + (" (numbers: number words depend on several source words at once)"
                            if task == "numbers" else ""))
    src_spans, tgt_spans = piece_spans(src_text, src_pieces), piece_spans(tgt_text, tgt_pieces)
    sources = _character_sources(task, src_text, tgt_text)  # output char k -> source chars
    result = torch.zeros(len(tgt_pieces), len(src_pieces), dtype=torch.bool)
    owner = {k: j for j, span in enumerate(src_spans) if span for k in range(*span)}  # source char -> piece
    for i, span in enumerate(tgt_spans):
        for k in range(*span) if span else ():
            for source_char in sources.get(k, ()):
                if source_char in owner:
                    result[i, owner[source_char]] = True
    return result


def piece_spans(text: str, pieces: Sequence[str]) -> list[tuple[int, int] | None]:
    """Where each piece lies in ``text`` as (start, end) characters; None for special pieces."""
    spans: list[tuple[int, int] | None] = []
    cursor = 0
    for piece in pieces:
        if piece in SPECIAL_PIECES:
            spans.append(None)
            continue
        chunk = piece.replace("▁", " ")
        if not text.startswith(chunk, cursor):
            chunk = chunk.lstrip()  # a word-initial "▁" at the start of the text, or after a space in the text
            while cursor < len(text) and text[cursor].isspace() and not text.startswith(chunk, cursor):
                cursor += 1
        if not text.startswith(chunk, cursor):
            raise ValueError(f"piece {piece!r} does not continue {text!r} at character {cursor}: "
                             f"pieces must spell the text")
        spans.append((cursor, cursor + len(chunk)))
        cursor += len(chunk)
    if text[cursor:].strip():
        raise ValueError(f"pieces spell only {text[:cursor]!r} of {text!r}")
    return spans


def _character_sources(task: str, src: str, tgt: str) -> dict[int, list[int]]:
    """For each output character, the source characters it comes from."""
    n = len(src)
    if task == "copy":
        return {k: [k] for k in range(min(len(tgt), n))}
    if task == "reverse":
        return {k: [n - 1 - k] for k in range(min(len(tgt), n))}
    if task == "sort":
        return {k: [j for j, c in enumerate(src) if c == char] for k, char in enumerate(tgt)}
    if task == "sentences":
        return _sentence_sources(src, tgt)
    return _date_sources(src, tgt)


def _sentence_sources(src: str, tgt: str) -> dict[int, list[int]]:
    structure = sentences.parse(src)  # ValueError if the source is not of the grammar
    if tgt.strip() != structure.target:
        raise ValueError(f"the sentences alignment is known only for the reference translation "
                         f"{structure.target!r} of {src!r}, not for {tgt!r}")
    src_words = sentences.words(src)
    sources: dict[int, list[int]] = {}
    offset = len(tgt) - len(tgt.lstrip())
    for (_, start, end), aligned in zip(sentences.words(structure.target), structure.alignment, strict=True):
        chars = [c for j in aligned for c in range(src_words[j][1], src_words[j][2])]
        for k in range(start + offset, end + offset):
            sources[k] = chars
    return sources


def dependency_arcs(task: str, src_text: str, pieces: Sequence[str], side: str = "source",
                    tgt_text: str | None = None) -> list[tuple[int, int, str]]:
    """-> the dependency arcs as (dependent piece, head piece, relation), each word at its first piece.

    side "source": ``pieces`` are the source's as the model sees them ("</s>" may follow). side "target": they
    are the German reference's (``tgt_text``, by default the grammar's own German of ``src_text``), and the arcs
    are ``Structure.target_arcs`` on them. Raises ValueError for a task without arcs, a source outside its
    grammar, a target other than the reference, or pieces that do not spell the text.
    """
    if task not in TASKS_WITH_ARCS:
        raise ValueError(f"no dependency arcs for task {task!r}; available: {', '.join(TASKS_WITH_ARCS)}")
    if side not in ("source", "target"):
        raise ValueError(f"side must be 'source' or 'target', got {side!r}")
    structure = sentences.parse(src_text)
    text, arcs = (src_text, structure.arcs) if side == "source" else (structure.target, structure.target_arcs)
    if side == "target" and tgt_text is not None and tgt_text.strip() != structure.target:
        raise ValueError(f"the German arcs are known only for the reference translation {structure.target!r} "
                         f"of {src_text!r}, not for {tgt_text!r}")
    spans = piece_spans(text, pieces)
    first = []
    for _, start, end in sentences.words(text):
        first.append(next(i for i, span in enumerate(spans) if span and span[0] < end and span[1] > start))
    return [(first[dep], first[head], relation) for dep, head, relation in arcs]


def _date_sources(src: str, tgt: str) -> dict[int, list[int]]:
    match = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})", src.strip())
    if match is None:
        raise ValueError(f"dates alignment needs an ISO source 'YYYY-MM-DD', got {src!r}")
    fields = {name: list(range(*match.span(group))) for group, name in enumerate(("year", "month", "day"), 1)}
    year, month, day = (int(match.group(g)) for g in (1, 2, 3))
    months = {name.lower().rstrip(".") for locale in _MONTH_LOCALES for width in ("wide", "abbreviated")
              for name in get_month_names(width, locale=locale).values()}
    sources: dict[int, list[int]] = {}
    for run in re.finditer(r"\d+|[^\W\d_]+", tgt):
        word = run.group()
        if word.isdigit():
            value = int(word)
            chosen = [name for name, hit in (("year", len(word) == 4 and value == year),
                                             ("month", len(word) <= 2 and value == month),
                                             ("day", len(word) <= 2 and value == day)) if hit]
        else:
            chosen = ["month"] if word.lower().rstrip(".") in months else ["year", "month", "day"]  # a weekday
        for k in range(*run.span()):
            sources[k] = [c for name in chosen for c in fields[name]]
    return sources
