"""Built Plotly figures, reused when a rerun draws the same chart again.

Building a figure is most of a warm rerun: Plotly validates every property of every trace (the
Attention page's grid of all heads took 66 ms to build and 12 ms to serialise). A rerun after a
click changes one or two charts, so ``chart(builder, *args)`` returns the figure built before
for the same builder and the same arguments, compared by content: arrays, tensors and frames by
a hash of their bytes, plain values by value, other objects (a ``Trace``) by identity, kept alive
by the entry so that their identity cannot be reused. The chart functions of ``ui/charts`` are
pure, so equal arguments give an equal figure; the figures are shared by every session and must
not be changed (``ui.figures.projector`` copies before restyling, Streamlit only reads them).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ui.charts import clickable_cells, clickable_panels
from ui.figures.grid import side_by_side
from ui.figures.margins import fit_margins

MAX_FIGURES = 256


def content_key(value: Any) -> Any:
    """A hashable key equal for equal contents (see the module docstring)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor, without importing torch here
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value)
        return ("array", data.shape, data.dtype.str, hashlib.blake2b(data.tobytes(), digest_size=16).digest())
    if isinstance(value, pd.DataFrame):
        try:
            data = pd.util.hash_pandas_object(value, index=True).to_numpy().tobytes()
        except TypeError:  # cells pandas cannot hash (lists): their text instead
            data = value.to_csv().encode()
        return ("frame", tuple(map(str, value.columns)), hashlib.blake2b(data, digest_size=16).digest())
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(content_key(v) for v in value))
    if isinstance(value, Mapping):
        return ("map", tuple((str(k), content_key(v)) for k, v in value.items()))
    if callable(value) and "<" in getattr(value, "__qualname__", "<"):
        raise ValueError(f"cache only module-level chart functions, not {value!r}")
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    return ("id", type(value).__qualname__, id(value))


class FigureCache:
    """A thread-safe LRU of built figures, keyed by builder and argument contents."""

    def __init__(self, max_entries: int = MAX_FIGURES) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[Any, tuple[go.Figure, tuple, dict]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, builder: Callable[..., go.Figure], args: tuple, kwargs: dict, clickable: bool | str) -> go.Figure:
        if "<" in builder.__qualname__:  # a lambda or a nested function: its name does not tell it apart
            raise ValueError(f"cache only module-level chart functions, not {builder.__qualname__}")
        key = (builder.__module__, builder.__qualname__, clickable, content_key(args), content_key(kwargs))
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return entry[0]
        figure = builder(*args, **kwargs)
        if clickable == "panels":
            figure = clickable_panels(figure, [a.text for a in figure.layout.annotations] or None)
        elif clickable:
            figure = clickable_cells(figure)
        fit_margins(figure)  # before anyone else holds it: the browser then lays it out once
        with self._lock:
            self.misses += 1
            self._entries[key] = (figure, args, kwargs)  # the arguments stay alive with their figure
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return figure


_CACHE = FigureCache()


def chart(builder: Callable[..., go.Figure], *args: Any, clickable: bool | str = False, **kwargs: Any) -> go.Figure:
    """``builder(*args, **kwargs)``, built once for equal arguments and shared: do not change the figure it
    returns. ``clickable``: True for a marker per heatmap cell (``clickable_cells``), "panels" for one per
    heatmap panel (``clickable_panels``, for grids of many)."""
    return _CACHE.get(builder, args, kwargs, clickable)


Panel = tuple[Callable[..., go.Figure], tuple, dict]


def panel(builder: Callable[..., go.Figure], *args: Any, **kwargs: Any) -> Panel:
    """One panel of ``panels``: a chart function and its arguments, not yet built."""
    return (builder, args, kwargs)


def panels(specs: list[Panel], *, cols: int = 2, clickable: bool = False) -> go.Figure:
    """``side_by_side`` of the panels' figures, built once for equal panels and arguments."""
    return chart(_side_by_side_of, tuple(specs), cols=cols, clickable=clickable)


def _side_by_side_of(specs: tuple[Panel, ...], cols: int) -> go.Figure:
    return side_by_side([builder(*args, **kwargs) for builder, args, kwargs in specs], cols=cols)
