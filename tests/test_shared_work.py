"""ui.compute.shared_work: a result computed once per key (whichever browser asks first), kept in a bounded
store, nothing kept from work that failed or was stopped, and a second asker waiting for the first."""

from __future__ import annotations

import itertools
import threading

import pytest

from ui.compute.shared_work import shared

_names = itertools.count()


def fresh_store() -> str:
    """A store name no other test uses (the stores live for the process, as on a server)."""
    return f"test-store-{next(_names)}"


def test_a_result_is_computed_once_and_the_least_recently_used_leaves_first() -> None:
    name, calls = fresh_store(), []

    def work(key: str):
        def run(progress):
            progress(0.5, "half")
            calls.append(key)
            return [key]
        return run

    first = shared(name, "a", work("a"), label="L", max_entries=2)
    assert shared(name, "a", work("a"), label="L", max_entries=2) is first and calls == ["a"]
    shared(name, "b", work("b"), label="L", max_entries=2)
    shared(name, "a", work("a"), label="L", max_entries=2)  # "a" used again: "b" is now the oldest
    shared(name, "c", work("c"), label="L", max_entries=2)  # a third key: "b" leaves
    assert calls == ["a", "b", "c"]
    shared(name, "a", work("a"), label="L", max_entries=2)
    shared(name, "b", work("b"), label="L", max_entries=2)
    assert calls == ["a", "b", "c", "b"]


def test_work_that_fails_keeps_nothing_and_the_next_run_starts_again() -> None:
    name = fresh_store()

    def broken(progress):
        raise RuntimeError("stopped half-way")

    with pytest.raises(RuntimeError, match="half-way"):
        shared(name, "k", broken, label="L")
    assert shared(name, "k", lambda progress: 42, label="L") == 42  # not blocked by the failed run


def test_a_second_asker_waits_for_the_first_instead_of_computing_again() -> None:
    name, started, release, calls = fresh_store(), threading.Event(), threading.Event(), []

    def slow(progress):
        calls.append("computed")
        started.set()
        assert release.wait(10)
        return object()

    results: list = []
    first = threading.Thread(target=lambda: results.append(shared(name, "k", slow, label="L")))
    first.start()
    assert started.wait(10)
    second = threading.Thread(target=lambda: results.append(shared(name, "k", slow, label="L")))
    second.start()
    second.join(0.3)
    assert second.is_alive(), "the second asker waits while the first computes"
    release.set()
    first.join(10)
    second.join(10)
    assert calls == ["computed"] and len(results) == 2 and results[0] is results[1]
