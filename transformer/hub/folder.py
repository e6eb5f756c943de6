"""What a Hugging Face folder holds, and how to tell one from our own checkpoint folders.

A T5 / BART / mBART-50 / NLLB folder holds config.json, the weights, tokenizer.json and the optional files below.
A Marian folder, as ``MarianMTModel.save_pretrained`` and ``MarianTokenizer.save_pretrained`` write it::

    config.json                 {"model_type": "marian", "d_model": 512, ...}
    model.safetensors           the weights; or model.safetensors.index.json + shards; or pytorch_model.bin
    source.spm / target.spm     SentencePiece models of the source and target side
    vocab.json                  piece -> id (target_vocab.json too when the two sides have separate vocabularies)
    tokenizer_config.json       optional: separate_vocabs, source/target language, ...
    generation_config.json      optional: max_length, num_beams, bad_words_ids, ...
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..checkpoints.file_caps import (
    MAX_CONFIG_CONTAINERS,
    FileTooLargeError,
    JSONFileError,
    read_config_json,
    read_json_object,
)

if TYPE_CHECKING:
    from .family_config import Family

CONFIG_FILE = "config.json"
SAFETENSORS_FILE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
BIN_FILE = "pytorch_model.bin"
TOKENIZER_FILES = ("source.spm", "target.spm", "vocab.json")  # Marian's
FAST_TOKENIZER_FILE = "tokenizer.json"  # T5, BART, mBART-50, NLLB
TOKENIZER_CONFIG = "tokenizer_config.json"
GENERATION_CONFIG = "generation_config.json"
CHAT_TEMPLATE_FILE = "chat_template.jinja"  # an instruct model's chat template, where its folder keeps it apart
OPTIONAL_FILES = ("target_vocab.json", TOKENIZER_CONFIG, GENERATION_CONFIG, "special_tokens_map.json",
                  CHAT_TEMPLATE_FILE)
# What a download fetches (never TensorFlow/Flax weights, nor the README's images).
DOWNLOAD_PATTERNS = [CONFIG_FILE, SAFETENSORS_FILE, SAFETENSORS_INDEX, "model-*.safetensors",
                     *TOKENIZER_FILES, FAST_TOKENIZER_FILE, *OPTIONAL_FILES]
BIN_PATTERNS = [BIN_FILE]  # fetched only when the safetensors weights are not there


def model_type(folder: str | Path) -> str | None:
    """The ``model_type`` of a Hugging Face folder's config.json, or None when it is not such a folder
    (no config.json, unreadable JSON, one over ``MAX_CONFIG_BYTES``, or our own checkpoint format, whose config has
    a "model" object: its reader names the problem)."""
    path = Path(folder) / CONFIG_FILE
    try:
        document = read_config_json(path)
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict) or "model" in document:
        return None
    value = document.get("model_type")
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class FolderRecord:
    """A Hugging Face folder's small files, each read once under its cap (``read_folder``): what its family maps
    (config.json), what decoding and the tokenizer read of it, and which weight files hold its tensors."""

    path: Path
    config: dict[str, Any]  # config.json
    tokenizer_config: dict[str, Any]  # tokenizer_config.json ({} when absent)
    generation_config: dict[str, Any]  # generation_config.json ({} when absent)
    weight_files: tuple[Path, ...]  # ``weights_files``: the one safetensors file, the shards, or the .bin

    @property
    def model_type(self) -> str | None:
        value = self.config.get("model_type")
        return value if isinstance(value, str) else None


def read_folder(folder: str | Path) -> FolderRecord:
    """``folder``'s config.json, tokenizer_config.json, generation_config.json (each at most ``MAX_CONFIG_BYTES``,
    checked before it is read) and its weight files (the index read under its cap), read once for the whole load;
    a ValueError naming the file and the problem, never the path it resolves to."""
    folder = Path(folder)
    if not (folder / CONFIG_FILE).is_file():
        raise ValueError(f"missing {CONFIG_FILE}")
    return FolderRecord(folder, read_json_object(folder / CONFIG_FILE, max_containers=MAX_CONFIG_CONTAINERS),
                        read_json_object(folder / TOKENIZER_CONFIG),
                        read_json_object(folder / GENERATION_CONFIG, max_containers=MAX_CONFIG_CONTAINERS),
                        tuple(weights_files(folder)))


def is_hf_folder(folder: str | Path) -> bool:
    """Whether ``folder`` looks like a Hugging Face model folder (any model_type: the loader refuses the others)."""
    return model_type(folder) is not None


def weights_files(folder: str | Path) -> list[Path]:
    """The weight files to read, in the order they are preferred: one safetensors file, the shards an
    index names, else pytorch_model.bin. An empty list when there are none.

    ValueError naming the index and its cap when the index is over ``MAX_CONFIG_BYTES``, naming the index when it
    is not one, and naming the file when a weight file is a link out of the folder (``inside``).
    """
    folder = Path(folder)
    if (folder / SAFETENSORS_FILE).is_file():
        return [inside(folder, SAFETENSORS_FILE)]
    index = folder / SAFETENSORS_INDEX
    if index.is_file():
        try:
            weight_map = read_config_json(inside(folder, SAFETENSORS_INDEX))["weight_map"]
            shards = sorted(set(weight_map.values()))
        except FileTooLargeError as error:
            raise ValueError(f"{error} (the index of a sharded model's weights)") from None
        except JSONFileError as error:
            raise ValueError(f"{error} (the index of a sharded model's weights)") from None
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            raise ValueError(f"{index.name} in {folder} is not a valid safetensors index") from None
        for shard in shards:
            if not isinstance(shard, str) or "/" in shard or "\\" in shard or shard.startswith("."):
                raise ValueError(f"{index.name} names a shard outside the folder: {shard!r:.60}")
        return [inside(folder, shard) for shard in shards]
    if (folder / BIN_FILE).is_file():
        return [inside(folder, BIN_FILE)]
    return []


def inside(folder: Path, name: str) -> Path:
    """``folder / name``, after checking that it does not lead out of the folder: a link whose target lies elsewhere
    is refused before it is opened (ValueError naming the file, never its target), so a folder cannot make this
    package read, and quote, a file of the server's such as /etc/passwd. One layout of links is allowed: the
    Hugging Face cache's, whose ``snapshots/<revision>/`` files link to ``../../blobs/``."""
    path = folder / name
    if not path.is_symlink():
        return path
    root, target = folder.resolve(), path.resolve()
    cache_blobs = root.parent.parent / "blobs" if root.parent.name == "snapshots" else None
    if target.is_relative_to(root) or (cache_blobs is not None and target.is_relative_to(cache_blobs)):
        return path
    raise ValueError(f"{name} is a link to a file outside the model folder: it is not read")


def missing_files(folder: str | Path, family: Family, files: Sequence[Path] | None = None) -> list[str]:
    """The files a folder of ``family`` needs that ``folder`` lacks (an empty list when it is complete); a
    ValueError from ``weights_files`` when the weights' index or a weight file cannot be used. ``files``: its
    weight files where the caller has listed them (``FolderRecord.weight_files``)."""
    folder = Path(folder)
    missing = [name for name in (CONFIG_FILE, *family.tokenizer_files) if not (folder / name).is_file()]
    if files is None:
        files = weights_files(folder)  # its ValueError (an index over its cap or broken, a link out) is the answer
    if not files:
        missing.append(f"{SAFETENSORS_FILE} or {BIN_FILE}")
    else:
        missing += [path.name for path in files if not path.is_file()]
    return missing
