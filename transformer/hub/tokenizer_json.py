"""A ``tokenizer.json`` from a model folder, read so that no file can stall, bloat or crash the process.

``tokenizer.json`` is the serialised pipeline of the ``tokenizers`` library; its Rust code parses it
(``Tokenizer.from_str``) holding the interpreter lock, so every other thread of the app waits. The file is capped
at ``MAX_TOKENIZER_JSON_BYTES`` (64 MB, room for the real 256 k-piece files), but within that cap a file may hold
far more than its model can use, and it may carry settings that are obeyed at every encode. Measured before these
checks (issue 43):

- a Unigram model of 3.9 M pieces (61 MB) stalled every thread for 9.3 s and kept 3.1 GB; 10^6 BPE merges, 4.9 s
  and 1.37 GB; 5 x 10^5 added tokens, 3.9 s (and language menus of 500 k entries);
- ``"padding": {"strategy": {"Fixed": 10^8}}`` padded the first encode to 10^8 ids (the process aborted at
  4.7 GB); a truncation ``stride >= max_length`` made encode panic in Rust: ``pyo3``'s ``PanicException`` is a
  ``BaseException``, which passes ``except Exception`` and ended the app's script thread.

So, for any family (nothing here names one):

1. **Entries are counted before anything is parsed.** A model of ``V`` ids (its config's vocabulary) needs at most
   ``PIECES_PER_ID * V`` pieces (``model.vocab``), ``MERGES_PER_ID * V`` merges (``model.merges``) and
   ``max(MIN_ADDED_TOKENS, V // IDS_PER_ADDED_TOKEN)`` added tokens (``added_tokens``). Each of these entries is
   at least one JSON string (a merge at most two, an added token eight with its keys), so while the file is read,
   chunk by chunk, its quotes are counted (``bytes.count``, no parsing) and reading stops at the first chunk that
   takes the count past what those caps allow: a 61 MB file for a small model is refused after its first MB, in
   milliseconds. A file within that bound is small enough to parse with ``json``, and each field is then counted
   exactly and named when it is over its cap. Counting on the parsed dict alone would not do: parsing 61 MB
   builds millions of Python objects (seconds, gigabytes) before any count.
2. **The pipeline's padding and truncation are ours.** The package decides them itself (it encodes one text at a
   time, without either), as ``transformers`` does on every call that asks for neither: ``padding`` and
   ``truncation`` are removed from the document before Rust parses it (a bad value may fail in the parse) and the
   backend is built with ``no_padding()`` / ``no_truncation()``. BPE ``dropout`` is dropped too, as ``transformers``'
   classes rebuild BPE with ``dropout=None``: the same text always gives the same ids.
3. **A panic of the Rust side is a ValueError.** ``rust_errors`` converts ``PanicException`` (and the library's
   own exceptions) where a file-derived pipeline is built or run.

The memory check of ``hub.memory`` counts the tokenizer from its files' sizes (``TOKENIZER_BYTES_PER_FILE_BYTE``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer as Backend

from ..checkpoints.file_caps import MAX_TOKENIZER_JSON_BYTES, FileTooLargeError, check_size, parse_json

PIECES_PER_ID = 2  # model.vocab: every piece is an id of the embedding (checked exactly once built); 2x margin
MERGES_PER_ID = 8  # model.merges: a SentencePiece BPE converted to tokenizer.json lists ~2 per piece (Llama 2)
IDS_PER_ADDED_TOKEN = 4  # added_tokens: at most a quarter of the ids (NLLB: 207 of 256 k, T5: 103 of 32 k) ...
MIN_ADDED_TOKENS = 1024  # ... or this many for a small model (ByT5: 128 of its 384 ids)
STRINGS_PER_MERGE = 2  # ["a", "b"]; the older "a b" is one
STRINGS_PER_ADDED_TOKEN = 8  # {"id", "content": "...", "single_word", "lstrip", "rstrip", "normalized", "special"}
MAX_PIECE_CHARS = 1024  # a piece, merge part or added token: real ones are a few dozen (byte-level: ~3 a character)
OTHER_STRINGS = 4096  # the keys and values of the rest of the pipeline (normaliser, post-processor, ...)
READ_CHUNK = 2**20  # bytes read (and their quotes counted) at a time
# What a tokenizer takes while it is read and then kept, per byte of its files: the ceiling of what was measured
# (a Unigram tokenizer.json, 61 MB -> 3.1 GB; 19 MB of pieces peaked at 36x, 16 MB of merges 28x, 13 MB of added
# tokens 9x).
TOKENIZER_BYTES_PER_FILE_BYTE = 50


def entry_caps(vocab_size: int) -> dict[str, int]:
    """The most entries each field of a tokenizer.json may hold for a model of ``vocab_size`` ids."""
    return {"model.vocab": PIECES_PER_ID * vocab_size, "model.merges": MERGES_PER_ID * vocab_size,
            "added_tokens": max(MIN_ADDED_TOKENS, vocab_size // IDS_PER_ADDED_TOKEN)}


def string_cap(vocab_size: int) -> int:
    """The most JSON strings a tokenizer.json for a model of ``vocab_size`` ids may hold: its fields' caps, each
    entry as the strings it is written with, and the rest of the pipeline."""
    caps = entry_caps(vocab_size)
    return (caps["model.vocab"] + STRINGS_PER_MERGE * caps["model.merges"]
            + STRINGS_PER_ADDED_TOKEN * caps["added_tokens"] + OTHER_STRINGS)


def read_counted(path: Path, vocab_size: int | None) -> bytes | bytearray:
    """The bytes of ``path`` (at most ``MAX_TOKENIZER_JSON_BYTES``), its strings counted as it is read: a
    ValueError as soon as they pass ``string_cap(vocab_size)`` (no count when ``vocab_size`` is None). A string is
    counted as half its quotes, which an escaped quote only raises."""
    check_size(path, MAX_TOKENIZER_JSON_BYTES)
    limit = None if vocab_size is None else string_cap(vocab_size)
    data, quotes = bytearray(), 0
    with open(path, "rb") as file:
        while chunk := file.read(READ_CHUNK):
            quotes += chunk.count(b'"')
            if limit is not None and quotes // 2 > limit:
                caps = entry_caps(vocab_size)
                raise ValueError(f"holds more than {limit:,} strings, more than a tokenizer of a model of "
                                 f"{vocab_size:,} ids has (model.vocab: at most {caps['model.vocab']:,} pieces, "
                                 f"model.merges {caps['model.merges']:,}, added_tokens {caps['added_tokens']:,})")
            data += chunk
            if len(data) > MAX_TOKENIZER_JSON_BYTES:  # the file grew after its size was checked
                raise FileTooLargeError(f"{path.name} is more than {MAX_TOKENIZER_JSON_BYTES // 2**20} MB")
    return data


def _count(value: object) -> int:
    return len(value) if isinstance(value, list | dict) else 0


def _pieces(document: dict[str, Any]) -> Iterator[tuple[str, object]]:
    """(field, piece) for every piece of the model's vocabulary (a Unigram list of [piece, score], or a dict of
    piece -> id) and every added token's content."""
    model = document.get("model") if isinstance(document.get("model"), dict) else {}
    vocab = model.get("vocab")
    if isinstance(vocab, dict):
        yield from (("model.vocab", piece) for piece in vocab)
    elif isinstance(vocab, list):
        yield from (("model.vocab", entry[0]) for entry in vocab if isinstance(entry, list) and entry)
    added = document.get("added_tokens")
    if isinstance(added, list):
        yield from (("added_tokens", token.get("content")) for token in added if isinstance(token, dict))


