"""A trained model as a folder of plain data: JSON, safetensors and tokenizer files, never pickles.

    folder/
      config.json              {"model": TransformerConfig.to_dict(), "meta": {task, train args, metrics, step, ...}}
      model.safetensors        the final weights (a tied matrix stored once)
      src.* / tgt.*            the two tokenizers (Tokenizer.save(folder, "src" / "tgt"))
      optimizer.safetensors    Adam's moments and step, to resume training (optional)
      train_log.jsonl          one JSON object per logged step
      snapshots/step_0000100.safetensors   weights at spaced steps, to watch attention form
                                           (float32, or float16/bfloat16 to save space)

Every write goes to a temporary name first and is moved into place with ``os.replace``, so a
crash mid-save leaves the previous checkpoint whole. Loading checks every tensor's name and
shape against the config, from the weights file's header before any model is built
(``weights_header.py``: no allocation from an edited or uploaded config.json; at most
``MAX_PARAMETERS`` parameters), and raises ``CheckpointError`` with a clear message otherwise.
Weights may be stored as float32, float16 or bfloat16 (``STORAGE_DTYPES``); they are always
loaded into the model's float32 parameters.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_safetensors_bytes
from safetensors.torch import save_file
from torch import Tensor

from ..checks import check_choice
from ..network.config import TransformerConfig
from ..network.layers import legacy_name
from ..network.model import Transformer
from ..text.tokenizers import Tokenizer, load_tokenizer
from .errors import CheckpointError
from .file_caps import FileTooLargeError, JSONFileError, parse_json, read_config_json
from .snapshots import SNAPSHOT_DIR, list_snapshots, prune_snapshots, thin_steps  # noqa: F401  (this module's API)
from .train_log import LOG_FILE, append_log, read_log  # noqa: F401  (part of this module's API)
from .weights_header import HeaderError, check_sizes, read_header

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"
# The weights of the save before the last, kept (as a hard link) while a save replaces the files one by one:
# a process killed between the new weights and the new config.json leaves them matching the old config.
PREVIOUS_WEIGHTS_FILE = ".previous.model.safetensors"
# How weights may be stored on disk (by name, as the CLI spells them); loading casts them to float32.
STORAGE_DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "float16": torch.float16,
                                          "bfloat16": torch.bfloat16}


@dataclass
class Checkpoint:
    """A loaded checkpoint: the model (eval mode, on the requested device) and what it needs."""

    folder: Path
    config: TransformerConfig
    model: Transformer
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    meta: dict[str, Any] = field(default_factory=dict)  # task, task options, train args, metrics, step
    step: int | None = None  # the snapshot's step, or None for the final weights


# --- saving ----------------------------------------------------------------------------


def save_checkpoint(
    folder: str | os.PathLike,
    model: Transformer,
    src_tokenizer: Tokenizer,
    tgt_tokenizer: Tokenizer,
    meta: dict[str, Any],
    *,
    optimizer: torch.optim.Optimizer | None = None,
) -> Path:
    """Write config, weights, tokenizers (and optimizer state) into ``folder``; returns the folder.

    All files are first written into a temporary folder inside ``folder``, then moved into
    place one by one with ``os.replace`` (config.json last). An exception while writing
    leaves the previous checkpoint as it was and removes the temporary files.
    Snapshots and the training log already in the folder are kept.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_id = uuid.uuid4().hex  # pairs the weights with their config.json
    with _staging(folder) as tmp:
        src_tokenizer.save(tmp, "src")
        tgt_tokenizer.save(tmp, "tgt")
        save_file(weights_of(model), tmp / WEIGHTS_FILE, metadata={"save_id": save_id})
        if optimizer is not None:
            tensors, state_meta = _flatten_optimizer(optimizer)
            save_file(tensors, tmp / OPTIMIZER_FILE, metadata={"state": json.dumps(state_meta)})
        document = {"model": model.config.to_dict(), "meta": {**meta, "save_id": save_id}}
        (tmp / CONFIG_FILE).write_text(json.dumps(document, indent=2, default=_json_default), encoding="utf-8")
        written = {path.name for path in tmp.iterdir()}
        _keep_previous_weights(folder, tmp)
        for path in sorted(tmp.iterdir(), key=lambda p: p.name == CONFIG_FILE):
            _publish(path, folder / path.name)
    # Files of an earlier save that this one did not rewrite: another tokenizer kind's
    # files (load_tokenizer refuses two), or optimizer moments of other weights.
    for path in folder.iterdir():
        stale = path.name.startswith(("src.", "tgt.")) or path.name == OPTIMIZER_FILE
        if stale and path.is_file() and path.name not in written:
            path.unlink()
    return folder


