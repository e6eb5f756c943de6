"""Size caps on the small files a model folder holds, checked before a file is read or parsed.

A model folder may come from a visitor (an uploaded zip): a 280 MB ``config.json`` or a ``vocab.json`` of
10^7 entries would be parsed whole, holding the interpreter lock for tens of seconds and gigabytes, before
anything compares it with the model. So every such file is read through ``read_capped``: its size from
``stat`` first, a ``FileTooLargeError`` naming the file and the cap when it is larger, and never more than
the cap read even if the file grows meanwhile. The caps leave room for the files of real models many
times over: a config is a few KB, a vocabulary of 58,101 pieces (opus-mt-en-de's size) about 1 MB of JSON.
"""

from __future__ import annotations

import os
from pathlib import Path

MAX_CONFIG_BYTES = 2**20  # config.json, generation_config.json, tokenizer_config.json, a safetensors index
MAX_VOCAB_BYTES = 16 * 2**20  # vocab.json / target_vocab.json (~20 bytes a piece), chars.json
MAX_SPM_BYTES = 16 * 2**20  # a SentencePiece model: source.spm, target.spm, src.model, tgt.model
MAX_TOKENIZER_JSON_BYTES = 64 * 2**20  # tokenizer.json: NLLB's and mBART-50's (256 k pieces) are about 17-32 MB


class FileTooLargeError(ValueError):
    """A file larger than its cap; it was not read. The message names the file, its size and the cap."""


def _mb(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n / 2**10:.0f} KB"


def check_size(path: str | os.PathLike, cap: int) -> int:
    """The size of ``path`` in bytes; ``FileTooLargeError`` when it is over ``cap`` (OSError if it cannot be read)."""
    size = os.stat(path).st_size
    if size > cap:
        raise FileTooLargeError(f"{Path(path).name} is {_mb(size)}; the limit for this file is {_mb(cap)}")
    return size


def read_capped(path: str | os.PathLike, cap: int) -> bytes:
    """The bytes of ``path`` if it holds at most ``cap`` of them, else ``FileTooLargeError`` (checked from the
    file's size before reading, and again on what was read: at most cap + 1 bytes are ever read)."""
    check_size(path, cap)
    with open(path, "rb") as file:
        data = file.read(cap + 1)
    if len(data) > cap:
        raise FileTooLargeError(f"{Path(path).name} is more than {_mb(cap)}; the limit for this file is {_mb(cap)}")
    return data


def read_capped_text(path: str | os.PathLike, cap: int) -> str:
    """``read_capped`` decoded as UTF-8 (UnicodeDecodeError, a ValueError, when it is not)."""
    return read_capped(path, cap).decode("utf-8")
