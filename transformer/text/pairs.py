"""A user's own parallel text: TSV/CSV pairs read with clear errors, and split train/valid/test.

``Splits`` (the train/valid/test record every data set becomes) lives here too, so that the
built-in tasks (``tasks``) and a user's file share it.
"""

from __future__ import annotations

import csv
import io
import os
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

Pair = tuple[str, str]


@dataclass(frozen=True)
class Splits:
    """Train, validation and test pairs; no source sentence is in two of them."""

    train: list[Pair]
    valid: list[Pair]
    test: list[Pair]
    task: str = "custom"  # a name from TASKS, or "custom" for a user's file

    def all_pairs(self) -> list[Pair]:
        """Every pair, train first: what a shared tokenizer or a vocabulary count sees."""
        return [*self.train, *self.valid, *self.test]


class DataError(ValueError):
    """A user's file cannot be used; the message says where and why, for the app to show."""


def split_pairs(
    pairs: Sequence[Pair], *, valid_fraction: float = 0.05, test_fraction: float = 0.05, seed: int = 0
) -> Splits:
    """Shuffle a user's pairs into train/valid/test with no source in two splits.

    Pairs are deduplicated by source, the first target seen for a source winning, so
    a repeated sentence can neither leak from train into test nor carry two answers.
    Each split with a positive fraction gets at least one pair.
    """
    for name, value in (("valid_fraction", valid_fraction), ("test_fraction", test_fraction)):
        if not 0 <= value < 1:
            raise ValueError(f"{name} must be in [0, 1), got {value}")
    if valid_fraction + test_fraction >= 1:
        raise ValueError("valid_fraction + test_fraction must leave something to train on")
    first: dict[str, Pair] = {}
    for src, tgt in pairs:
        first.setdefault(src, (src, tgt))
    unique = list(first.values())
    n = len(unique)
    n_va = max(round(n * valid_fraction), int(valid_fraction > 0))
    n_te = max(round(n * test_fraction), int(test_fraction > 0))
    n_tr = n - n_va - n_te
    if n_tr < 1:
        raise ValueError(f"only {n} distinct source sentence(s): too few to split into train, valid and test")
    random.Random(seed).shuffle(unique)
    return Splits(unique[:n_tr], unique[n_tr : n_tr + n_va], unique[n_tr + n_va :], "custom")


# --- a user's file ------------------------------------------------------------------

_HEADERS = {("source", "target"), ("src", "tgt"), ("input", "output")}


def load_pairs(
    path_or_bytes: str | os.PathLike | bytes,
    *,
    name: str | None = None,
    max_bytes: int = 50_000_000,
    min_pairs: int = 10,
) -> list[Pair]:
    """Read (source, target) pairs from a TSV or CSV file, a path or an upload's bytes.

    The delimiter is a tab for a ``.tsv`` name, CSV (the csv module, quotes allowed)
    for a ``.csv`` name, and otherwise a tab if the text has any, else CSV. ``name`` is
    the upload's file name, used for that and in messages. Blank lines are skipped,
    cells are stripped, and a first line "source/target" (or src/tgt, input/output)
    is taken as a header. Any problem raises ``DataError`` naming the line.
    """
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        data = bytes(path_or_bytes)
    else:
        path = Path(path_or_bytes)
        name = name or path.name
        try:
            with path.open("rb") as f:
                data = f.read(max_bytes + 1)
        except OSError as err:
            raise DataError(f"cannot read {name}: {err.strerror or err}") from None
    where = f"{name}: " if name else ""
    if len(data) > max_bytes:
        raise DataError(f"{where}the file is larger than the limit of {max_bytes / 1e6:g} MB")
    bom = len(b"\xef\xbb\xbf") if data.startswith(b"\xef\xbb\xbf") else 0
    if not data[bom:].strip():
        raise DataError(f"{where}the file is empty")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise DataError(f"{where}the file is UTF-16 text; save it as UTF-8")
    if b"\0" in data:
        at = data.index(b"\0")
        raise DataError(
            f"{where}this looks like a binary file, not text: a NUL byte on line "
            f"{_line_of(data, at)} (byte offset {at})"
        )
    try:
        text = data[bom:].decode("utf-8")
    except UnicodeDecodeError as err:
        at = bom + err.start
        raise DataError(
            f"{where}not UTF-8 text: byte 0x{data[at]:02x} on line {_line_of(data, at)} "
            f"(byte offset {at}) is not valid UTF-8; save the file as UTF-8"
        ) from None
    suffix = Path(name).suffix.lower() if name else ""
    use_tab = suffix == ".tsv" or (suffix != ".csv" and "\t" in text)
    pairs = []
    for line_no, cells in _tsv_rows(text) if use_tab else _csv_rows(text, where):
        cells = [c.strip() for c in cells]
        if not any(cells):
            continue
        if not pairs and tuple(c.lower() for c in cells) in _HEADERS:
            continue
        kind = "tab-separated" if use_tab else "comma-separated"
        if len(cells) != 2:
            raise DataError(f"{where}line {line_no}: expected 2 {kind} columns (source, target), found {len(cells)}")
        for side, cell in zip(("source", "target"), cells, strict=True):
            if not cell:
                raise DataError(f"{where}line {line_no}: the {side} is empty")
        pairs.append((cells[0], cells[1]))
    if len(pairs) < min_pairs:
        raise DataError(f"{where}found {len(pairs)} pair(s), need at least {min_pairs} to train, validate and test")
    return pairs


def _line_of(data: bytes, offset: int) -> int:
    """The 1-based line number of a byte offset."""
    return data.count(b"\n", 0, offset) + 1


def _tsv_rows(text: str) -> Iterator[tuple[int, list[str]]]:
    for line_no, line in enumerate(text.split("\n"), start=1):
        yield line_no, line.rstrip("\r").split("\t")


def _csv_rows(text: str, where: str) -> Iterator[tuple[int, list[str]]]:
    reader = csv.reader(io.StringIO(text, newline=""))
    start = 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            raise DataError(f"{where}line {start}: cannot read the CSV: {err}") from None
        yield start, row  # a quoted cell may span lines: report where its record starts
        start = reader.line_num + 1
