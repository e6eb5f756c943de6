"""The figure cache (ui/figures/cache.py): equal arguments reuse a figure, any change rebuilds it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
import torch

from ui.charts import heatmap
from ui.figures.cache import FigureCache, content_key

calls: list[tuple] = []


def build(matrix, tokens, *, title=""):
    calls.append((title,))
    return heatmap(matrix, tokens, tokens[: len(matrix)], title=title)


def test_equal_contents_hit_and_any_change_misses() -> None:
    cache = FigureCache()
    calls.clear()
    a = np.eye(2)
    first = cache.get(build, (a, ["x", "y"]), {"title": "t"}, False)
    assert cache.get(build, (a.copy(), ["x", "y"]), {"title": "t"}, False) is first  # equal content, new array
    assert cache.get(build, (torch.eye(2, dtype=torch.float64), ["x", "y"]), {"title": "t"}, False) is first
    changed = a.copy()
    changed[0, 1] = 1e-12
    for args, kwargs in (((changed, ["x", "y"]), {"title": "t"}), ((a, ["x", "z"]), {"title": "t"}),
                         ((a, ["x", "y"]), {"title": "u"}), ((a.astype(np.float32), ["x", "y"]), {"title": "t"})):
        assert cache.get(build, args, kwargs, False) is not first
    assert len(calls) == 5 and (cache.hits, cache.misses) == (2, 5)


def test_clickable_is_its_own_entry_and_leaves_the_plain_figure_alone() -> None:
    cache = FigureCache()
    plain = cache.get(build, (np.eye(2), ["x", "y"]), {}, False)
    clickable = cache.get(build, (np.eye(2), ["x", "y"]), {}, True)
    assert len(plain.data) == 1 and len(clickable.data) == 2
    assert cache.get(build, (np.eye(2), ["x", "y"]), {}, True) is clickable
    assert len(clickable.data) == 2  # not made clickable twice


class Opaque:
    pass


def empty(obj) -> go.Figure:
    return go.Figure()


def test_objects_without_content_are_keyed_by_identity_and_kept_alive() -> None:
    cache = FigureCache()
    one, two = Opaque(), Opaque()
    fig = cache.get(empty, (one,), {}, False)
    assert cache.get(empty, (one,), {}, False) is fig
    assert cache.get(empty, (two,), {}, False) is not fig
    with pytest.raises(ValueError, match="lambda"):
        cache.get(lambda o: go.Figure(), (one,), {}, False)
    key = content_key(one)
    del one
    assert any(key == content_key(entry[1][0]) for entry in cache._entries.values())  # still referenced


def test_frames_and_the_bound() -> None:
    cache = FigureCache(max_entries=2)
    frame = pd.DataFrame({"a": [1, 2]})
    assert content_key(frame) == content_key(frame.copy())
    assert content_key(frame) != content_key(frame.assign(a=[1, 3]))
    lists = pd.DataFrame({"heads_off": [[], [1, 2]]})  # pandas cannot hash lists: their text is used
    assert content_key(lists) == content_key(lists.copy()) != content_key(pd.DataFrame({"heads_off": [[], [1]]}))
    for i in range(3):
        cache.get(build, (np.eye(2) * i, ["x", "y"]), {}, False)
    assert len(cache._entries) == 2
