"""A checkpoint's sizes, read from its safetensors header and checked against its config before anything is built.

``config.json`` is data a user may have edited or uploaded: a config asking for vocabularies of
10^9 tokens or d_model 65,536 would have the model constructor allocate terabytes before the
weights are ever compared. A safetensors file starts with an 8-byte little-endian length and a
JSON header that lists every tensor's dtype, shape and byte range, so the sizes can be checked
first, in milliseconds and without reading the weights:

1. ``read_header``: the header alone (at most ``MAX_HEADER_BYTES``), every entry well formed, and the entries'
   byte ranges the file's data exactly (one after another, no overlap, no gap): the parameters a header
   declares are bytes the file holds.
2. ``check_sizes``: the fields of the config that the weights determine (vocabularies, d_model,
   d_ff, layers of each stack, tied embeddings) are read off the header and compared one by one,
   so the message names the wrong field; then the caps (``caps_problem``: layers per stack,
   ``MAX_LAYERS``; parameters, ``MAX_PARAMETERS``; the positional table, ``MAX_POSITIONAL_VALUES``,
   max_len x d_model, the one buffer not stored in the weights); then every tensor's shape against
   the shapes the config implies (``expected_shapes``, computed without building a model).

``caps_problem`` checks the caps by arithmetic on the config alone (``parameter_count``: no per-layer table),
so a config asking for 10^9 layers is refused in microseconds; both loaders (ours, ``hub.load``) call it
before anything is listed per layer.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, NamedTuple

from ..network.config import TransformerConfig
from ..network.positional import position_scheme
from .file_caps import JSONFileError, parse_json

MAX_HEADER_BYTES = 16 * 2**20  # a header lists names and shapes: a few KB for our models
# A header's arrays and objects, counted before it is parsed (each becomes a Python object the garbage collector
# walks: 60 k took 0.5 s beside torch): a dict, a shape and a byte range per tensor, for 8,192 tensors (a model of
# 128 + 128 layers, the most that is built, has 5,400; NLLB-600M 520).
MAX_HEADER_CONTAINERS = 3 * 8192 + 2
MAX_PARAMETERS = 1_300_000_000  # Llama-3.2-1B (1.24 B: 5 GB in float32, 2.5 GB in bfloat16), NLLB-600M, mBART-50 fit
MAX_POSITIONAL_VALUES = 2**25  # max_len x d_model of the sinusoidal table (128 MB in float32)
# ids per vocabulary: twice the largest real one (Gemma-3's 262,144; NLLB's 256,206). The tokenizer's caps grow with
# the vocabulary a config declares (hub/tokenizer_json.py), so a tiny model declaring millions of ids would let a
# tokenizer.json of millions of pieces through (a 9 s parse with the GIL held)
MAX_VOCAB = 2**19
MAX_LAYERS = 128  # per stack: the paper has 6, opus-mt models 6 (big: 12); a module per layer is built
_ITEM_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
_LAYER = re.compile(r"^(encoder|decoder)\.layers\.(\d+)\.")


class HeaderError(ValueError):
    """A weights file whose header is damaged, or whose sizes do not fit its config; the message says which."""


class Entry(NamedTuple):
    """One tensor of a safetensors header, checked: its dtype (the format's name, "F32"), shape and byte range in
    the file's data (which starts at ``data_start`` of ``read_entries``)."""

    dtype: str
    shape: tuple[int, ...]
    start: int
    end: int


def read_header(path: str | os.PathLike) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Every tensor's (dtype, shape) from a safetensors file's header, without reading the tensors
    (``read_entries``)."""
    entries, _ = read_entries(path)
    return {name: (entry.dtype, entry.shape) for name, entry in entries.items()}


def read_entries(path: str | os.PathLike) -> tuple[dict[str, Entry], int]:
    """Every tensor's ``Entry`` from a safetensors file's header, and where its data starts (8 + the header's
    length), without reading the tensors: the one read of a safetensors header (capped, parsed by ``parse_json``).

    Raises HeaderError for a file that is too short, a header that is too long or not JSON, an entry whose shape,
    dtype or byte range does not make sense, or byte ranges that are not the file's data exactly: as the reference
    ``safetensors`` library requires, the tensors' ranges, in order, follow one another from byte 0 without gap or
    overlap and end where the file ends. So every parameter the header declares is in the file's own bytes: a
    header whose tensors all point at byte 0 (an 8.5 MB file declaring a 589 M-parameter model) is refused here.
    No message quotes the file's bytes (a link to another file would leak its start as the header's length).
    """
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as file:
            prefix = file.read(8)
            if len(prefix) < 8:
                raise HeaderError(f"{path.name} is {size} bytes: not a valid safetensors file")
            length = int.from_bytes(prefix, "little")
            if length > MAX_HEADER_BYTES or 8 + length > size:
                raise HeaderError(f"{path.name}: not a valid safetensors file: the header length its first 8 bytes "
                                  f"give is past the end of the file or over {MAX_HEADER_BYTES // 2**20} MB "
                                  "(truncated or damaged?)")
            text = file.read(length)
    except FileNotFoundError:
        raise HeaderError(f"missing {path.name}") from None
    except OSError as error:  # its strerror only: str(error) names the path it resolved to
        raise HeaderError(f"cannot read {path.name} ({error.strerror})") from None
    try:
        header = parse_json(text, "its header", max_containers=MAX_HEADER_CONTAINERS)
    except JSONFileError as error:
        raise HeaderError(f"{path.name}: not a valid safetensors file, {error}") from None
    if not isinstance(header, dict):
        raise HeaderError(f"{path.name}: its header is not a JSON object")
    data_bytes = size - 8 - length
    tensors: dict[str, Entry] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        (dtype, shape), start, end = _entry(path.name, name, entry, data_bytes)
        tensors[name] = Entry(dtype, shape, start, end)
    _check_ranges(path.name, [(e.start, e.end, name) for name, e in tensors.items()], data_bytes)
    return tensors, 8 + length


def _entry(file: str, name: str, entry: Any, data_bytes: int) -> tuple[tuple[str, tuple[int, ...]], int, int]:
    """One header entry checked: a known dtype, a shape of non-negative ints, a byte range that fits; with the
    range's start and end."""
    try:
        dtype, shape, (start, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
    except (TypeError, KeyError, ValueError):
        raise HeaderError(f"{file}: the header entry of {_short(name)} is not a tensor description") from None
    if dtype not in _ITEM_BYTES or not isinstance(shape, list) or len(shape) > 8:
        raise HeaderError(f"{file}: {_short(name)} has dtype {_short(dtype)} and shape {_short(shape)}")
    if not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 2**40 for n in shape):
        raise HeaderError(f"{file}: {_short(name)} has shape {_short(shape)}")
    numel = 1
    for n in shape:
        numel *= n
    if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end <= data_bytes
            and end - start == numel * _ITEM_BYTES[dtype]):
        raise HeaderError(f"{file}: {_short(name)} ({dtype} {shape}) does not fit its byte range [{_short(start)}, "
                          f"{_short(end)}) of the {data_bytes:,} data bytes (truncated or damaged?)")
    return (dtype, tuple(shape)), start, end


