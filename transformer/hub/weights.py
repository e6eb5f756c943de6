"""The weights of a Marian folder under our names, read without unpickling anything.

One table (``layer_names``) says where each of our parameters lives in ``transformers``' MarianMTModel;
``to_ours`` reads that way, ``to_marian`` the other (the tests use it to load our weights into
``transformers``). Marian keeps W^Q, W^K and W^V as three matrices (q_proj, k_proj, v_proj); ours is one
``in_proj`` with rows [W^Q; W^K; W^V], so those three are concatenated, never recomputed. The sinusoid
table (``embed_positions``) is not a weight here: it is a function of the sizes (``network/positional.py``).

Files: ``model.safetensors`` (or shards named by ``model.safetensors.index.json``), each tensor read with plain
file reads into memory of its own (not memory-mapped: a mapped file's pages count in the process's memory while
it is mapped, so filling a model from a mapping held its weights twice); or ``pytorch_model.bin`` (what the
opus-mt repositories hold), read with ``torch.load(weights_only=True)``, which refuses anything but tensors and
plain containers. Shapes are checked against the config (from the safetensors header, before any tensor is read)
and the config is checked against the caps of ``weights_header`` before any model is built.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import Tensor

from ..checkpoint import non_finite
from ..errors import CheckpointError
from ..network.config import TransformerConfig
from ..network.layers import SUBLAYERS
from ..weights_header import HeaderError, caps_problem, expected_shapes, read_header
from .folder import BIN_FILE
from .mapping import lacking, rename

_ATTENTION = {"self_attn": "self_attn", "cross_attn": "encoder_attn"}  # ours -> Marian's
_NORMS = {"encoder": ("self_attn_layer_norm", "final_layer_norm"),
          "decoder": ("self_attn_layer_norm", "encoder_attn_layer_norm", "final_layer_norm")}
# Where a tied embedding may be stored: save_pretrained keeps one name of a tied group, old .bin files all.
_SHARED = ("model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight",
           "lm_head.weight")


class MarianWeightsError(CheckpointError):
    """A Hugging Face folder's weights (any family: the name is from when Marian was the only one) are missing,
    damaged, or do not fit its config; the message says which file and tensor."""


def layer_names(config: TransformerConfig) -> dict[str, str | tuple[str, ...]]:
    """Our parameter name -> Marian's (a tuple: the q, k, v parts of our in_proj, concatenated in that order)."""
    names: dict[str, str | tuple[str, ...]] = {}
    for stack, n_layers in (("encoder", config.n_encoder_layers), ("decoder", config.n_decoder_layers)):
        for i in range(n_layers):
            ours, theirs = f"{stack}.layers.{i}", f"model.{stack}.layers.{i}"
            for part in (("self_attn",) if stack == "encoder" else ("self_attn", "cross_attn")):
                attention = f"{theirs}.{_ATTENTION[part]}"
                for kind in ("weight", "bias"):
                    names[f"{ours}.{part}.in_proj.{kind}"] = tuple(f"{attention}.{p}_proj.{kind}" for p in "qkv")
                    names[f"{ours}.{part}.w_o.{kind}"] = f"{attention}.out_proj.{kind}"
            for kind in ("weight", "bias"):
                names[f"{ours}.feed_forward.w_1.{kind}"] = f"{theirs}.fc1.{kind}"
                names[f"{ours}.feed_forward.w_2.{kind}"] = f"{theirs}.fc2.{kind}"
                for sublayer, norm in zip(SUBLAYERS[stack], _NORMS[stack], strict=True):
                    names[f"{ours}.{sublayer}_residual.norm.{kind}"] = f"{theirs}.{norm}.{kind}"
    return names


def _embedding_names(config: TransformerConfig) -> dict[str, tuple[str, ...]]:
    """Our embedding / generator matrices -> the Marian names that may hold them, preferred first."""
    if config.shared_embeddings:
        return {"src_embed.weight": _SHARED}
    names = {"src_embed.weight": ("model.encoder.embed_tokens.weight",),
             "tgt_embed.weight": ("model.decoder.embed_tokens.weight", "lm_head.weight")}
    if not config.generator_tied:
        names["generator.weight"] = ("lm_head.weight",)
    return names


def to_ours(tensors: dict[str, Tensor], config: TransformerConfig) -> dict[str, Tensor]:
    """Marian's state dict -> ours (each tied matrix once, as ``checkpoint.weights_of`` stores it)."""
    ours: dict[str, Tensor] = {}
    missing: list[str] = []
    for name, candidates in _embedding_names(config).items():
        found = next((c for c in candidates if c in tensors), None)
        if found is None:
            missing.append(candidates[0])
        else:
            ours[name] = tensors[found]
    if "final_logits_bias" in tensors:
        ours["generator.bias"] = tensors["final_logits_bias"].reshape(-1)
    else:  # transformers keeps it as a buffer of zeros; a folder may leave it out
        ours["generator.bias"] = torch.zeros(config.tgt_vocab_size)
    layers, absent = rename(tensors, layer_names(config))
    ours.update(layers)
    missing += absent
    if missing:
        raise MarianWeightsError(f"the weights lack {lacking(missing)}")
    return ours


def to_marian(state: dict[str, Tensor], config: TransformerConfig) -> dict[str, Tensor]:
    """Our state dict -> Marian's names (the inverse of ``to_ours``; tied matrices under each of their names)."""
    d = config.d_model
    theirs: dict[str, Tensor] = {"final_logits_bias": state["generator.bias"][None]}
    for name, candidates in _embedding_names(config).items():
        for candidate in candidates:
            theirs[candidate] = state[name]
    if not config.shared_embeddings:
        theirs["model.decoder.embed_tokens.weight"] = state["tgt_embed.weight"]
        theirs["lm_head.weight"] = state["tgt_embed.weight" if config.generator_tied else "generator.weight"]
    for name, target in layer_names(config).items():
        if isinstance(target, tuple):
            for part, chunk in zip(target, state[name].split(d), strict=True):
                theirs[part] = chunk
        else:
            theirs[target] = state[name]
    return theirs