def _keep_previous_weights(folder: Path, tmp: Path) -> None:
    """Before the new files replace the old: the current weights also under PREVIOUS_WEIGHTS_FILE (atomically)."""
    current = folder / WEIGHTS_FILE
    if not current.exists():
        return
    link = tmp / "previous-weights"
    try:
        os.link(current, link)  # a second name for the same file: instant, no copy
    except OSError:
        shutil.copy2(current, link)
    os.replace(link, folder / PREVIOUS_WEIGHTS_FILE)


def save_snapshot(folder: str | os.PathLike, model: Transformer, step: int, *, dtype: str = "float32") -> Path:
    """Write the weights at ``step`` to ``folder/snapshots/step_0000100.safetensors`` (atomically).

    ``dtype`` "float16" (or "bfloat16") halves the file; ``load_checkpoint(folder, step=...)``
    casts the weights back to float32. Attention weights computed from a float16 snapshot
    differ from float32 ones by about 1e-3 (0.0015 at most in pretrained/), invisible in a heatmap.
    """
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    check_choice("snapshot dtype", dtype, STORAGE_DTYPES)
    path = Path(folder) / SNAPSHOT_DIR / f"step_{step:07d}.safetensors"
    path.parent.mkdir(parents=True, exist_ok=True)
    weights = {name: tensor.to(STORAGE_DTYPES[dtype]) for name, tensor in weights_of(model).items()}
    with _staging(path.parent) as tmp:
        save_file(weights, tmp / path.name, metadata={"step": str(step), "dtype": dtype})
        _publish(tmp / path.name, path)
    return path


def weights_of(model: Transformer) -> dict[str, Tensor]:
    """The state dict with each shared (tied) tensor kept once, under its first name.

    safetensors refuses tensors that share memory; the tying itself is rebuilt from
    ``config.tying`` when the model is constructed again.
    """
    seen: set[tuple[int, int, tuple[int, ...]]] = set()
    weights = {}
    for name, tensor in model.state_dict().items():
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape))
        if key in seen:
            continue
        seen.add(key)
        weights[name] = tensor.detach().to("cpu").contiguous()
    return weights


# --- loading ---------------------------------------------------------------------------


