"""How a long explanation tells its caller how far it is: a ``Progress`` callback, told before each step.

At opus-mt size the head statistics over 50 sentences take half a minute and the pruning curve a minute; a
caller (the app's progress bar, a script's printout) passes ``progress=`` and is told the share done and what
runs now. A computation made of parts gives each part a slice of the bar with ``within``.

A server that must answer every visitor bounds such work by time: ``with_deadline`` wraps a ``Progress`` so that
a step told after the deadline raises ``OutOfTime`` (the work stops at its next step; the app turns it into a
message, ``ui/compute/shared_work.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

Progress = Callable[[float, str], None]
"""progress(share, what): ``share`` of the work done so far (0 to 1, never decreasing), ``what`` runs next."""


def within(progress: Progress | None, start: float, end: float, prefix: str = "") -> Progress | None:
    """A part's own ``Progress`` (0 to 1) mapped onto the slice [start, end] of ``progress``'s, its ``what``
    after ``prefix``; None stays None."""
    if progress is None:
        return None
    return lambda share, what: progress(start + (end - start) * min(max(share, 0.0), 1.0), prefix + what)


def tell(progress: Progress | None, share: float, what: str) -> None:
    """``progress(share, what)`` where there is one."""
    if progress is not None:
        progress(share, what)


class OutOfTime(RuntimeError):
    """Raised by a ``with_deadline`` progress told after its deadline: the work was cut after ``seconds``."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"cut after {seconds:.0f} s, the time one computation may take on this server")
        self.seconds = seconds


def with_deadline(progress: Progress | None, seconds: float, clock: Callable[[], float] = time.monotonic
                  ) -> Progress:
    """A ``Progress`` that tells ``progress`` (if any) and raises ``OutOfTime`` when told more than ``seconds``
    after this call: the work stops at its next step rather than holding the server (``seconds`` <= 0: never)."""
    deadline = clock() + seconds

    def told(share: float, what: str) -> None:
        if seconds > 0 and clock() > deadline:
            raise OutOfTime(seconds)
        tell(progress, share, what)

    return told