def expected_marian_shapes(config: TransformerConfig) -> dict[str, tuple[int, ...]]:
    """The shape of every Marian tensor ``to_ours`` reads, from the config alone."""
    ours = expected_shapes(config)
    shapes: dict[str, tuple[int, ...]] = {}
    for name, theirs in layer_names(config).items():
        if isinstance(theirs, tuple):
            for part in theirs:
                shapes[part] = (ours[name][0] // 3, *ours[name][1:])
        else:
            shapes[theirs] = ours[name]
    for name, candidates in _embedding_names(config).items():
        for candidate in candidates:
            size = config.tgt_vocab_size if candidate.startswith(("model.decoder", "lm_head")) else None
            shapes[candidate] = (size or ours[name][0], config.d_model)
    shapes["final_logits_bias"] = (1, config.tgt_vocab_size)
    return shapes


def check_caps(config: TransformerConfig) -> None:
    """MarianWeightsError when the config asks for more than this package builds (``weights_header``'s caps),
    by arithmetic on the config: nothing is listed per layer, so 10^9 layers are refused in microseconds."""
    problem = caps_problem(config)
    if problem:
        raise MarianWeightsError(problem)


def read_marian_tensors(files: list[Path], config: TransformerConfig) -> dict[str, Tensor]:
    """The tensors of ``files`` that ``to_ours`` needs, shapes checked against ``config``."""
    return read_tensors(files, expected_marian_shapes(config))


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
    headers: dict[Path, list[str]] = {}
    for path in files:
        if path.name != BIN_FILE:
            try:
                header = read_header(path)
            except HeaderError as error:
                raise MarianWeightsError(str(error)) from None
            _check_shapes({name: shape for name, (_, shape) in header.items()}, expected, path.name)
            headers[path] = [name for name in header if name in expected]
    tensors: dict[str, Tensor] = {}
    for path in files:
        if path.name == BIN_FILE:  # copied out of torch.load's mapping: a model's parameters never map a file
            loaded = _bin_tensors(path, expected)
        else:
            loaded = _read_safetensors(path, headers[path], dtype)
        _check_shapes({name: tuple(t.shape) for name, t in loaded.items()}, expected, path.name)
        for name, tensor in loaded.items():
            if tensor.dtype.is_floating_point and non_finite(tensor):
                raise MarianWeightsError(f"{path.name}: the tensor {name} holds NaN or infinite values")
        tensors.update({name: _cast(t, dtype) for name, t in loaded.items() if name in expected})
    for name, tensor in tensors.items():
        if not tensor.dtype.is_floating_point:
            raise MarianWeightsError(f"{name} holds {tensor.dtype}, not floating-point weights")
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
                raise MarianWeightsError(f"{path.name}: its tensors view more bytes than the file holds (tensors "
                                         "that share their bytes, other than tied names)")
            copies[key] = tensor.clone()
        loaded[name] = copies[key]
    return loaded


def _check_shapes(found: dict[str, tuple[int, ...]], expected: dict[str, tuple[int, ...]], file: str) -> None:
    wrong = [f"{name} is {shape}, the config needs {expected[name]}"
             for name, shape in found.items() if name in expected and tuple(shape) != expected[name]]
    if wrong:
        raise MarianWeightsError(f"{file} does not fit config.json: {'; '.join(wrong[:5])}")


_TORCH_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
                 "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
                 "BOOL": torch.bool}


def _cast(tensor: Tensor, dtype: torch.dtype | None) -> Tensor:
    """``tensor`` in ``dtype`` when both are floating point; otherwise as it is (read_tensors refuses the rest)."""
    if dtype is None or not tensor.dtype.is_floating_point or tensor.dtype == dtype:
        return tensor
    return tensor.to(dtype)


CHUNK_BYTES = 1 << 22  # a tensor cast while it is read goes through a buffer of this size, not a whole copy


def _read_safetensors(path: Path, names: list[str], dtype: torch.dtype | None = None) -> dict[str, Tensor]:
    """The tensors ``names`` of a safetensors file whose header ``read_header`` has checked, each read into a new
    tensor of its own (little-endian, as the format stores it): no mapping of the file outlives the call. A floating
    tensor stored in another floating dtype than ``dtype`` is cast chunk by chunk as it is read (an NLLB embedding
    of 1 GB in float32 never exists beside its float16 copy)."""
    try:
        with open(path, "rb") as file:
            length = int.from_bytes(file.read(8), "little")
            header = json.loads(file.read(length))
            tensors = {}
            for name in names:
                entry = header[name]
                start, end = entry["data_offsets"]
                stored = _TORCH_DTYPES[entry["dtype"]]
                cast = dtype is not None and stored.is_floating_point and stored != dtype
                tensor = torch.empty(entry["shape"], dtype=dtype if cast else stored)
                file.seek(8 + length + start)
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
        raise MarianWeightsError(f"{path.name}: cannot be read (truncated or damaged?): {reason}") from None
    except (ValueError, KeyError) as error:
        raise MarianWeightsError(f"{path.name}: not a valid safetensors file (truncated or damaged?): {error}") \
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
        raise MarianWeightsError(f"{path.name}: not a readable weights file (only tensors are loaded): {last}")
    if not isinstance(loaded, dict) or not all(isinstance(k, str) and isinstance(v, Tensor)
                                               for k, v in loaded.items()):
        raise MarianWeightsError(f"{path.name}: expected a mapping of names to tensors")
    return loaded

