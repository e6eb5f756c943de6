"""Trace: everything one forward call computed, under stable dotted names.

Pass ``trace=Trace()`` to ``Transformer.forward`` (or ``encode``/``decode``) and
the call fills it; the module itself never stores anything, so one cached model
can serve many users at once. Tensors are detached copies of what the forward
used; recording them does not change the result. ``Trace(keep_graph=True)`` keeps
them in the autograd graph instead (same values), for methods that need gradients
with respect to intermediates such as the attention weights (explain/relevancy.py).
``Trace(sublayers=True)`` also records each sub-layer's residual stream and update
(explain/residual.py); off by default, since the app keeps its traces.

Names: every site of the network (sites.py declares them, and the table below is built from that
declaration); the same names ``intervene`` edits. ``trace["decoder.1.cross_attn.heads", 2]`` reads index 2
of a site (``value[:, 2]``: here head 2). ``.stream`` and ``.update`` are kept only by ``Trace(sublayers=True)``.

"""

from __future__ import annotations

from collections.abc import Iterator

from torch import Tensor

from .sites import ATTENTION_KINDS, SUBLAYER_SITES, attention_name, site_table

__doc__ += site_table()  # the table of every site, from its one declaration

__all__ = ["ATTENTION_KINDS", "Trace", "attention_name"]


class Trace:
    """A record of one forward call: a mapping from stable names to (by default detached) tensors."""

    def __init__(self, keep_graph: bool = False, sublayers: bool = False) -> None:
        self._records: dict[str, Tensor] = {}
        self.keep_graph = keep_graph  # record the tensors themselves, not detached copies
        self.sublayers = sublayers  # also each sub-layer's stream and update (the residual stream)

    def record(self, name: str, value: Tensor) -> None:
        """Keep ``value`` under ``name`` (sites.site calls this); a sub-layer's stream and update only with
        ``sublayers=True``."""
        if not self.sublayers and name.endswith(SUBLAYER_SITES):
            return
        self._records[name] = value if self.keep_graph else value.detach()

    def __getitem__(self, key: str | tuple[str, int]) -> Tensor:
        """``trace[name]``, or ``trace[name, i]`` for ``value[:, i]`` (head i of an attention site)."""
        name, index = key if isinstance(key, tuple) else (key, None)
        try:
            value = self._records[name]
        except KeyError:
            raise KeyError(f"nothing recorded as {name!r}; recorded: {', '.join(self._records)}") from None
        return value if index is None else value[:, index]

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
