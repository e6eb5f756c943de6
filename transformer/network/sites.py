"""Every site of the network, declared once: one name to read it (``Trace``) and to edit it (``intervene``).

As in TransformerLens, where ``blocks.0.attn.hook_pattern`` is both what you read and what you hook, each
value the forward computes passes through one call,

    x = site("encoder.0.output", x, trace)

which hands back the value as an active ``intervene`` block edits it (interventions.py) and records it in
``trace`` when the caller passed one (trace.py). ``SITES`` below declares every such name with its shape;
the trace's table, the names ``intervene`` accepts and the table of docs/architecture.md all come from it.
A head is an index on its site: head 2 of ``decoder.1.cross_attn.heads`` is ``value[:, 2]``, read as
``trace["decoder.1.cross_attn.heads", 2]`` and edited as ``intervene({("decoder.1.cross_attn.heads", 2): f})``.

Edits live in a context variable, not on the model: one model serves every session of the app, each in a
thread of its own, and an edit made in one thread never reaches a forward of another.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

from torch import Tensor

if TYPE_CHECKING:
    from .trace import Trace

Edit = Callable[[Tensor], Tensor]

# The three kinds of attention and where each lives in the model.
ATTENTION_KINDS = {
    "encoder": ("encoder", "self_attn"),
    "decoder": ("decoder", "self_attn"),
    "cross": ("decoder", "cross_attn"),
}


def attention_name(kind: str, layer: int) -> str:
    """The dotted name of an attention sub-layer: ("cross", 1) -> "decoder.1.cross_attn"."""
    if kind not in ATTENTION_KINDS:
        raise ValueError(f"attention kind must be one of {sorted(ATTENTION_KINDS)}, got {kind!r}")
    stack, sublayer = ATTENTION_KINDS[kind]
    return f"{stack}.{layer}.{sublayer}"


@dataclass(frozen=True)
class SiteKind:
    """One row of the table: a family of sites, its shape, what it holds and what an index on it names."""

    pattern: str  # with the placeholders of PLACEHOLDERS, e.g. "{attn}.heads"
    shape: str  # B batch, H heads, S source and T target length, L either, D d_model, V vocabulary
    what: str
    index: str  # what value[:, i] is ("head", "position"), or "" where an index names nothing


# Placeholders of the patterns: how they read in the table, and what they match.
PLACEHOLDERS = {
    "{side}": ("src|tgt", r"(?:src|tgt)"),
    "{stack}": ("encoder|decoder", r"(?:encoder|decoder)"),
    "{l}": ("layer number", r"\d+"),
    "{attn}": ("encoder.{l}.self_attn, decoder.{l}.self_attn, decoder.{l}.cross_attn",
               r"(?:encoder\.\d+\.self_attn|decoder\.\d+\.(?:self|cross)_attn)"),
    "{sub}": ("{attn} or {stack}.{l}.feed_forward",
              r"(?:encoder\.\d+\.(?:self_attn|feed_forward)|decoder\.\d+\.(?:self_attn|cross_attn|feed_forward))"),
}

SITES: tuple[SiteKind, ...] = (
    SiteKind("{side}.ids", "(B, L)", "token ids", "position"),
    SiteKind("{side}.tokens", "(B, L, D)", "token embeddings, before the sqrt(d_model) scale", "position"),
    SiteKind("{side}.embed", "(B, L, D)", "token embeddings * sqrt(d_model)", "position"),
    SiteKind("{side}.pos", "(L, D)", "positional encoding (sinusoidal or learned; zeros where positions are "
             "relative, T5, or rotary; (B, L, D) for a left-padded batch of a decoder-only model)", ""),
    SiteKind("{side}.input", "(B, L, D)", "embed + pos (then the embedding norm, BART/mBART), after dropout: the "
             "first layer's input", "position"),
    SiteKind("{stack}.position_bias", "(1, H, L_q, L_k)", "relative position bias each head adds to its "
             "self-attention scores, every layer of the stack (T5 only)", "head"),
    SiteKind("encoder.mask", "(B, 1, 1, S)", "padding mask of encoder self-attention (True = may attend)", ""),
    SiteKind("decoder.mask", "(B, 1, T, T)", "causal & padding mask of decoder self-attention", ""),
    SiteKind("decoder.sliding_mask", "(B, 1, T, T)", "the same within the sliding window: the mask of the "
             "layers of type \"sliding\" (Mistral, Gemma)", ""),
    SiteKind("cross.mask", "(B, 1, 1, S)", "memory mask of cross-attention", ""),
    SiteKind("{attn}.queries", "(B, H, L_q, d_k)", "each head's queries Q = x W^Q, turned by their position "
             "(rotary positions only)", "head"),
    SiteKind("{attn}.keys", "(B, H_kv, L_k, d_k)", "each key/value head's keys K = x W^K, turned by their "
             "position (rotary positions only)", "head"),
    SiteKind("{attn}.values", "(B, H_kv, L_k, d_k)", "each key/value head's value vectors V = x W^V (H_kv = H "
             "but with grouped-query attention)", "head"),
    SiteKind("{attn}.kv_heads", "(H,)", "the key/value head each query head reads, h // (H / H_kv) (grouped-query "
             "attention only)", ""),
    SiteKind("{attn}.scores", "(B, H, L_q, L_k)", "QK^T / sqrt(d_k) (T5: QK^T + position_bias; Gemma-2: "
             "soft-capped), masked cells -inf", "head"),
    SiteKind("{attn}.weights", "(B, H, L_q, L_k)", "softmax of the scores", "head"),
    SiteKind("{attn}.heads", "(B, H, L_q, d_k)", "each head's output, before Concat and W^O", "head"),
    SiteKind("{sub}.stream", "(B, L, D)", "what the sub-layer reads and is added to (traced with "
             "Trace(sublayers=True))", "position"),
    SiteKind("{sub}.update", "(B, L, D)", "the sub-layer's output, before dropout and the residual sum "
             "(traced with Trace(sublayers=True))", "position"),
    SiteKind("{stack}.{l}.output", "(B, L, D)", "output of layer l", "position"),
    SiteKind("{stack}.output", "(B, L, D)", "after the final norm of the stack (encoder: the memory; T5 v1.0's "
             "decoder: times d_model^-0.5)", "position"),
    SiteKind("logits", "(B, T, V)", "generator output (pre-softmax)", "position"),
)
SUBLAYER_SITES = (".stream", ".update")  # recorded only by Trace(sublayers=True): the app keeps its traces


def _regex(pattern: str) -> str:
    out = re.escape(pattern)
    for placeholder, (_, regex) in PLACEHOLDERS.items():
        out = out.replace(re.escape(placeholder), regex)
    return out


_KINDS = [(re.compile(f"^{_regex(kind.pattern)}$"), kind) for kind in SITES]


def site_kind(name: str) -> SiteKind | None:
    """The declaration ``name`` belongs to, or None when it names no site."""
    if isinstance(name, str):
        for regex, kind in _KINDS:
            if regex.match(name):
                return kind
    return None


def check_site(name: str, index: int | None = None) -> str:
    """ValueError unless ``name`` is a declared site (any layer number) and ``index``, if any, names something."""
    kind = site_kind(name)
    if kind is None:
        raise ValueError(f"{name!r} is not a site of the network; the sites are:\n{site_table()}")
    if index is not None and not (kind.index and isinstance(index, int) and not isinstance(index, bool)):
        what = f"an index on {name} is a {kind.index}: an int" if kind.index else f"{name} takes no index"
        raise ValueError(f"{what}, got {index!r}")
    return name


def site_table() -> str:
    """The declarations as a Markdown table (docs/architecture.md holds this very text; a test checks it)."""
    rows = ["| site | shape | what | an index names |", "|---|---|---|---|"]
    rows += [f"| `{k.pattern}` | {k.shape} | {k.what} | {k.index or '—'} |" for k in SITES]
    keys = "; ".join(f"`{p}`: {text}" for p, (text, _) in PLACEHOLDERS.items())
    return "\n".join(rows) + f"\n\nwith {keys}."


_ACTIVE: ContextVar[dict[str, tuple[Edit, ...]] | None] = ContextVar("transformer_site_edits", default=None)


def site(name: str, value: Tensor, trace: Trace | None = None) -> Tensor:
    """What the network calls at each site: ``value`` as the active edits of ``name`` change it, recorded in
    ``trace``. Outside any ``intervene`` block and without a trace, one lookup of a context variable."""
    active = _ACTIVE.get()
    if active is not None and name in active:
        for edit in active[name]:
            value = edit(value)
    if trace is not None:
        trace.record(name, value)
    return value


def edited(*names: str) -> bool:
    """Whether an active ``intervene`` block edits any of ``names`` (attention then computes its weights)."""
    active = _ACTIVE.get()
    return active is not None and any(name in active for name in names)
