"""Argument checks shared by every part of the package: each raises ValueError with one message.

Importable from anywhere (network, text, training, decoding, the app): it imports nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def check_int(name: str, value: Any, minimum: int) -> int:
    """``value`` if it is an integer >= ``minimum`` (a bool is not an integer here), else ValueError."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def check_choice(name: str, value: Any, choices: Sequence[str]) -> None:
    """ValueError naming the valid choices unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; valid choices: {', '.join(choices)}")