def check_entries(document: dict[str, Any], vocab_size: int | None) -> None:
    """ValueError naming the field when ``document`` (a parsed tokenizer.json) holds more pieces, merges or added
    tokens than ``entry_caps(vocab_size)`` (not counted when ``vocab_size`` is None), or a piece longer than
    ``MAX_PIECE_CHARS``: the Rust side keeps Unigram pieces in a trie one node per character, so one piece of 300 k
    characters took 100 MB, made every encode of a long text take seconds, and crashed the process (its stack)
    when the trie was freed."""
    if vocab_size is not None:
        model = document.get("model") if isinstance(document.get("model"), dict) else {}
        found = {"model.vocab": _count(model.get("vocab")), "model.merges": _count(model.get("merges")),
                 "added_tokens": _count(document.get("added_tokens"))}
        for field, cap in entry_caps(vocab_size).items():
            if found[field] > cap:
                raise ValueError(f"{field} holds {found[field]:,} entries; a model of {vocab_size:,} ids "
                                 f"(config.json's vocabulary) has at most {cap:,}")
    for field, piece in _pieces(document):
        if isinstance(piece, str) and len(piece) > MAX_PIECE_CHARS:
            raise ValueError(f"{field} holds a piece of {len(piece):,} characters; a piece has at most "
                             f"{MAX_PIECE_CHARS:,}")