def _check_ranges(file: str, ranges: list[tuple[int, int, str]], data_bytes: int) -> None:
    """HeaderError unless the byte ranges, sorted, tile the data: each starts where the one before ends, the first
    at 0, the last at the end of the file (the ``safetensors`` library's rule: InvalidOffset,
    MetadataIncompleteBuffer)."""
    at = 0
    for start, end, name in sorted(ranges):
        if start != at:
            how = "overlaps the tensor before it" if start < at else "leaves a gap before it"
            raise HeaderError(f"{file}: the byte range of {_short(name)} [{start:,}, {end:,}) {how} (which ends at "
                              f"{at:,}): each tensor must have bytes of its own, one after another")
        at = end
    if at != data_bytes:
        raise HeaderError(f"{file}: the tensors' byte ranges end at {at:,} but the file holds {data_bytes:,} data "
                          "bytes (truncated or damaged?)")


def _short(value: Any) -> str:
    """``repr(value)``, cut to 40 characters: what a message may quote of a hostile header."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def expected_shapes(config: TransformerConfig) -> dict[str, tuple[int, ...]]:
    """The name and shape of every stored tensor of ``Transformer(config)`` (a tied matrix once, as
    ``checkpoint.weights_of`` stores it), computed from the config alone."""
    d, f, inner = config.d_model, config.d_ff, config.d_inner
    kv = config.kv_heads * config.d_k
    sides = ("tgt",) if config.decoder_only else ("src", "tgt")
    shapes: dict[str, tuple[int, ...]] = {}
    if not config.decoder_only:
        shapes["src_embed.weight"] = (config.src_vocab_size, d)
    if not config.shared_embeddings:
        shapes["tgt_embed.weight"] = (config.tgt_vocab_size, d)
    if config.positional == "learned":
        shapes.update({f"positional.{side}.weight": (config.max_len + config.position_offset, d) for side in sides})
    attention = {"in_proj.weight": (inner + 2 * kv, d), "w_o.weight": (d, inner)}
    feed_forward = {"w_1.weight": (f, d), "w_2.weight": (d, f)} | ({"w_3.weight": (f, d)} if config.gated_ff else {})
    if config.bias or config.qkv_bias:
        attention["in_proj.bias"] = (inner + 2 * kv,)
    if config.bias:
        attention["w_o.bias"] = (d,)
        feed_forward |= {f"{name[:3]}.bias": (shape[0],) for name, shape in feed_forward.items()}
    norm = {"weight": (d,), "bias": (d,)} if config.norm == "layer" else {"weight": (d,)}
    if config.qk_norm:
        head_norm = {k: (config.d_k,) for k in norm}
        attention |= {f"{which}.{k}": v for which in ("q_norm", "k_norm") for k, v in head_norm.items()}
    residual_norms = ("norm", "post_norm") if config.sandwich_norm else ("norm",)
    decoder_attentions = ("self_attn",) if config.decoder_only else ("self_attn", "cross_attn")
    stacks = (("encoder", config.n_encoder_layers, ("self_attn",)), ("decoder", config.n_decoder_layers,
                                                                     decoder_attentions))
    for stack, n_layers, attentions in stacks:
        if stack == "encoder" and config.decoder_only:
            continue
        if config.embedding_norm:
            shapes.update({f"{stack}.embed_norm.{k}": v for k, v in norm.items()})
        if config.positional == "relative":
            shapes[f"{stack}.relative_bias.table.weight"] = (config.relative_buckets, config.n_heads)
        for i in range(n_layers):
            prefix = f"{stack}.layers.{i}"
            for part in attentions:
                shapes.update({f"{prefix}.{part}.{k}": v for k, v in attention.items()})
            shapes.update({f"{prefix}.feed_forward.{k}": v for k, v in feed_forward.items()})
            for sublayer in ("self_attn", *attentions[1:], "feed_forward"):
                shapes.update({f"{prefix}.{sublayer}_residual.{which}.{k}": v
                               for which in residual_norms for k, v in norm.items()})
        if config.final_norm:
            shapes.update({f"{stack}.norm.{k}": v for k, v in norm.items()})
    if not config.generator_tied:
        shapes["generator.weight"] = (config.tgt_vocab_size, d)
    shapes["generator.bias"] = (config.tgt_vocab_size,)
    return shapes


def parameter_count(config: TransformerConfig) -> int:
    """The number of stored parameters of ``Transformer(config)`` (what ``expected_shapes`` lists, summed), by
    arithmetic: constant time whatever the layer counts."""
    d, f, inner, bias = config.d_model, config.d_ff, config.d_inner, int(config.bias)
    kv = config.kv_heads * config.d_k
    projected = inner + 2 * kv  # the rows of in_proj: W^Q, W^K, W^V
    # in_proj (projected x d, its bias with bias or qkv_bias) and w_o (d x inner, d); q/k norms over d_k
    attention = (projected + inner) * d + int(config.bias or config.qkv_bias) * projected + bias * d
    n_up = 2 if config.gated_ff else 1  # W_1 (and W_3, gated): d x d_ff each
    feed_forward = (n_up + 1) * d * f + bias * (n_up * f + d)
    norm = (2 if config.norm == "layer" else 1) * d
    attention += int(config.qk_norm) * 2 * (norm // d) * config.d_k  # a q and a k norm over d_k
    residual = norm * (2 if config.sandwich_norm else 1)
    stacks = 1 if config.decoder_only else 2
    encoder_layer = attention + feed_forward + 2 * residual
    decoder_layer = (stacks * attention) + feed_forward + (stacks + 1) * residual
    total = config.n_encoder_layers * encoder_layer + config.n_decoder_layers * decoder_layer
    total += stacks * norm * (int(config.final_norm) + int(config.embedding_norm))
    if config.positional == "learned":
        total += stacks * (config.max_len + config.position_offset) * d
    if config.positional == "relative":
        total += stacks * config.relative_buckets * config.n_heads
    total += (0 if config.decoder_only else config.src_vocab_size * d)
    total += 0 if config.shared_embeddings else config.tgt_vocab_size * d
    total += (0 if config.generator_tied else config.tgt_vocab_size * d) + config.tgt_vocab_size
    return total


def caps_problem(config: TransformerConfig) -> str | None:
    """What in ``config`` is beyond this package's caps (layers per stack, vocabulary, parameters, positional table), or
    None; by arithmetic alone, before any per-layer work."""
    layers = max(config.n_encoder_layers, config.n_decoder_layers)
    if layers > MAX_LAYERS:
        return f"the config asks for {layers:,} layers in a stack; at most {MAX_LAYERS} are built"
    vocab = max(config.src_vocab_size, config.tgt_vocab_size)
    if vocab > MAX_VOCAB:
        return f"the config asks for a vocabulary of {vocab:,} ids; at most {MAX_VOCAB:,} are read"
    n_parameters = parameter_count(config)
    if n_parameters > MAX_PARAMETERS:
        return f"the config asks for {n_parameters:,} parameters; this app loads at most {MAX_PARAMETERS:,}"
    if position_scheme(config) == "added" and config.max_len * config.d_model > MAX_POSITIONAL_VALUES:
        return (f"max_len {config.max_len} x d_model {config.d_model} asks for a positional table of "
                f"{config.max_len * config.d_model:,} values; the limit is {MAX_POSITIONAL_VALUES:,}")
    return None


def check_sizes(config: TransformerConfig, tensors: dict[str, tuple[str, tuple[int, ...]]], *,
                weights_file: str = "model.safetensors") -> None:
    """HeaderError unless the header's tensors are exactly those of ``config`` and within the caps.

    The config fields the weights determine are compared first, so that a config asking for 1,000
    layers or d_model 65,536 is refused by name before any per-layer work.
    """
    shapes = {name: shape for name, (_, shape) in tensors.items()}
    found = _fields_from_shapes(shapes)
    wrong = [f"{field} is {getattr(config, field)} in config.json but {value} in {weights_file}"
             for field, value in found.items() if value is not None and getattr(config, field) != value]
    if wrong:
        raise HeaderError("the config does not fit the weights: " + "; ".join(wrong))
    problem = caps_problem(config)  # before expected_shapes lists every layer
    if problem:
        raise HeaderError(problem)
    expected = expected_shapes(config)
    missing = sorted(set(expected) - set(shapes))
    unexpected = sorted(set(shapes) - set(expected))
    mismatched = [f"{name} is {shapes[name]}, the config needs {expected[name]}"
                  for name in sorted(set(expected) & set(shapes)) if shapes[name] != expected[name]]
    problems = ([f"missing tensors: {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}"] if missing else []) \
        + ([f"unexpected tensors: {', '.join(unexpected[:5])}{' ...' if len(unexpected) > 5 else ''}"]
           if unexpected else []) + mismatched[:5]
    if problems:
        raise HeaderError(f"the weights do not match the config: {'; '.join(problems)}")


def _fields_from_shapes(shapes: dict[str, tuple[int, ...]]) -> dict[str, int | bool | None]:
    """The config fields a set of tensors fixes (None where the tensors do not say)."""
    def dim(name: str, axis: int) -> int | None:
        shape = shapes.get(name)
        return shape[axis] if shape is not None and len(shape) > axis else None

    layers = {"encoder": set(), "decoder": set()}
    for name in shapes:
        match = _LAYER.match(name)
        if match:
            layers[match.group(1)].add(int(match.group(2)))
    d_ff = dim("encoder.layers.0.feed_forward.w_1.weight", 0) or dim("decoder.layers.0.feed_forward.w_1.weight", 0)
    return {
        "src_vocab_size": dim("src_embed.weight", 0),
        "d_model": dim("src_embed.weight", 1) or dim("tgt_embed.weight", 1),
        "tgt_vocab_size": dim("generator.bias", 0),
        "d_ff": d_ff,
        "n_encoder_layers": len(layers["encoder"]),
        "n_decoder_layers": len(layers["decoder"]),
        "shared_embeddings": "src_embed.weight" in shapes and "tgt_embed.weight" not in shapes,
    }

