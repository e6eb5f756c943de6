"""Trace: everything one forward call computed, under stable dotted names.

Pass ``trace=Trace()`` to ``Transformer.forward`` (or ``encode``/``decode``) and
the call fills it; the module itself never stores anything, so one cached model
can serve many users at once. Tensors are detached copies of what the forward
used; recording them does not change the result. ``Trace(keep_graph=True)`` keeps
them in the autograd graph instead (same values), for methods that need gradients
with respect to intermediates such as the attention weights (explain/relevancy.py).
``Trace(sublayers=True)`` also records each sub-layer's residual stream and update
(explain/residual.py); off by default, since the app keeps its traces.

Names (B batch, H heads, S source length, T target length, D d_model, V vocab):

===============================  ===================  =====================================
name                             shape                what
===============================  ===================  =====================================
src.ids / tgt.ids                (B, S) / (B, T)      token ids
src.embed / tgt.embed            (B, S, D)            token embedding * sqrt(d_model)
src.pos / tgt.pos                (S, D)               sinusoidal positional encoding
src.input / tgt.input            (B, S, D)            their sum (after dropout)
encoder.mask                     (B, 1, 1, S)         padding mask of encoder self-attention
decoder.mask                     (B, 1, T, T)         causal & padding mask of decoder self-attention
cross.mask                       (B, 1, 1, S)         memory mask of cross-attention
encoder.{l}.self_attn.scores     (B, H, S, S)         QK^T / sqrt(d_k), masked cells -inf
encoder.{l}.self_attn.weights    (B, H, S, S)         softmax of the scores
encoder.{l}.output               (B, S, D)            output of encoder layer l
decoder.{l}.self_attn.*          (B, H, T, T)         decoder masked self-attention
decoder.{l}.cross_attn.*         (B, H, T, S)         encoder-decoder attention
decoder.{l}.output               (B, T, D)            output of decoder layer l
{stack}.{l}.{sub}.stream         (B, S|T, D)          sublayers=True: what sub-layer sub (self_attn,
                                                      cross_attn, feed_forward) reads and is added to
{stack}.{l}.{sub}.update         (B, S|T, D)          sublayers=True: that sub-layer's output
encoder.output / decoder.output  (B, S|T, D)          after the final LayerNorm of the stack
logits                           (B, T, V)            generator output (pre-softmax)
===============================  ===================  =====================================

Masks follow ``masks.py``: True = may attend.
"""

from __future__ import annotations

from collections.abc import Iterator

from torch import Tensor

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


class Trace:
    """A record of one forward call: a mapping from stable names to (by default detached) tensors."""

    def __init__(self, keep_graph: bool = False, sublayers: bool = False) -> None:
        self._records: dict[str, Tensor] = {}
        self.keep_graph = keep_graph  # record the tensors themselves, not detached copies
        self.sublayers = sublayers  # also each sub-layer's stream and update (the residual stream)

    def record(self, name: str, value: Tensor) -> None:
        self._records[name] = value if self.keep_graph else value.detach()

    def __getitem__(self, name: str) -> Tensor:
        try:
            return self._records[name]
        except KeyError:
            raise KeyError(f"nothing recorded as {name!r}; recorded: {', '.join(self._records)}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._records

    def __iter__(self) -> Iterator[str]:
        return iter(self._records)

    def __len__(self) -> int:
        return len(self._records)

    def names(self) -> list[str]:
        return list(self._records)

    def attention(self, kind: str, layer: int) -> Tensor:
        """Attention weights after softmax, (B, H, T_q, T_k), of "encoder" | "decoder" | "cross"."""
        return self[f"{attention_name(kind, layer)}.weights"]

    def scores(self, kind: str, layer: int) -> Tensor:
        """Scaled scores QK^T / sqrt(d_k) before softmax, masked cells -inf: (B, H, T_q, T_k)."""
        return self[f"{attention_name(kind, layer)}.scores"]

    def n_layers(self, stack: str) -> int:
        """How many layers of "encoder" or "decoder" this trace recorded."""
        prefix = f"{stack}."
        layers = {name.split(".")[1] for name in self._records if name.startswith(prefix)}
        return sum(1 for layer in layers if layer.isdigit())

    def __repr__(self) -> str:
        return f"Trace({len(self)} records)"
