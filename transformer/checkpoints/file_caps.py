"""Size caps on the small files a model folder holds, checked before a file is read or parsed.

A model folder may come from a visitor (an uploaded zip): a 280 MB ``config.json`` or a ``vocab.json`` of
10^7 entries would be parsed whole, holding the interpreter lock for tens of seconds and gigabytes, before
anything compares it with the model. So every such file is read through ``read_capped``: its size from
``stat`` first, a ``FileTooLargeError`` naming the file and the cap when it is larger, and never more than
the cap read even if the file grows meanwhile. The caps leave room for the files of real models many
times over: a config is a few KB, a vocabulary of 58,101 pieces (opus-mt-en-de's size) about 1 MB of JSON.

A JSON file is parsed through ``read_capped_json``, so that whatever the parser can raise on hostile text (a
RecursionError for arrays nested 10^5 deep, a UnicodeDecodeError, a JSONDecodeError) is one ``JSONFileError``
naming the file, and never quotes its bytes; with ``max_containers`` its arrays and objects are counted on the
bytes first (every ``[`` and ``{``, those inside strings too: an upper bound), since each becomes a Python object
the garbage collector then walks.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

MAX_CONFIG_BYTES = 2**20  # config.json, generation_config.json, tokenizer_config.json, a safetensors index
MAX_VOCAB_BYTES = 16 * 2**20  # vocab.json / target_vocab.json (~20 bytes a piece), chars.json
MAX_SPM_BYTES = 16 * 2**20  # a SentencePiece model: source.spm, target.spm, src.model, tgt.model
MAX_TOKENIZER_JSON_BYTES = 64 * 2**20  # tokenizer.json: NLLB's and mBART-50's (256 k pieces) are about 17-32 MB
# Arrays and objects in a config.json, generation_config.json or a safetensors index: a real one has tens (a
# bad_words_ids list of 1,024 sequences, the most generation.py reads, a thousand). Counted on the bytes before
# parsing: 160 k small lists (1 MB) took 1.5 s to parse beside torch, most of it the garbage collector's passes
# over the new lists.
MAX_CONFIG_CONTAINERS = 10_000


class FileTooLargeError(ValueError):
    """A file larger than its cap; it was not read. The message names the file, its size and the cap."""


class JSONFileError(ValueError):
    """A file that is not UTF-8 JSON (or nests deeper than the parser goes); the message names the file only."""


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


def parse_json(data: bytes | str, name: str, *, max_containers: int | None = None) -> Any:
    """The JSON value of ``data`` (the text of the file ``name``); ``JSONFileError`` naming ``name`` and where the
    text breaks, never its bytes. Python's parser recurses once per level of nesting: 10^5 nested arrays raise
    RecursionError, caught here (it leaves nothing behind: the parser unwinds). ``max_containers``: refuse more
    ``[`` and ``{`` than that before parsing."""
    if max_containers is not None:
        found = data.count(b"[") + data.count(b"{") if isinstance(data, bytes) else data.count("[") + data.count("{")
        if found > max_containers:
            raise JSONFileError(f"{name} holds {found:,} JSON arrays and objects; at most {max_containers:,} are read")
    try:
        return json.loads(data.decode("utf-8") if isinstance(data, bytes) else data)
    except UnicodeDecodeError as error:  # its message quotes the byte: only the position is said
        raise JSONFileError(f"{name} is not UTF-8 text (at byte {error.start})") from None
    except json.JSONDecodeError as error:  # the message says what was expected and where, never the text
        raise JSONFileError(f"{name} is not valid JSON ({error.msg} at line {error.lineno}, column {error.colno})"
                            ) from None
    except RecursionError:
        raise JSONFileError(f"{name} is not usable JSON: it nests deeper than the parser goes") from None
    except ValueError:  # an integer of more than 4,300 digits
        raise JSONFileError(f"{name} is not usable JSON: it holds a number too long to read") from None


def read_capped_json(path: str | os.PathLike, cap: int, *, max_containers: int | None = None) -> Any:
    """``read_capped`` parsed as JSON (``parse_json``, with ``max_containers``): FileTooLargeError or JSONFileError
    (both ValueErrors) naming the file, or an OSError when it cannot be read."""
    return parse_json(read_capped(path, cap), Path(path).name, max_containers=max_containers)


def read_config_json(path: str | os.PathLike) -> Any:
    """A config.json, generation_config.json or safetensors index: ``read_capped_json`` with ``MAX_CONFIG_BYTES``
    and ``MAX_CONFIG_CONTAINERS``."""
    return read_capped_json(path, MAX_CONFIG_BYTES, max_containers=MAX_CONFIG_CONTAINERS)


def read_json_object(path: str | os.PathLike, cap: int = MAX_CONFIG_BYTES, *, max_containers: int | None = None
                     ) -> dict[str, Any]:
    """The JSON object of ``path`` ({} when there is no such file): ``read_capped_json`` under ``cap``, and a
    ``JSONFileError`` naming the file (never the path it resolves to) when it cannot be read or holds another
    value; FileTooLargeError and JSONFileError as ``read_capped_json``. Every small JSON file of a model folder
    that may be absent (generation_config.json, tokenizer_config.json) is read through it."""
    path = Path(path)
    if not path.is_file():
        return {}
    try:
        document = read_capped_json(path, cap, max_containers=max_containers)
    except OSError as error:  # its strerror only: str(error) names the path the file resolved to
        raise JSONFileError(f"{path.name}: cannot be read ({error.strerror})") from None
    if not isinstance(document, dict):
        raise JSONFileError(f"{path.name}: not a JSON object")
    return document
