"""A JSON config's fields read by type: each value checked where it is read, so a malformed one is refused naming
the file and the field.

A config.json or generation_config.json may come from a visitor. Read with ``float(document.get(...))`` or
``int(...)``, a ``dropout`` of ``{}`` raised TypeError, an ``n_positions`` of ``Infinity`` (Python's parser accepts
it) OverflowError, a list TypeError: errors that escaped the loader's ``CheckpointError`` and named no field.
``Fields`` reads each value as the type the field has, within its range, and raises ``FieldError`` (a ValueError,
which the loader turns into ``CheckpointError``) otherwise. A missing or null field takes its default, as
``transformers``' config classes give it. Imports nothing but the standard library: the Model page reads configs
before torch is imported (family_config.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

_REQUIRED = object()


class FieldError(ValueError):
    """A field of a JSON config missing, of the wrong type, or out of its range; the message names file and field."""


def short(value: Any, limit: int = 40) -> str:
    """``repr(value)``, at most ``limit`` characters: what a message may quote of a value from a visitor's file."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Fields:
    """The fields of one JSON object (``document``, read from ``file``), each read by type; a wrong one raises
    ``error`` (a ValueError class: ``FieldError``, or the caller's own, e.g. ``CheckpointError``)."""

    def __init__(self, document: Mapping[str, Any], file: str = "config.json", family: str = "",
                 error: type[ValueError] = FieldError) -> None:
        self.document, self.file, self.error = document, file, error
        self.where = f"the {family} {file}" if family else file

    def _value(self, name: str, default: Any) -> Any:
        value = self.document.get(name)
        if value is None:
            if default is _REQUIRED:
                raise self.error(f"{self.where} has no {name!r}")
            return default
        return value

    def _wrong(self, name: str, what: str, value: Any) -> ValueError:
        return self.error(f"{self.where}: {name} must be {what}, got {short(value)}")

    def integer(self, name: str, default: Any = _REQUIRED, *, low: int = 0) -> int:
        """An int >= ``low`` (not a bool, a float nor a string)."""
        value = self._value(name, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise self._wrong(name, f"an integer >= {low}", value)
        return value

    def number(self, name: str, default: Any = _REQUIRED, *, low: float, high: float,
               low_open: bool = False, high_open: bool = False) -> float:
        """A finite int or float in [low, high] (``low_open`` / ``high_open``: that end excluded), as a float."""
        value = self._value(name, default)
        what = f"a number in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise self._wrong(name, what, value)
        value = float(value)
        if value < low or value > high or (low_open and value == low) or (high_open and value == high):
            raise self._wrong(name, what, value)
        return value

    def flag(self, name: str, default: Any = _REQUIRED) -> bool:
        """true or false."""
        value = self._value(name, default)
        if not isinstance(value, bool):
            raise self._wrong(name, "true or false", value)
        return value

    def text(self, name: str, default: Any = _REQUIRED) -> str:
        """A string."""
        value = self._value(name, default)
        if not isinstance(value, str):
            raise self._wrong(name, "a string", value)
        return value

    def same(self, pairs: tuple[tuple[str, str, str], ...]) -> None:
        """FieldError where an encoder setting (``first``) differs from the decoder's (``second``): this network has
        one ``ours`` for both stacks; ``pairs`` holds (ours, first, second)."""
        for ours, first, second in pairs:
            a, b = self.document.get(first), self.document.get(second)
            if b is not None and a != b:
                raise self.error(f"{self.where}: {first} ({short(a)}) differs from {second} ({short(b)}); this "
                                 f"network has one {ours} for both stacks")
