"""The heavy-work pool (``POOL``): at most ``settings.heavy_workers()`` computations at once, server-wide, and fair.

``ui/compute/shared_work.py`` runs every costly computation of public mode through it (the Heads page's statistics
and pruning curves, the Explain page's AER, randomization check and costly methods on a large model). Fair means:

- **One job per session in the queue.** A session that asks again while it waits (its input changed, a click
  started a new script run) takes its first request's place in line, and that request leaves (``Superseded``: a
  stale script run, which ends quietly). A run stopped while it waits (Streamlit stops a run at its bar's next
  update when the user clicks) leaves its place to its session for ``GRACE_S``: the rerun that follows takes it.
- **One running job per session.** A session's next job waits for its running one and lets the others pass.
- **A visible place in line.** ``waiting(place, bound_s)`` is told every ``POLL_S``: the number in the queue and the
  most this place can wait.
- **A budget that bounds the wait.** Each job runs at most ``settings.heavy_seconds()`` (its progress checks the
  deadline, ``transformer/explain/progress.py``), so a place waits at most ceil(place / workers) such holds
  (``wait_bound``). A session whose place would wait longer than ``settings.heavy_wait_seconds()`` is refused at once
  (``PoolBusy``, whose message the page shows), and one that waits longer all the same (a job that overran its
  budget between two checks) gives up with that message. Five sessions holding a one-worker pool for 180 s made a
  sixth wait 15 minutes, without a word; now it is told it is refused, or its place and how long at most.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from streamlit.runtime.scriptrunner import StopException

from ui.state import settings

POLL_S = 0.25  # how often a waiting job is told its place (and checks whether it may go)
GRACE_S = 10.0  # how long the place of a run stopped while waiting is kept for its session's next run


class PoolBusy(RuntimeError):
    """The pool refuses a job whose wait would pass (or has passed) ``settings.heavy_wait_seconds()``: the message
    says so, for the page."""


class Superseded(StopException):
    """Raised in a waiting job whose session asked for another one, which took its place: that job's script run is a
    stale one (Streamlit started a newer run of the same session), so it ends as a stopped run does, quietly."""


@dataclass(eq=False)
class _Ticket:
    """One session's place in line."""

    session: str
    since: float  # when the session joined the line (kept when a newer request of it takes the place)
    superseded: bool = False  # a newer request of the session took this place
    left: float | None = None  # when its run stopped waiting (the place kept ``GRACE_S`` for the session)


def wait_bound(ahead: int, running: int, workers: int, hold_s: float) -> float:
    """The most a job with ``ahead`` jobs before it in line waits, each job holding a worker at most ``hold_s``
    (0: no bound known): none while a worker is free for it, else ceil((ahead + 1 - free) / workers) holds."""
    free = max(0, workers - running)
    if ahead < free:
        return 0.0
    return math.ceil((ahead + 1 - free) / workers) * hold_s if hold_s > 0 else math.inf


class HeavyPool:
    """The fair bounded pool of the module docstring; ``clock`` is what ages the places (tests pass their own)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._changed = threading.Condition()
        self._running: list[str] = []  # one entry per job running, its session
        self._line: list[_Ticket] = []  # the places in line, first come first

    def acquire(self, session: str, waiting: Callable[[int, float], None]) -> None:
        """Take a worker for ``session``; until then ``waiting(place, bound_s)`` is called every ``POLL_S`` (it may
        raise: a stopped script run keeps its session's place for ``GRACE_S``). Raises ``PoolBusy`` when the wait
        would pass the budget, ``Superseded`` when a newer request of the session took this place."""
        with self._changed:
            ticket = self._join(session)
        try:
            while True:
                with self._changed:
                    if ticket.superseded:
                        raise Superseded()
                    self._check_wait(ticket)
                    limit = settings.heavy_workers()
                    if (not limit or len(self._running) < limit) and self._next() is ticket:
                        self._line.remove(ticket)
                        self._running.append(session)
                        return
                    place = self._line.index(ticket) + 1
                    bound = wait_bound(place - 1, len(self._running), limit or 1, settings.heavy_seconds())
                waiting(place, bound)
                with self._changed:
                    self._changed.wait(POLL_S)
        except BaseException as error:
            with self._changed:
                if ticket in self._line and not ticket.superseded:
                    if isinstance(error, PoolBusy):
                        self._line.remove(ticket)
                    else:  # stopped while waiting: the session's next run takes the place (``_join``)
                        ticket.left = self.clock()
                self._changed.notify_all()
            raise

    def release(self, session: str) -> None:
        """Give back the worker ``session``'s job held."""
        with self._changed:
            if session in self._running:
                self._running.remove(session)
            self._changed.notify_all()

    def running(self) -> int:
        """How many jobs hold a worker now."""
        with self._changed:
            return len(self._running)

    def waiting(self) -> list[str]:
        """The sessions in line, first come first (places kept for a stopped run included)."""
        with self._changed:
            self._expire()
            return [ticket.session for ticket in self._line]

    def _join(self, session: str) -> _Ticket:
        """The session's place: the one it holds already (taken over from its earlier request), else a new one
        at the end of the line if its wait fits the budget (``PoolBusy`` if not)."""
        self._expire()
        earlier = next((ticket for ticket in self._line if ticket.session == session), None)
        if earlier is not None:
            ticket = _Ticket(session, earlier.since)
            self._line[self._line.index(earlier)] = ticket
            earlier.superseded = True
            self._changed.notify_all()
            return ticket
        budget, workers = settings.heavy_wait_seconds(), settings.heavy_workers() or 1
        bound = wait_bound(len(self._line), len(self._running), workers, settings.heavy_seconds())
        if budget and not math.isinf(bound) and bound > budget:  # no known bound: the wait's own check applies
            raise PoolBusy(f"not started: the server is busy with other visitors' heavy work ({len(self._line)} "
                           f"waiting, {len(self._running)} running), and a place in line now could wait up to "
                           f"{wait_in_words(bound)}, more than the {wait_in_words(budget)} a wait may take here. "
                           "Try again in a few minutes")
        ticket = _Ticket(session, self.clock())
        self._line.append(ticket)
        return ticket

    def _check_wait(self, ticket: _Ticket) -> None:
        """``PoolBusy`` once ``ticket`` has waited longer than the budget (a job ahead overran its own)."""
        budget = settings.heavy_wait_seconds()
        if budget and self.clock() - ticket.since > budget:
            raise PoolBusy(f"not started: no worker came free within {wait_in_words(budget)} (the most a wait may take "
                           "on this server). Try again in a few minutes")

    def _next(self) -> _Ticket | None:
        """The first place in line whose run still waits and whose session runs nothing."""
        return next((t for t in self._line if t.left is None and t.session not in self._running), None)

    def _expire(self) -> None:
        """Drop the places kept for stopped runs whose session did not come back within ``GRACE_S``."""
        now = self.clock()
        self._line = [t for t in self._line if t.left is None or now - t.left <= GRACE_S]


def wait_in_words(seconds: float) -> str:
    """A wait in words: "45 s", "3 min", "no known bound"."""
    if math.isinf(seconds):
        return "no known bound"
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


POOL = HeavyPool()  # one per server process
