"""Fetch a model folder of a supported family (Marian, T5, BART, mBART-50, NLLB; GPT-2, Llama, Mistral, Qwen2/3,
Gemma-2/3) from the Hugging Face Hub into ``pretrained/``, whole or not at all.

    python -m transformer.hub download HuggingFaceTB/SmolLM2-135M
    python -m transformer.hub download Qwen/Qwen3-0.6B
    python -m transformer.hub download google/gemma-3-270m      # gated: accept its licence, `hf auth login` first


The files are downloaded with ``huggingface_hub.snapshot_download`` (an optional dependency, imported only
here) into a hidden staging folder next to the destination, checked (a ``model_type`` of ``families.supported()``,
the files that family needs, a tokenizer the family reads), and only then renamed into place, so the app never
lists a half-written model: a failed or interrupted download leaves nothing behind, and an existing folder is kept
unless ``force``. Only the files ``folder.DOWNLOAD_PATTERNS`` names are fetched (no TensorFlow/Flax weights), and
``pytorch_model.bin`` only when the repository has no safetensors weights (``BIN_PATTERNS``, a second request), so
a repository holding both (2.4 GB each for NLLB-600M) is not fetched twice over.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from .families import family_of, supported, tokenizer_layout
from .folder import (
    BIN_PATTERNS,
    DOWNLOAD_PATTERNS,
    FAST_TOKENIZER_FILE,
    TOKENIZER_FILES,
    missing_files,
    model_type,
    read_folder,
    weights_files,
)

DEFAULT_OUT = Path(__file__).resolve().parents[2] / "pretrained"  # the project's pretrained/ folder
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
_REPO_ID = re.compile(rf"{_NAME}/{_NAME}")
# Where an existing folder waits, in the staging folder, while --force replaces it (no repository name starts with ".").
PREVIOUS = ".previous"
_REVISION = re.compile(r"[A-Za-z0-9._/-]{1,200}")


class DownloadError(RuntimeError):
    """A download that could not be done; the message says why and how to get the folder another way."""


def check_repo_id(repo_id: str) -> str:
    """``repo_id`` if it is a Hub model id "owner/name" of safe characters; DownloadError otherwise."""
    if not isinstance(repo_id, str) or not _REPO_ID.fullmatch(repo_id) or ".." in repo_id or "--" in repo_id:
        raise DownloadError(f"{repo_id!r} is not a Hugging Face model id: expected owner/name of letters, digits, "
                            "'-', '_' and '.', e.g. Helsinki-NLP/opus-mt-en-de")
    return repo_id


def download(repo_id: str, out: str | Path | None = None, revision: str | None = None, force: bool = False) -> Path:
    """Download the model ``repo_id`` (a supported family) into ``<out>/<name>`` (out defaults to the project's
    pretrained/) and return that folder. DownloadError, with nothing left behind, when the id is invalid, the folder
    exists (unless ``force``, which replaces it), huggingface_hub is missing, the download fails, or what
    arrived is not a complete folder of a supported family."""
    check_repo_id(repo_id)
    if revision is not None and (not _REVISION.fullmatch(revision) or ".." in revision):
        raise DownloadError(f"{revision!r} is not a revision: expected a branch, tag or commit hash")
    out = DEFAULT_OUT if out is None else Path(out)
    name = repo_id.split("/")[1]
    destination = out / name
    if (destination.exists() or destination.is_symlink()) and not force:
        raise DownloadError(f"{destination} already exists; pass --force (force=True) to replace it")
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise DownloadError(f"huggingface_hub is not installed, so {repo_id} cannot be downloaded: "
                            f"`pip install huggingface_hub` and run this again, or {_other_ways(repo_id)}") from None

    made_out = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    # The staging folder holds the model one level down, so that nothing directly under out/ shows a
    # config.json (the app lists those folders) until the final rename.
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.download-", dir=out))
    try:
        fetched = staging / name
        try:
            snapshot_download(repo_id, revision=revision, local_dir=fetched, allow_patterns=DOWNLOAD_PATTERNS)
            if not _weights_arrived(fetched):  # an older repository: its weights are pytorch_model.bin alone
                snapshot_download(repo_id, revision=revision, local_dir=fetched, allow_patterns=BIN_PATTERNS)
        except Exception as error:  # the Hub client's errors differ by version: HTTP, connection, not found, ...
            where = f"{repo_id}" if revision is None else f"{repo_id} at revision {revision}"
            raise DownloadError(f"Downloading {where} from the Hugging Face Hub failed ({_summary(error)}). "
                                f"{_gated_hint(error)}Check the model id and your connection, or "
                                f"{_other_ways(repo_id)}") from None
        shutil.rmtree(fetched / ".cache", ignore_errors=True)  # huggingface_hub's download bookkeeping
        _check_folder(fetched, repo_id)
        _move_into_place(fetched, destination)
    finally:
        if destination.exists() or not (staging / PREVIOUS).exists():  # else the old folder could not be put back
            shutil.rmtree(staging, ignore_errors=True)
        if made_out and not any(out.iterdir()):
            out.rmdir()
    return destination


def _weights_arrived(folder: Path) -> bool:
    try:
        return bool(weights_files(folder))
    except ValueError:  # a broken index: _check_folder names it
        return True


def _check_folder(folder: Path, repo_id: str) -> None:
    kind = model_type(folder)
    if kind is None:
        raise DownloadError(f"{repo_id}'s config.json is not a Hugging Face model config with a model_type")
    try:
        family = family_of(kind)
    except ValueError as error:
        raise DownloadError(f"{repo_id}: {error}") from None
    try:
        missing = missing_files(folder, family)
    except ValueError as error:  # a broken or oversized index
        raise DownloadError(f"{repo_id}: {error}") from None
    if missing:
        raise DownloadError(f"{repo_id} is not a complete {family.model_type} folder: it lacks {', '.join(missing)}")
    try:
        tokenizer_layout(family, read_folder(folder))
    except ValueError as error:
        raise DownloadError(f"{repo_id}: {error}") from None


def _move_into_place(fetched: Path, destination: Path) -> None:
    """Rename ``fetched`` to ``destination``. An existing destination is first renamed aside (so the new
    folder replaces it whole), then removed; if the final rename fails it is put back."""
    if not (destination.exists() or destination.is_symlink()):
        os.replace(fetched, destination)
        return
    aside = fetched.parent / PREVIOUS
    os.replace(destination, aside)
    try:
        os.replace(fetched, destination)
    except BaseException:  # an interrupt too: the old folder must not be left in the staging folder
        try:
            os.replace(aside, destination)
        except OSError as error:
            raise DownloadError(f"could not put {destination} back ({error}); it is at {aside}") from None
        raise
    if aside.is_dir() and not aside.is_symlink():
        shutil.rmtree(aside, ignore_errors=True)
    else:
        aside.unlink(missing_ok=True)


def _other_ways(repo_id: str) -> str:
    """The end of a failure's paragraph: how to get the folder without this command."""
    return (f"get the folder another way: `git clone https://huggingface.co/{repo_id}` (with git-lfs, for the "
            f"weights), or copy config.json, model.safetensors (or pytorch_model.bin) and the tokenizer's files "
            f"({FAST_TOKENIZER_FILE}; a Marian model's {', '.join(TOKENIZER_FILES)}), with tokenizer_config.json and "
            f"generation_config.json where the model has them, from https://huggingface.co/{repo_id}/tree/main into a "
            f"folder; then point the app (its models folder) or `load_pretrained` at that folder. Families read: "
            f"{', '.join(supported())}.")


def _gated_hint(error: Exception) -> str:
    """What to do when the repository is gated (Llama, Gemma: a licence to accept on the model's page, then a
    token: ``hf auth login`` or the HF_TOKEN variable), where the error says so; else nothing."""
    text = f"{type(error).__name__} {error}".lower()
    if any(word in text for word in ("gated", "401", "403", "unauthorized", "forbidden")):
        return ("The repository is gated or needs a login: accept its licence on its page on huggingface.co, then "
                "run `hf auth login` (or set HF_TOKEN) and try again. ")
    return ""


def _summary(error: Exception) -> str:
    """The error's type and first line, short enough for one paragraph."""
    lines = str(error).strip().splitlines()
    first = lines[0].strip() if lines else ""
    if len(first) > 300:
        first = first[:297] + "..."
    return f"{type(error).__name__}: {first}" if first else type(error).__name__