def read_tokenizer_json(path: str | Path, vocab_size: int | None = None) -> dict[str, Any]:
    """The JSON object of the tokenizer.json at ``path``, its entries capped for a model of ``vocab_size`` ids
    (counted before it is parsed, then per field: ``check_entries``); ValueError saying what is wrong."""
    path = Path(path)
    data = read_counted(path, vocab_size)
    document = parse_json(data, path.name)  # JSONFileError (a ValueError): not UTF-8 JSON, or nested too deep
    del data
    if not isinstance(document, dict):
        raise ValueError("not a JSON object")
    check_entries(document, vocab_size)
    return document


def _is_panic(error: BaseException) -> bool:
    """Whether ``error`` is ``pyo3``'s ``PanicException`` (a ``BaseException``; its module is not importable)."""
    return type(error).__name__ == "PanicException" and type(error).__module__ == "pyo3_runtime"


@contextmanager
def rust_errors(what: str, *, library_errors: bool = True) -> Iterator[None]:
    """Run a call of the ``tokenizers`` library on file-derived data: a Rust panic (and, with ``library_errors``,
    any other Exception than a ValueError) becomes a ValueError saying ``what`` failed. KeyboardInterrupt and the
    other BaseExceptions pass."""
    try:
        yield
    except ValueError:  # ours (a nested call's), or the library's: a message already
        raise
    except Exception as error:
        if not library_errors:
            raise
        raise ValueError(f"{what}: {error}") from None
    except BaseException as error:
        if not _is_panic(error):
            raise
        reason = (str(error).strip().splitlines() or ["a panic"])[0][:300]
        raise ValueError(f"{what}: the tokenizers library failed ({reason})") from None


def backend_from_document(document: dict[str, Any]) -> Backend:
    """The ``tokenizers`` pipeline of ``document`` without its padding, truncation and BPE dropout (removed before
    the Rust side parses it, and turned off on the result); ValueError when the library cannot build it."""
    model = dict(document.get("model") or {})
    if model.get("type") == "BPE":
        model["dropout"] = None
    text = json.dumps({**document, "model": model, "padding": None, "truncation": None})
    with rust_errors("not a valid tokenizer.json"):
        backend = Backend.from_str(text)
        backend.no_padding()
        backend.no_truncation()
    return backend


def tokenizer_file_bytes(paths: list[Path]) -> int:
    """What the tokenizer read from ``paths`` (those that exist) takes in memory, at most, by their sizes."""
    return TOKENIZER_BYTES_PER_FILE_BYTE * sum(path.stat().st_size for path in paths if path.is_file())
