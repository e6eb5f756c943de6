"""Sentences the user gives the Heads page: source lines (typed or a .txt file), optional references, checked.

Any model can be measured on them, a Hugging Face Marian model or one trained on a user's file alike, where
the head statistics of a built-in task's generated sentences need a built-in task. Without references the
model's own greedy translations are the references (the page says so). ``check_sentences`` turns the two
texts into ``Sentences`` or raises ``ValueError`` with the message the page shows; the widgets that hold them
are ``ui.sections.sentences_input``'s. The costly work on them starts at a button (``ui.state.widgets.asked``).
"""

from __future__ import annotations

from dataclasses import dataclass

from transformer.pipeline import Pipeline, clean_text

MAX_SENTENCES = 200  # lines the head statistics take at most (every head is switched off once per measurement)
MAX_FILE_MB = 1  # an uploaded .txt of sentences (the uploader says so and refuses more; read_upload checks again)
MAX_FILE_BYTES = MAX_FILE_MB * 2**20
SHOWN_LINES = 5  # line numbers named in a message, at most


@dataclass(frozen=True)
class Sentences:
    """Checked source lines and their references (None: the model's own greedy translations are used)."""

    sources: tuple[str, ...]
    references: tuple[str, ...] | None = None


def split_lines(text: str) -> list[str]:
    """One sentence per line, each stripped; blank lines before the first and after the last are dropped."""
    return [line.strip() for line in text.strip().splitlines()]


def _numbers(lines: list[int]) -> str:
    shown = ", ".join(str(n) for n in lines[:SHOWN_LINES])
    return shown + (f" and {len(lines) - SHOWN_LINES} more" if len(lines) > SHOWN_LINES else "")


def _check_lines(lines: list[str], what: str) -> None:
    empty = [n for n, line in enumerate(lines, 1) if not line]
    if empty:
        raise ValueError(f"{what}: line {_numbers(empty)} {'is' if len(empty) == 1 else 'are'} empty; give one "
                         "sentence per line, without blank lines between them")
    if len(lines) > MAX_SENTENCES:
        raise ValueError(f"{what}: {len(lines):,} lines; at most {MAX_SENTENCES} are measured (every head is "
                         "switched off once over all of them): keep the first ones or split the file")


def _source_length(pipeline: Pipeline, line: str) -> int:
    """Positions the encoder needs for ``line``: what precedes its tokens (BART's ``<s>``, a source language code),
    the tokens and ``</s>``."""
    tokens = pipeline.src_tokenizer.encode(clean_text(line))
    if not tokens:
        raise ValueError(f"{line[:60]!r} gives no source tokens")
    return len(pipeline.source_prefix()) + len(tokens) + 1


def _target_length(pipeline: Pipeline, line: str) -> int:
    """Positions the decoder reads for a reference: the start id, a forced first token, the tokens
    (``Pipeline.target_ids`` less ``</s>``)."""
    return len(pipeline.target_ids(line)) - 1


def _check_lengths(lengths: list[int], limit: int, what: str) -> None:
    too_long = [n for n, length in enumerate(lengths, 1) if length > limit]
    if too_long:
        first = too_long[0]
        raise ValueError(f"{what}: line {_numbers(too_long)} {'is' if len(too_long) == 1 else 'are'} longer than "
                         f"the model's {limit} positions (line {first} needs {lengths[first - 1]}): shorten or "
                         "split it")


def check_sentences(pipeline: Pipeline, source_text: str, reference_text: str = "") -> Sentences:
    """The checked sentences, or ValueError saying what is wrong: no source line, blank lines, more than
    ``MAX_SENTENCES``, a reference count that differs from the source count, or a line longer than the model's
    ``max_len`` positions (a source with its ``</s>``, a reference with the decoder's start id)."""
    sources = split_lines(source_text or "")
    if not sources:
        raise ValueError("no source sentences: type some, one per line, or upload a .txt file of them")
    _check_lines(sources, "Source sentences")
    references = split_lines(reference_text or "") or None
    if references is not None:
        _check_lines(references, "References")
        if len(references) != len(sources):
            raise ValueError(f"{len(sources)} source lines but {len(references)} references: give one reference "
                             "per source line (the same order), or none to use the model's own translations")
    limit = pipeline.config.max_len
    for what, lines, length in (("Source sentences", sources, _source_length),
                                ("References", references or [], _target_length)):
        try:
            lengths = [length(pipeline, line) for line in lines]
        except ValueError as error:  # a line of control characters only, or one that gives no token
            raise ValueError(f"{what}: {error}") from None
        _check_lengths(lengths, limit, what)
    return Sentences(tuple(sources), tuple(references) if references is not None else None)


def check_text_size(text: str, what: str) -> str:
    """``text`` if it is no longer than the file it stands for may be (``MAX_FILE_BYTES`` characters), else
    ValueError: a text box's own cap is the browser's, and a longer text would be parsed on every rerun."""
    if len(text) > MAX_FILE_BYTES:
        raise ValueError(f"{what}: {len(text):,} characters; the limit is {MAX_FILE_BYTES:,} (as for a "
                         f"{MAX_FILE_MB} MB file)")
    return text


def read_upload(uploaded) -> str:
    """The text of an uploaded .txt file (UTF-8), or ValueError naming the problem: its size is checked here, on
    the server (the uploader's ``max_upload_size`` is the browser's check only)."""
    data = uploaded.getvalue()
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"{uploaded.name} is {len(data) / 2**20:.1f} MB; the limit is "
                         f"{MAX_FILE_BYTES // 2**20} MB")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError(f"{uploaded.name} is not UTF-8 text") from None
