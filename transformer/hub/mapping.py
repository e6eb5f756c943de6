"""The one machinery that reads every family's weights: its tables (``Family.layer_names``, ``Family.embeddings``,
declared in ``hub/families/<model_type>.py``) read one way (``weights_of``: their tensors under our names), turned
into the shapes their files must hold (``expected_shapes``), and read the other way (``to_theirs``: the tests load
our weights into ``transformers`` with it).

A table maps each of our names to one of theirs, or to a tuple of theirs that are concatenated in order (their
W^Q, W^K and W^V are three matrices, ours one ``in_proj`` with rows [W^Q; W^K; W^V]): weights are renamed and
concatenated, never recomputed. The tables themselves are torch-free (family_config.py); this module is the half
that touches tensors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from ..checkpoints.errors import CheckpointError
from ..checkpoints.weights_header import expected_shapes as our_shapes
from ..network.config import TransformerConfig
from .family_config import Family, Names


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


def their_shapes(names: Names, config: TransformerConfig) -> dict[str, tuple[int, ...]]:
    """The shape each of their tensors in ``names`` must have (a tuple's parts split our rows evenly)."""
    ours = our_shapes(config)
    shapes: dict[str, tuple[int, ...]] = {}
    for name, theirs in names.items():
        if isinstance(theirs, tuple):
            for part, rows in zip(theirs, part_rows(name, ours[name][0], len(theirs), config), strict=True):
                shapes[part] = (rows, *ours[name][1:])
        else:
            shapes[theirs] = ours[name]
    return shapes


def part_rows(name: str, rows: int, parts: int, config: TransformerConfig) -> list[int]:
    """How the ``rows`` of our tensor ``name`` split into their ``parts``: an in-projection's W^Q, W^K, W^V are
    d_inner, then n_kv_heads x d_k twice (fewer with grouped-query attention); anything else evenly."""
    if parts == 3 and ".in_proj." in name:
        kv = config.kv_heads * config.d_k
        return [rows - 2 * kv, kv, kv]
    return [rows // parts] * parts


def embedding_names(family: Family, config: TransformerConfig) -> dict[str, tuple[str, ...]]:
    """Our embedding matrices -> the names of theirs that may hold them, preferred first (the generator's own
    matrix, when it has one, is ``family.embeddings.head``)."""
    rule = family.embeddings
    head = (rule.head,) if config.generator_tied else ()
    if config.decoder_only:
        return {"tgt_embed.weight": rule.target + head}
    if config.shared_embeddings:
        return {"src_embed.weight": rule.shared + head}
    return {"src_embed.weight": rule.source, "tgt_embed.weight": rule.target + head}


def weights_of(family: Family, tensors: Mapping[str, Tensor], config: TransformerConfig) -> dict[str, Tensor]:
    """``family``'s state dict (their names) -> ours (each tied matrix once, as ``checkpoint.weights_of`` stores
    it; a logits bias the file leaves out is zeros); CheckpointError naming the first missing tensors."""
    rule = family.embeddings
    tensors = _as_ours(family, tensors)
    ours, missing = rename(tensors, family.layer_names(config))
    for name, candidates in embedding_names(family, config).items():
        found = next((c for c in candidates if c in tensors), None)
        if found is None:
            missing.insert(0, candidates[0])
        else:
            ours[name] = tensors[found]
    if missing:
        raise CheckpointError(f"{family.name}: the weights lack {lacking(missing)}")
    shared = ours["tgt_embed.weight" if config.decoder_only else "src_embed.weight"]
    head = tensors.get(rule.head)
    if not config.generator_tied:
        if head is None and not rule.head_optional:
            raise CheckpointError(f"{family.name}: the weights lack {lacking([rule.head])}")
        ours["generator.weight"] = shared if head is None else head
    elif rule.tied_head_must_match and head is not None and head is not shared and not torch.equal(head, shared):
        raise CheckpointError(f"{family.name}: {rule.head} differs from the shared embedding, but config.json ties "
                              "them (tie_word_embeddings); the two versions of transformers disagree on such a file")
    bias = tensors.get(rule.logits_bias) if rule.logits_bias else None
    ours["generator.bias"] = bias.reshape(-1) if bias is not None else torch.zeros(config.tgt_vocab_size,
                                                                                   dtype=shared.dtype)
    return ours


def expected_shapes(family: Family, config: TransformerConfig) -> dict[str, tuple[int, ...]]:
    """Their name -> shape, of every tensor ``weights_of`` may read, from the config alone."""
    rule = family.embeddings
    shapes = their_shapes(family.layer_names(config), config)
    source = rule.shared if config.shared_embeddings else rule.source
    for name in source:
        shapes[name] = (config.src_vocab_size, config.d_model)
    for name in (*(() if config.shared_embeddings else rule.target), rule.head):
        shapes[name] = (config.tgt_vocab_size, config.d_model)
    if rule.logits_bias:
        shapes[rule.logits_bias] = (1, config.tgt_vocab_size)
    for name, shape in list(shapes.items()):
        if _transposed(family, name):
            shapes[name] = shape[::-1]
    prefix = family.optional_prefix
    if prefix:  # the same tensors under their names without the prefix (GPT-2's original files)
        shapes |= {name.removeprefix(prefix): shape for name, shape in shapes.items() if name.startswith(prefix)}
    return shapes


def _transposed(family: Family, name: str) -> bool:
    """Whether ``family`` stores its tensor ``name`` as (in, out), the transpose of ours (GPT-2's Conv1D)."""
    return any(name.endswith(suffix) for suffix in family.transposed)


def _as_ours(family: Family, tensors: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """``tensors`` with every name under the family's prefix (where its files may leave it out) and every
    transposed matrix turned into ours (a contiguous copy, the stored one dropped)."""
    prefix = family.optional_prefix
    named = {(prefix + name if prefix and not name.startswith(prefix) and name != family.embeddings.head
              else name): tensor for name, tensor in tensors.items()}
    return {name: tensor.t().contiguous() if _transposed(family, name) else tensor for name, tensor in named.items()}


def to_theirs(family: Family, state: Mapping[str, Tensor], config: TransformerConfig) -> dict[str, Tensor]:
    """Our state dict -> ``family``'s names (the inverse of ``weights_of``; a tied matrix under each of its
    names), so that ``transformers`` can load our weights (the tests' reference models)."""
    rule = family.embeddings
    theirs: dict[str, Tensor] = {}
    if rule.logits_bias:
        theirs[rule.logits_bias] = state["generator.bias"][None]
    for name, candidates in embedding_names(family, config).items():
        for candidate in candidates:
            theirs[candidate] = state[name]
    if not config.generator_tied:
        theirs[rule.head] = state["generator.weight"]
    for name, target in family.layer_names(config).items():
        if isinstance(target, tuple):
            rows = part_rows(name, state[name].shape[0], len(target), config)
            theirs.update(zip(target, state[name].split(rows), strict=True))
        else:
            theirs[target] = state[name].t().contiguous() if _transposed(family, target) else state[name]
    return theirs
