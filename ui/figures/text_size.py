"""How wide a piece of chart text is in the browser, without a browser: per-character widths of the
Source Sans font Streamlit's charts use (measured in chromium at 12 px: digits and most lower-case
letters 0.5 em, "i" 0.25 em, "m" 0.83 em), rounded up a little.

Plotly reads its text as HTML: tags (``<b>``) take no room, ``<br>`` breaks lines and entities
(``&lt;``) are the characters they stand for. Light on purpose (no Plotly, no numpy): the Model page's
diagram uses it before the heavy imports.
"""

from __future__ import annotations

import html
import re

TICK_FONT_PX = 12  # the Streamlit theme's tick labels (read from the browser's _fullLayout)
LINE_HEIGHT = 1.3  # a text line's height per px of font size

_TAG = re.compile(r"<[^>]+>")
_NARROW = set("iljtfrI.,;:!|'` ()[]")
_WIDE = set("mwMW@%")
_MEDIUM = set("<>/\\=+*^~\"")
_BLOCK = "\u2581"  # SentencePiece's word-start mark, wider than a letter


def text_width(text: str, size: float) -> float:
    """Pixel width of Plotly text (tags like <b> ignored, <br> breaks lines) at font ``size``."""
    lines = re.split(r"<br\s*/?>", str(text), flags=re.IGNORECASE)
    return max((_line_width(html.unescape(_TAG.sub("", line)), size) for line in lines), default=0.0)


def _line_width(line: str, size: float) -> float:
    em = 0.0
    for char in line:
        if char in _NARROW:
            em += 0.3
        elif char in _WIDE or char == _BLOCK:
            em += 0.85
        elif char.isupper():
            em += 0.64
        elif char == "-":
            em += 0.36
        elif char in _MEDIUM:
            em += 0.45
        else:
            em += 0.53
    return em * size


def text_lines(text: str) -> int:
    return 1 + len(re.findall(r"<br\s*/?>", str(text), flags=re.IGNORECASE))
