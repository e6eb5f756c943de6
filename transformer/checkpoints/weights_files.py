"""The weight files of a model folder read under their caps, for every family, without unpickling anything: only
the tensors a family's tables name (``mapping.expected_shapes``), which ``mapping.weights_of`` then renames onto
ours. Every failure is a ``CheckpointError`` naming the file and tensor (never the path a file resolves to).

Files: ``model.safetensors`` (or shards named by ``model.safetensors.index.json``), each tensor read with plain
file reads into memory of its own (not memory-mapped: a mapped file's pages count in the process's memory while
it is mapped, so filling a model from a mapping held its weights twice); or ``pytorch_model.bin`` (what the
opus-mt repositories hold), read with ``torch.load(weights_only=True)``, which refuses anything but tensors and
plain containers. Shapes are checked against the config (from the safetensors header, before any tensor is read)
and the config is checked against the caps of ``weights_header`` before any model is built.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from .checkpoint import non_finite
from .errors import CheckpointError
from .weights_header import Entry, HeaderError, read_entries

BIN_SUFFIX = ".bin"  # pytorch_model.bin: a pickle, read with torch.load(weights_only=True); anything else safetensors


def read_tensors(files: list[Path], expected: dict[str, tuple[int, ...]], dtype: torch.dtype | None = None
                 ) -> dict[str, Tensor]:
    """The tensors of ``files`` named in ``expected`` (their name -> shape, from a family's ``expected_shapes``),
    shapes checked, for any family; each floating tensor cast to ``dtype`` as it is read (None: as stored), so a
    model kept in half precision never holds all its float32 weights at once.

    Every safetensors header is checked (``read_header``: byte ranges that are the file's data exactly; shapes
    against ``expected``) before any tensor of any shard is read; a .bin is read with ``weights_only=True``
    (memory-mapped where the file allows). Every tensor read must be finite: a NaN or an infinity is refused
    naming the tensor and its file (such a model gives empty outputs).
    """
    headers: dict[Path, tuple[dict[str, Entry], int]] = {}
    for path in files:
        if path.suffix != BIN_SUFFIX:
            try:
                entries, data_start = read_entries(path)
            except HeaderError as error:
                raise CheckpointError(str(error)) from None
            _check_shapes({name: entry.shape for name, entry in entries.items()}, expected, path.name)
            headers[path] = {name: e for name, e in entries.items() if name in expected}, data_start
    tensors: dict[str, Tensor] = {}
    for path in files:
        if path.suffix == BIN_SUFFIX:  # copied out of torch.load's mapping: a model's parameters never map a file
            loaded = _bin_tensors(path, expected)
        else:
            loaded = _read_safetensors(path, *headers[path], dtype)
        _check_shapes({name: tuple(t.shape) for name, t in loaded.items()}, expected, path.name)
        for name, tensor in loaded.items():
            if tensor.dtype.is_floating_point and non_finite(tensor):
                raise CheckpointError(f"{path.name}: the tensor {name} holds NaN or infinite values")
        tensors.update({name: _cast(t, dtype) for name, t in loaded.items() if name in expected})
    for name, tensor in tensors.items():
        if not tensor.dtype.is_floating_point:
            raise CheckpointError(f"{name} holds {tensor.dtype}, not floating-point weights")
    return tensors


def _bin_tensors(path: Path, expected: dict[str, tuple[int, ...]]) -> dict[str, Tensor]:
    """The tensors of a ``pytorch_model.bin`` that ``expected`` names, each copied once out of the mapping (tied
    names, which old files store as views of one storage, share one copy). The copies may not exceed the file's
    size: a pickle can make any number of tensors view the same bytes, so without this bound a small file could
    ask for a model many times its size."""
    copies: dict[tuple[int, int, tuple[int, ...], tuple[int, ...], torch.dtype], Tensor] = {}
    loaded: dict[str, Tensor] = {}
    budget = path.stat().st_size
    for name, tensor in _read_bin(path).items():
        if name not in expected:
            continue
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape), tensor.stride(),
               tensor.dtype)
        if key not in copies:
            budget -= tensor.numel() * tensor.element_size()
            if budget < 0:
                raise CheckpointError(f"{path.name}: its tensors view more bytes than the file holds (tensors "
                                         "that share their bytes, other than tied names)")
            copies[key] = tensor.clone()
        loaded[name] = copies[key]
    return loaded


def _check_shapes(found: dict[str, tuple[int, ...]], expected: dict[str, tuple[int, ...]], file: str) -> None:
    wrong = [f"{name} is {shape}, the config needs {expected[name]}"
             for name, shape in found.items() if name in expected and tuple(shape) != expected[name]]
    if wrong:
        raise CheckpointError(f"{file} does not fit config.json: {'; '.join(wrong[:5])}")


_TORCH_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
                 "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
                 "BOOL": torch.bool}


def _cast(tensor: Tensor, dtype: torch.dtype | None) -> Tensor:
    """``tensor`` in ``dtype`` when both are floating point; otherwise as it is (read_tensors refuses the rest)."""
    if dtype is None or not tensor.dtype.is_floating_point or tensor.dtype == dtype:
        return tensor
    return tensor.to(dtype)


CHUNK_BYTES = 1 << 22  # a tensor cast while it is read goes through a buffer of this size, not a whole copy


def _read_safetensors(path: Path, entries: dict[str, Entry], data_start: int, dtype: torch.dtype | None = None
                      ) -> dict[str, Tensor]:
    """The tensors ``entries`` of a safetensors file (its header as ``read_entries`` read and checked it; the data
    from byte ``data_start``), each read into a new tensor of its own (little-endian, as the format stores it): no
    mapping of the file outlives the call. A floating tensor stored in another floating dtype than ``dtype`` is cast
    chunk by chunk as it is read (an NLLB embedding of 1 GB in float32 never exists beside its float16 copy)."""
    try:
        with open(path, "rb") as file:
            tensors = {}
            for name, entry in entries.items():
                stored = _TORCH_DTYPES[entry.dtype]
                cast = dtype is not None and stored.is_floating_point and stored != dtype
                tensor = torch.empty(entry.shape, dtype=dtype if cast else stored)
                file.seek(data_start + entry.start)
                flat = tensor.reshape(-1)  # (numel,): a view of the tensor's memory
                step = max(1, CHUNK_BYTES // stored.itemsize) if cast else max(1, flat.numel())
                buffer = torch.empty(min(step, flat.numel()), dtype=stored) if cast else flat
                for at in range(0, flat.numel(), step):
                    part = buffer[: min(step, flat.numel() - at)]
                    if file.readinto(memoryview(part.view(torch.uint8).numpy())) != part.numel() * stored.itemsize:
                        raise OSError(f"{name} ends past the end of the file")
                    if cast:
                        flat[at: at + part.numel()].copy_(part)
                tensors[name] = tensor
            return tensors
    except OSError as error:  # its strerror only: str(error) may name the path the file resolved to
        reason = error.strerror or (str(error.args[0]) if error.args else "an I/O error")
        raise CheckpointError(f"{path.name}: cannot be read (truncated or damaged?): {reason}") from None
    except (ValueError, KeyError) as error:
        raise CheckpointError(f"{path.name}: not a valid safetensors file (truncated or damaged?): {error}") \
            from None


def _read_bin(path: Path) -> dict[str, Tensor]:
    """A ``pytorch_model.bin`` through ``torch.load(weights_only=True)``: tensors only, never code."""
    loaded = None
    for mmap in (True, False):  # mmap needs the zip format; an old file is read whole
        try:
            loaded = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
            break
        except Exception as error:  # noqa: BLE001  an untrusted file: whatever the unpickler raises means unreadable
            last = error
    if loaded is None:
        raise CheckpointError(f"{path.name}: not a readable weights file (only tensors are loaded): {last}")
    if not isinstance(loaded, dict) or not all(isinstance(k, str) and isinstance(v, Tensor)
                                               for k, v in loaded.items()):
        raise CheckpointError(f"{path.name}: expected a mapping of names to tensors")
    return loaded

