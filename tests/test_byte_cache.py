"""The analysis cache is bounded by bytes, not by entries."""

from __future__ import annotations

import threading

import pytest

from ui.compute.byte_cache import ByteLRU


def test_entries_are_dropped_least_recently_used_first_beyond_the_budget() -> None:
    cache = ByteLRU(100)
    calls: list[str] = []

    def get(key: str, n_bytes: int) -> str:
        return cache.get_or_compute(key, lambda: calls.append(key) or key.upper(), lambda _: n_bytes)

    assert get("a", 40) == "A" and get("b", 40) == "B"
    assert get("a", 40) == "A" and calls == ["a", "b"]  # a hit, and "a" is now the most recent
    get("c", 40)  # 120 bytes > 100: "b", the least recent, goes
    assert cache.total_bytes == 80 and len(cache) == 2
    get("b", 40)
    assert calls == ["a", "b", "c", "b"]
    assert get("huge", 1000) == "HUGE" and cache.total_bytes <= 100  # returned, never kept
    with pytest.raises(ValueError):
        ByteLRU(0)


def test_get_computes_nothing_and_counts_as_a_use() -> None:
    cache = ByteLRU(100)
    assert cache.get("a") is None and len(cache) == 0
    cache.get_or_compute("a", lambda: "A", lambda _: 40)
    cache.get_or_compute("b", lambda: "B", lambda _: 40)
    assert cache.get("a") == "A"  # now the most recent: "b" goes first
    cache.get_or_compute("c", lambda: "C", lambda _: 40)
    assert cache.get("b") is None and cache.get("a") == "A"


def test_many_threads_keep_the_total_under_the_budget() -> None:
    cache = ByteLRU(10_000)

    def work(offset: int) -> None:
        for i in range(200):
            cache.get_or_compute((offset, i % 50), lambda: bytes(300), len)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert cache.total_bytes <= 10_000 and cache.total_bytes == 300 * len(cache)


def test_the_app_analysis_cache_counts_its_traces(tiny_pipeline) -> None:
    from ui.compute import analysis

    result = analysis.analyse("tiny", "cpu", tiny_pipeline, "abc")
    trace = result.result.trace
    assert analysis.analysis_bytes(result) >= sum(trace[n].numel() * trace[n].element_size() for n in trace) > 0
    assert analysis.analyse("tiny", "cpu", tiny_pipeline, "abc") is result  # cached
