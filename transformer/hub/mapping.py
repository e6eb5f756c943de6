"""What every family's weight mapping shares: a table from our parameter names to ``transformers``' names, read
one way (``gather``: their tensors under our names) and turned into the shapes their files must hold
(``their_shapes``), so that t5.py, bart.py and m2m100.py only write their tables. ``FamilyError`` and the config
side (``get``, ``build``, ``same``, ``special_id``) are family_config.py's, which imports no torch.

A table maps each of our names to one of theirs, or to a tuple of theirs that are concatenated in order (their
W^Q, W^K and W^V are three matrices, ours one ``in_proj`` with rows [W^Q; W^K; W^V]): weights are renamed and
concatenated, never recomputed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from ..network.config import TransformerConfig
from ..weights_header import expected_shapes as our_shapes
from .family_config import FamilyError

Names = dict[str, str | tuple[str, ...]]


def rename(tensors: Mapping[str, Tensor], names: Names) -> tuple[dict[str, Tensor], list[str]]:
    """``tensors`` (their names) under ours, and the names of theirs that are missing. A tuple of their names is
    concatenated (q, k and v into one in-projection)."""
    ours: dict[str, Tensor] = {}
    missing: list[str] = []
    for name, theirs in names.items():
        parts = theirs if isinstance(theirs, tuple) else (theirs,)
        absent = [p for p in parts if p not in tensors]
        if absent:
            missing += absent
            continue
        ours[name] = torch.cat([tensors[p] for p in parts]) if len(parts) > 1 else tensors[parts[0]]
    return ours, missing


def lacking(missing: Sequence[str]) -> str:
    """"N tensors the config needs: a, b, c, d, e ..." for an error message."""
    return f"{len(missing)} tensors the config needs: {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}"


def gather(tensors: Mapping[str, Tensor], names: Names, family: str) -> dict[str, Tensor]:
    """``tensors`` (their names) under ours (``rename``); FamilyError naming the first missing tensors."""
    ours, missing = rename(tensors, names)
    if missing:
        raise FamilyError(f"the {family} weights lack {lacking(missing)}")
    return ours


def first_present(tensors: Mapping[str, Tensor], candidates: Sequence[str], family: str) -> Tensor:
    """The tensor under the first of ``candidates`` present (a tied matrix may be stored under any of its
    names: ``save_pretrained`` keeps one of a tied group, old ``.bin`` files every one)."""
    for name in candidates:
        if name in tensors:
            return tensors[name]
    raise FamilyError(f"the {family} weights lack {candidates[0]} (or any of {', '.join(candidates[1:])})")


def their_shapes(names: Names, config: TransformerConfig) -> dict[str, tuple[int, ...]]:
    """The shape each of their tensors in ``names`` must have (a tuple's parts split our rows evenly)."""
    ours = our_shapes(config)
    shapes: dict[str, tuple[int, ...]] = {}
    for name, theirs in names.items():
        if isinstance(theirs, tuple):
            for part in theirs:
                shapes[part] = (ours[name][0] // len(theirs), *ours[name][1:])
        else:
            shapes[theirs] = ours[name]
    return shapes


def attention_names(ours: str, theirs: str, parts: tuple[str, str, str, str], bias: bool) -> Names:
    """One attention sub-layer: our ``in_proj`` from their q, k, v (concatenated) and ``w_o`` from their out."""
    q, k, v, out = parts
    names: Names = {f"{ours}.in_proj.weight": tuple(f"{theirs}.{p}.weight" for p in (q, k, v)),
                    f"{ours}.w_o.weight": f"{theirs}.{out}.weight"}
    if bias:
        names[f"{ours}.in_proj.bias"] = tuple(f"{theirs}.{p}.bias" for p in (q, k, v))
        names[f"{ours}.w_o.bias"] = f"{theirs}.{out}.bias"
    return names


def norm_names(ours: str, theirs: str, config: TransformerConfig) -> Names:
    """A norm's weight (and bias, for LayerNorm; RMSNorm has none)."""
    kinds = ("weight", "bias") if config.norm == "layer" else ("weight",)
    return {f"{ours}.{kind}": f"{theirs}.{kind}" for kind in kinds}
