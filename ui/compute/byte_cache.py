"""A least-recently-used cache bounded by bytes, shared by every session of the server.

``st.cache_resource`` bounds a cache by its number of entries, but one entry can be 0.1 MB (a
shipped model's trace of a short input) or hundreds of MB (a large uploaded model's trace of a
500-character input, with every head's scores and weights). ``ByteLRU`` keeps entries while their
total size stays under a budget and drops the least recently used ones beyond it. A lock makes
it safe for the server's session threads; a value is computed outside the lock (two sessions
asking for the same new key at once may both compute it; the second result is kept).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any


class ByteLRU:
    """``get_or_compute(key, compute, size)``: the cached value, or ``compute()`` stored with ``size(value)`` bytes."""

    def __init__(self, budget_bytes: int) -> None:
        if budget_bytes <= 0:
            raise ValueError(f"budget_bytes must be positive, got {budget_bytes}")
        self.budget_bytes = budget_bytes
        self._entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.total_bytes = 0

    def get_or_compute(self, key: Hashable, compute: Callable[[], Any], size: Callable[[Any], int]) -> Any:
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key][0]
        value = compute()
        n_bytes = int(size(value))
        with self._lock:
            if key in self._entries:
                self.total_bytes -= self._entries.pop(key)[1]
            if n_bytes <= self.budget_bytes:  # a value larger than the whole budget is returned, not kept
                self._entries[key] = (value, n_bytes)
                self.total_bytes += n_bytes
            while self.total_bytes > self.budget_bytes:
                self.total_bytes -= self._entries.popitem(last=False)[1][1]
        return value

    def get(self, key: Hashable) -> Any | None:
        """The cached value (now the most recently used), or None when there is none: nothing is computed."""
        with self._lock:
            if key not in self._entries:
                return None
            self._entries.move_to_end(key)
            return self._entries[key][0]

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.total_bytes = 0
