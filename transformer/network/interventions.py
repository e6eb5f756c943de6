"""One way to change a run: an edit replaces a site's value, for the forwards inside a ``with`` block.

    with intervene({"decoder.1.cross_attn.heads": lambda heads: heads * gate}):
        logits = model(src_ids, tgt_ids)
    with intervene({("decoder.1.cross_attn.heads", 2): lambda head: head * 0}):   # one head: an index
        logits = model(src_ids, tgt_ids)

The trace reads a run; this writes one, at the same names: every site of sites.py (the table below, built
from its declarations), any layer number. A key ``(name, i)`` edits ``value[:, i]`` only: the head ``i`` of
an attention site, the position ``i`` of a stream. Ablation (``ablate=``, heads off), activation patching,
value zeroing and the gates of gradient importance are all edits of these sites.

The edits live in a context variable, not on the model: one model serves every session of the app, each
in a thread of its own, and an edit made in one thread never reaches a forward of another (threads start
with their own context). Blocks nest; an inner edit of the same site applies after the outer one.

"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from torch import Tensor

from .sites import _ACTIVE, Edit, check_site, site_table

__doc__ += site_table()  # the table of every site, from its one declaration

__all__ = ["Edit", "check_site", "intervene"]

Key = str | tuple[str, int]


@contextmanager
def intervene(edits: Mapping[Key, Edit]) -> Iterator[None]:
    """Apply ``edits[site](value)`` at each named site of every forward run inside the block (this thread).

    A key is a site's name, or ``(name, index)`` to edit ``value[:, index]`` only (a head, a position)."""
    named: list[tuple[str, Edit]] = []
    for key, edit in edits.items():
        name, index = key if isinstance(key, tuple) and len(key) == 2 else (key, None)
        check_site(name, index)
        if not callable(edit):
            raise ValueError(f"the edit of {key!r} must be a function of the value, got {type(edit).__name__}")
        named.append((name, edit if index is None else _at_index(edit, index)))
    active = dict(_ACTIVE.get() or {})
    for name, edit in named:
        active[name] = (*active.get(name, ()), edit)
    token = _ACTIVE.set(active)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def _at_index(edit: Edit, index: int) -> Edit:
    """An edit of the whole value that applies ``edit`` to ``value[:, index]`` and keeps the rest."""

    def edit_one(value: Tensor) -> Tensor:
        out = value.clone()
        out[:, index] = edit(value[:, index])
        return out

    return edit_one
