"""Text as the pipeline takes it: control characters stripped, outer whitespace removed (pipeline.py's
module docstring says why)."""

from __future__ import annotations

import unicodedata

_WHITESPACE_CONTROLS = {"\t": " ", "\n": " ", "\r": " ", "\x0b": " ", "\x0c": " "}


def clean_text(text: str) -> str:
    """The text with control characters stripped (see the module docstring) and outer whitespace removed.

    Raises TypeError for a non-string and ValueError when nothing is left to translate.
    """
    if not isinstance(text, str):
        raise TypeError(f"text to translate must be a string, got {type(text).__name__}")
    kept = []
    for char in text:
        if char in _WHITESPACE_CONTROLS:
            kept.append(" ")
        elif unicodedata.category(char) != "Cc":
            kept.append(char)
    cleaned = "".join(kept).strip()
    if not cleaned:
        raise ValueError("nothing to translate: the text is empty or holds only whitespace/control characters")
    return cleaned