def load_checkpoint(folder: str | os.PathLike, *, step: int | None = None, device: str = "cpu") -> Checkpoint:
    """Rebuild the model and tokenizers saved in ``folder``; the model is in eval mode.

    ``step=None`` loads the final weights, otherwise the snapshot of that step
    (see ``list_snapshots``). Raises ``CheckpointError`` for anything missing or damaged.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise CheckpointError(f"no checkpoint folder at {folder}")
    config, meta = read_config(folder)
    path = folder / WEIGHTS_FILE if step is None else folder / SNAPSHOT_DIR / f"step_{step:07d}.safetensors"
    if step is not None and not path.exists():
        raise CheckpointError(f"{folder}: no snapshot at step {step}; available: {list_snapshots(folder)}")
    try:  # sizes from the header against the config, before anything is built or read (weights_header.py)
        check_sizes(config, {legacy_name(k): v for k, v in read_header(path).items()}, weights_file=path.name)
    except HeaderError as error:
        raise CheckpointError(f"{folder}: {error}") from None
    if step is None:
        tensors, metadata = _read_safetensors(path)
        saved_id = meta.get("save_id")
        if saved_id is not None and metadata.get("save_id") not in (None, saved_id):
            # A save was interrupted after the new weights and before the new config: the previous
            # weights, kept for exactly this, still match the config.
            previous = folder / PREVIOUS_WEIGHTS_FILE
            tensors, metadata = _read_safetensors(previous) if previous.exists() else ({}, {})
            if metadata.get("save_id") != saved_id:
                raise CheckpointError(
                    f"{folder}: {WEIGHTS_FILE} and {CONFIG_FILE} come from different saves (an interrupted save?)"
                )
    else:
        tensors, _ = _read_safetensors(path)
    for name, tensor in tensors.items():  # NaN or inf weights give empty outputs: said here, by name
        if tensor.dtype.is_floating_point and non_finite(tensor):
            raise CheckpointError(f"{folder}: {path.name}: the tensor {name} holds NaN or infinite values")
    model = Transformer(config)
    load_weights(model, tensors, where=str(folder))
    model.to(device).eval()
    try:
        src_tokenizer = load_tokenizer(folder, "src", config.src_vocab_size)  # pieces counted before parsing
        tgt_tokenizer = load_tokenizer(folder, "tgt", config.tgt_vocab_size)
    except Exception as error:  # missing or damaged tokenizer files, whatever the tokenizer raised
        raise CheckpointError(f"{folder}: cannot load the tokenizers: {error}") from error
    for side, tokenizer, size in (("src", src_tokenizer, config.src_vocab_size),
                                  ("tgt", tgt_tokenizer, config.tgt_vocab_size)):
        if tokenizer.vocab_size != size:
            raise CheckpointError(
                f"{folder}: the {side} tokenizer has {tokenizer.vocab_size} tokens but the model expects {size}"
            )
    return Checkpoint(folder, config, model, src_tokenizer, tgt_tokenizer, meta, step)


def read_config(folder: str | os.PathLike) -> tuple[TransformerConfig, dict[str, Any]]:
    """The model config and meta from ``folder/config.json`` (at most ``MAX_CONFIG_BYTES``, checked before it is
    read), without loading any weights."""
    path = Path(folder) / CONFIG_FILE
    try:
        document = read_config_json(path)
    except FileNotFoundError:
        raise CheckpointError(f"{path.parent}: missing {CONFIG_FILE}; is this a checkpoint folder?") from None
    except FileTooLargeError as error:
        raise CheckpointError(f"{path.parent}: {error}") from None
    except OSError as error:  # its strerror only: str(error) names the path the file resolved to
        raise CheckpointError(f"{path.parent}: cannot read {CONFIG_FILE} ({error.strerror})") from None
    except ValueError as error:  # JSONFileError: the file and where its text breaks, never its bytes
        raise CheckpointError(f"{path.parent}: not readable JSON: {error}") from None
    if not isinstance(document, dict) or not isinstance(document.get("model"), dict):
        raise CheckpointError(f"{path}: expected an object with a 'model' config")
    meta = document.get("meta", {})
    if not isinstance(meta, dict):
        raise CheckpointError(f"{path}: 'meta' must be an object")
    try:
        config = TransformerConfig.from_dict(document["model"])
    except ValueError as error:
        raise CheckpointError(f"{path}: invalid model config: {error}") from None
    return config, meta


def load_weights(model: Transformer, tensors: dict[str, Tensor], *, where: str = "checkpoint",
                 take: bool = False) -> None:
    """Copy ``tensors`` into ``model`` after checking names, shapes and dtypes.

    Tensors stored as float16 or bfloat16 (small snapshots) are cast to the model's dtype.
    ``take=True`` (a large model read from files): each tensor is removed from ``tensors`` and becomes the
    parameter's memory when it is a contiguous CPU tensor of the model's dtype that owns its whole storage and no
    other parameter has taken it (otherwise the parameter gets a converted copy), so the weights are never held
    twice; the caller must hold no other reference to them, and ``model`` may be empty (``to_empty``).
    """
    expected = weights_of(model)
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    problems = []
    if missing:
        problems.append(f"missing tensors: {', '.join(missing)}")
    if unexpected:
        problems.append(f"unexpected tensors: {', '.join(unexpected)}")
    for name in sorted(set(expected) & set(tensors)):
        if tensors[name].shape != expected[name].shape:
            problems.append(
                f"{name} has shape {tuple(tensors[name].shape)} but the config needs {tuple(expected[name].shape)}"
            )
        elif tensors[name].dtype not in (*STORAGE_DTYPES.values(), torch.float64):
            problems.append(f"{name} has dtype {tensors[name].dtype}, expected float32, float16 or bfloat16")
    if problems:
        raise CheckpointError(f"{where}: the weights do not match the config: " + "; ".join(problems))
    with torch.no_grad():
        if take:
            _take(model, tensors)
            return
        own = model.state_dict()
        for name, tensor in tensors.items():
            own[name].copy_(tensor)  # a tied matrix is one tensor, so every alias sees the copy


def _take(model: Transformer, tensors: dict[str, Tensor]) -> None:
    """``load_weights(take=True)``: each tensor becomes its parameter's (or buffer's) ``.data``, one at a time."""
    own = model.state_dict(keep_vars=True)  # the Parameter objects themselves: a tied one serves all its names
    taken: set[int] = set()
    for name in list(tensors):
        tensor, target = tensors.pop(name), own[name]
        storage = tensor.untyped_storage()
        if (tensor.dtype != target.dtype or tensor.device != target.device or not tensor.is_contiguous()
                or storage.nbytes() != tensor.nbytes or storage.data_ptr() in taken):
            tensor = tensor.to(device=target.device, dtype=target.dtype, copy=True).contiguous()
        taken.add(tensor.untyped_storage().data_ptr())
        target.data = tensor
        del tensor


FINITE_CHUNK = 1 << 22  # elements per isfinite call: its boolean temporary is 4 MB, whatever the tensor's size


def non_finite(tensor: Tensor) -> bool:
    """Whether ``tensor`` (floating point) holds a NaN or an infinity, ``FINITE_CHUNK`` elements at a time. A NaN
    or an infinity makes a sum NaN or infinite, so a chunk whose sum is finite is finite: one pass at the speed of
    reading memory, without a temporary (a sum in float32 of float16 weights would copy them); only a chunk whose
    sum is not (a NaN, or finite values summing past the dtype's range) is looked at element by element."""
    flat = tensor.reshape(-1)
    return any(not bool(torch.isfinite(part.sum())) and not bool(torch.isfinite(part).all())
               for part in flat.split(FINITE_CHUNK))


def load_optimizer_state(folder: str | os.PathLike, optimizer: torch.optim.Optimizer) -> bool:
    """Restore Adam's moments saved by ``save_checkpoint(..., optimizer=...)``; False if none saved."""
    path = Path(folder) / OPTIMIZER_FILE
    if not path.exists():
        return False
    tensors, metadata = _read_safetensors(path)
    try:
        state_meta = json.loads(metadata["state"])
        state: dict[int, dict[str, Any]] = {int(k): dict(v) for k, v in state_meta["scalars"].items()}
        for name, tensor in tensors.items():
            _, index, key = name.split(".", 2)
            state.setdefault(int(index), {})[key] = tensor
        groups = [{k: tuple(v) if k == "betas" else v for k, v in g.items()} for g in state_meta["param_groups"]]
        optimizer.load_state_dict({"state": state, "param_groups": groups})
    except (KeyError, ValueError, TypeError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{path}: optimizer state does not fit this model: {error}") from None
    return True


# --- helpers ---------------------------------------------------------------------------


@contextmanager
def _staging(folder: Path) -> Iterator[Path]:
    """A fresh temporary folder inside ``folder`` (same filesystem, so os.replace is atomic), always removed."""
    tmp = Path(tempfile.mkdtemp(prefix=".saving-", dir=folder))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _publish(staged: Path, final: Path) -> None:
    """Move a finished file into place atomically, readable by all like any file the user writes.

    (safetensors creates its files owner-only, 0600.)
    """
    os.chmod(staged, 0o644)
    os.replace(staged, final)


def _read_safetensors(path: Path) -> tuple[dict[str, Tensor], dict[str, str]]:
    """Tensors and metadata of a safetensors file, every failure as CheckpointError."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CheckpointError(f"{path.parent}: missing {path.name}") from None
    except OSError as error:
        raise CheckpointError(f"{path}: cannot read ({error})") from None
    try:
        tensors = load_safetensors_bytes(data)
        header_len = int.from_bytes(data[:8], "little")
        metadata = parse_json(data[8 : 8 + header_len], "its header").get("__metadata__") or {}
    except JSONFileError as error:
        raise CheckpointError(f"{path}: not a valid safetensors file: {error}") from None
    except (SafetensorError, ValueError, RuntimeError, OverflowError) as error:
        raise CheckpointError(f"{path}: not a valid safetensors file (truncated or damaged?): {error}") from None
    return {legacy_name(name): tensor for name, tensor in tensors.items()}, metadata


def _flatten_optimizer(optimizer: torch.optim.Optimizer) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """Split an optimizer's state dict into tensors (for safetensors) and JSON-able scalars."""
    state_dict = optimizer.state_dict()
    tensors: dict[str, Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for index, param_state in state_dict["state"].items():
        for key, value in param_state.items():
            if isinstance(value, Tensor):
                tensors[f"state.{index}.{key}"] = value.detach().to("cpu").contiguous()
            else:
                scalars.setdefault(str(index), {})[key] = value
    return tensors, {"scalars": scalars, "param_groups": state_dict["param_groups"]}


def _json_default(value: Any) -> Any:
    """Paths, tuples of dataclasses and numpy/torch scalars in meta become plain JSON."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, Tensor) and value.numel() == 1:
        return value.item()
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"cannot store {type(value).__name__} in a checkpoint's JSON")
