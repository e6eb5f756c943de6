"""One way to change a run: named sites where an edit replaces a value, for the calls inside a ``with`` block.

    with intervene({"decoder.1.cross_attn.heads": lambda heads: heads * gate}):
        logits = model(src_ids, tgt_ids)

The trace reads a run; this writes one. Sites (B batch, H heads, T / T_k query / key length):

=================================  ==================  ==============================================
site                               shape               what
=================================  ==================  ==============================================
src.tokens / tgt.tokens            (B, T, D)           token embeddings, before the sqrt(d_model) scale
{stack}.{l}.{attention}.values     (B, H, T_k, d_k)    each head's value vectors V = x W^V
{stack}.{l}.{attention}.heads      (B, H, T, d_k)      each head's output, before Concat and W^O
encoder.{l}.output                 (B, S, D)           an encoder layer's output
decoder.{l}.output                 (B, T, D)           a decoder layer's output
=================================  ==================  ==============================================

with ``{stack}.{l}.{attention}`` an attention sub-layer's dotted name (``trace.attention_name``):
``encoder.0.self_attn``, ``decoder.2.self_attn``, ``decoder.2.cross_attn``. Ablation (``ablate=``, heads
off), activation patching, value zeroing and the gates of gradient importance are all edits of these sites.

The edits live in a context variable, not on the model: one model serves every session of the app, each
in a thread of its own, and an edit made in one thread never reaches a forward of another (threads start
with their own context). Blocks nest; an inner edit of the same site applies after the outer one.
Outside any block a site costs one lookup of that variable.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

from torch import Tensor

Edit = Callable[[Tensor], Tensor]

_SITE = re.compile(r"^(?:(?:src|tgt)\.tokens"
                   r"|(?:encoder\.\d+\.self_attn|decoder\.\d+\.(?:self|cross)_attn)\.(?:values|heads)"
                   r"|(?:encoder|decoder)\.\d+\.output)$")
_ACTIVE: ContextVar[dict[str, tuple[Edit, ...]] | None] = ContextVar("transformer_interventions", default=None)


def check_site(name: str) -> str:
    """ValueError unless ``name`` is a site of the table above (any layer number)."""
    if not isinstance(name, str) or not _SITE.match(name):
        raise ValueError(f"{name!r} is not an intervention site: use src.tokens, tgt.tokens, "
                         "<attention>.values, <attention>.heads (e.g. decoder.1.cross_attn.heads) or "
                         "encoder.<l>.output / decoder.<l>.output")
    return name


@contextmanager
def intervene(edits: Mapping[str, Edit]) -> Iterator[None]:
    """Apply ``edits[site](value)`` at each named site of every forward run inside the block (this thread)."""
    for name, edit in edits.items():
        check_site(name)
        if not callable(edit):
            raise ValueError(f"the edit of {name!r} must be a function of the value, got {type(edit).__name__}")
    active = dict(_ACTIVE.get() or {})
    for name, edit in edits.items():
        active[name] = (*active.get(name, ()), edit)
    token = _ACTIVE.set(active)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def at_site(name: str, value: Tensor) -> Tensor:
    """What the network calls at each site: the value, edited where a block asks for it."""
    active = _ACTIVE.get()
    if active is None or name not in active:
        return value
    for edit in active[name]:
        value = edit(value)
    return value
