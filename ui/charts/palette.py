"""One look per attribution method, the same in every chart that draws methods side by side.

Plotly's colour cycle gave the twelve maps of the Explain page ten colours in turn, so attention and ALTI+ were the
same dark blue and rollout and "ALTI+ · layer 1" the same light blue, and the pale half of the cycle washed out on
a projector. Here each method of ``transformer.explain.attribution.REGISTRY`` (``METHOD_ORDER``, which a test keeps
equal to it) has its own colour (Okabe & Ito's colour-blind-safe set and Tol's indigo, olive and wine, none pale),
its own bar pattern, line dash and marker symbol, so two methods differ in greyscale print too. A layer's own view
("alti · layer 1", ``ui.compute.explain.layer_view``) keeps its method's colour and takes a dotted look of its own.
"""

from __future__ import annotations

from typing import Any

METHOD_ORDER = ("attention", "rollout", "relevancy", "norm", "saliency", "input_x_gradient", "integrated_gradients",
                "occlusion", "value_zeroing", "alti")
COLOURS = ("#0068c9", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#332288", "#999933", "#882255",
           "#1a1a1a")
# bar patterns (Plotly's eight shapes; the two that repeat one differ in density), line dashes and marker symbols
PATTERNS = (("", 0.3), ("/", 0.3), ("\\", 0.3), ("x", 0.3), ("-", 0.3), ("|", 0.3), ("+", 0.3), (".", 0.3),
            ("/", 0.6), ("\\", 0.6))
DASHES = ("solid", "dot", "dash", "longdash", "dashdot", "longdashdot", "8px,3px,2px,3px,2px,3px", "2px,6px",
          "12px,4px", "4px,2px,4px,8px")
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "cross", "star", "triangle-down", "pentagon",
           "hexagram")
LAYER_VIEW = " · layer "  # ui.compute.explain.layer_view's separator
OTHER = "#7f7f7f"  # a key that is no method of the registry


def _index(key: str) -> tuple[int | None, int | None]:
    """(the method's place in ``METHOD_ORDER`` or None, the layer of a layer's own view or None)."""
    method, _, layer = key.partition(LAYER_VIEW)
    place = METHOD_ORDER.index(method) if method in METHOD_ORDER else None
    return place, int(layer) if layer.isdigit() else None


def method_colour(key: str) -> str:
    """The colour of a method's map (a layer's own view: its method's)."""
    place, _ = _index(key)
    return OTHER if place is None else COLOURS[place]


def bar_style(key: str) -> dict[str, Any]:
    """``marker`` of a method's bars: its colour and pattern; a layer's own view: its method's colour, dotted, paler
    by layer so that two layers' views differ."""
    place, layer = _index(key)
    if place is None:
        return {"color": OTHER}
    if layer is not None:
        return {"color": COLOURS[place], "opacity": max(0.45, 0.8 - 0.15 * layer),
                "pattern": {"shape": ".", "solidity": 0.5, "fgcolor": "white"}}
    shape, solidity = PATTERNS[place]
    return {"color": COLOURS[place], "pattern": {"shape": shape, "solidity": solidity, "fgcolor": "white"}}


def line_style(key: str) -> dict[str, Any]:
    """``line`` and ``marker`` of a method's line (Plotly keyword arguments of go.Scatter): its colour, dash and
    symbol; a layer's own view: its method's colour and symbol, open, dotted."""
    place, layer = _index(key)
    if place is None:
        return {"line": {"color": OTHER}, "marker": {"color": OTHER}}
    colour = COLOURS[place]
    if layer is not None:
        return {"line": {"color": colour, "dash": "dot"}, "marker": {"color": colour,
                                                                        "symbol": f"{SYMBOLS[place]}-open"}}
    return {"line": {"color": colour, "dash": DASHES[place]}, "marker": {"color": colour, "symbol": SYMBOLS[place]}}
