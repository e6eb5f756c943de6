"""Training off the script thread: one background job per browser session.

Streamlit reruns a page's script on every interaction; a training run of a minute must
not block those reruns (nor the other pages). ``TrainingJob`` runs
``transformer.train.train(config, callback=..., stop_event=...)`` in a daemon thread and
collects every progress report in a buffer guarded by a lock. The page polls that
buffer (``st.fragment(run_every=1)``) and draws the curves; the stop button sets the
event, which the trainer honours within a second.

The thread never calls Streamlit: it only appends to the buffer, so it needs no script
run context and cannot break a rerun. ``session_job`` keeps the job in
``st.session_state`` so each browser session has its own.

At most ``settings.max_trainings()`` jobs train at once in the server process (``SLOTS``); a job started
beyond that waits, ``QUEUED``, first come first served, and ``queue_position`` says where it stands (the
Training page shows it). A stop while it waits ends it at once, ``STOPPED`` without a result.

A job may train several runs one after the other in its slot (``then``: the Training page's "Train both", an
encoder-decoder and then its decoder-only twin): ``config``, ``name``, ``records`` and ``elapsed`` are then the
current run's, ``run_number`` says which it is, ``earlier_results`` holds what the ended ones returned, and
``result`` is the last run's. A stop or a failure ends the job with the run it hits.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable, MutableMapping, Sequence
from typing import Any

from ui.state import settings

# The session_state key of the current session's job.
JOB_KEY = "training_job"

IDLE, QUEUED, RUNNING, FINISHED, STOPPED, FAILED = "idle", "queued", "running", "finished", "stopped", "failed"
POLL_S = 0.25  # how often a waiting job looks again (the limit is read per call, the stop event checked)

TrainFn = Callable[..., Any]


class _Slots:
    """The server's training slots: at most ``settings.max_trainings()`` holders, the others wait in order."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._active: list[TrainingJob] = []
        self._waiting: list[TrainingJob] = []

    def acquire(self, job: TrainingJob) -> bool:
        """Wait for a slot for ``job`` (first come, first served); False when it was stopped while waiting."""
        with self._changed:
            self._waiting.append(job)
            try:
                while not (self._waiting[0] is job and len(self._active) < settings.max_trainings()):
                    if job.stop_event.is_set():
                        return False
                    self._changed.wait(POLL_S)
                self._active.append(job)
                return True
            finally:
                self._waiting.remove(job)
                self._changed.notify_all()

    def release(self, job: TrainingJob) -> None:
        with self._changed:
            if job in self._active:
                self._active.remove(job)
            self._changed.notify_all()

    def position(self, job: TrainingJob) -> int:
        """1 for the next job to train, 2 for the one after it, ...; 0 when ``job`` is not waiting."""
        with self._changed:
            return self._waiting.index(job) + 1 if job in self._waiting else 0

    def training(self) -> int:
        """How many jobs hold a slot now."""
        with self._changed:
            return len(self._active)


SLOTS = _Slots()  # one per server process: every session's jobs share it


class TrainingJob:
    """One training run in a background thread, observable from any rerun.

    ``train_fn(config, callback=..., stop_event=...)`` defaults to ``transformer.train.train``;
    its return value is kept as ``result``. Progress reports are stored as they come
    (a dict, a dataclass, or the keyword arguments of the call as a dict).
    """

    def __init__(self, config: Any, *, train_fn: TrainFn | None = None, name: str = "trained model",
                 then: Sequence[tuple[Any, str]] = ()) -> None:
        self.config = config  # the current run's (``then`` moves it on)
        self.name = name
        self._then = list(then)  # (config, name) of the runs to train after this one, in this job's slot
        self.n_runs = 1 + len(self._then)
        self._earlier: list[Any] = []  # what the runs that have ended returned, in order
        self._train_fn = train_fn
        self._lock = threading.Lock()
        self._records: list[Any] = []
        self._status = IDLE
        self._result: Any = None
        self._error: str | None = None
        self._error_details: str | None = None
        self._started_at: float | None = None
        self._finished_at: float | None = None
        self.stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        # Set by ui.models.menu.register_finished_training() (the sidebar calls it) on the first script run after
        # the job ended (the thread cannot touch st.session_state): the run is then a model of the menu
        # (registered_label), or could not be (registration_error), or failed.
        self.registered = False
        self.registered_label: str | None = None
        self.registration_error: str | None = None

    # -- control --------------------------------------------------------------------

    def start(self) -> TrainingJob:
        """Start the thread (once); returns self."""
        with self._lock:
            if self._status != IDLE:
                raise RuntimeError(f"this job has already been started (status: {self._status})")
            self._status = QUEUED  # RUNNING once it holds one of the server's slots
        self._thread = threading.Thread(target=self._run, name=f"training-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Ask the trainer to stop; it saves what it has and returns within about a second."""
        self.stop_event.set()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread to end (for tests and scripts); True if it has ended."""
        if self._thread is not None:
            self._thread.join(timeout)
        return not self.running

    # -- what the page reads --------------------------------------------------------

    @property
    def status(self) -> str:
        with self._lock:
            return self._status

    @property
    def running(self) -> bool:
        """Started and not ended: training, or waiting for a slot (``queued``)."""
        return self.status in (QUEUED, RUNNING)

    @property
    def queued(self) -> bool:
        return self.status == QUEUED

    @property
    def queue_position(self) -> int:
        """Where this job waits for a slot (1: next), 0 when it is not waiting."""
        return SLOTS.position(self)

    @property
    def done(self) -> bool:
        return self.status in (FINISHED, STOPPED, FAILED)

    @property
    def result(self) -> Any:
        with self._lock:
            return self._result

    @property
    def error(self) -> str | None:
        """A one-line message for the page when the run failed."""
        with self._lock:
            return self._error

    @property
    def error_details(self) -> str | None:
        """The traceback of a failed run, for an expander (never shown as the main message)."""
        with self._lock:
            return self._error_details

    @property
    def elapsed(self) -> float:
        """Seconds since start (frozen once the run ended)."""
        with self._lock:
            if self._started_at is None:
                return 0.0
            end = self._finished_at if self._finished_at is not None else time.monotonic()
            return end - self._started_at

    @property
    def run_number(self) -> int:
        """Which of the job's ``n_runs`` runs trains now (or ended it): 1, 2, ..."""
        with self._lock:
            return len(self._earlier) + 1

    def earlier_results(self) -> list[Any]:
        """What the job's runs before the current one returned, in order ([] for a job of one run)."""
        with self._lock:
            return list(self._earlier)

    def records(self) -> list[Any]:
        """A copy of every progress report of the current run so far, oldest first."""
        with self._lock:
            return list(self._records)

    def latest(self) -> Any:
        """The newest progress report, or None."""
        with self._lock:
            return self._records[-1] if self._records else None

    # -- the thread -----------------------------------------------------------------

    def _callback(self, *args: Any, **kwargs: Any) -> None:
        record = args[0] if len(args) == 1 and not kwargs else dict(kwargs) if kwargs else args
        with self._lock:
            self._records.append(record)

    def _run(self) -> None:
        if not SLOTS.acquire(self):  # stopped while it waited: nothing was trained
            with self._lock:
                self._status = STOPPED
                self._started_at = self._finished_at = time.monotonic()
            return
        with self._lock:
            self._status = RUNNING
            self._started_at = time.monotonic()
        try:
            self._train()
        finally:
            SLOTS.release(self)

    def _train(self) -> None:
        while self._train_one():  # the next run of ``then``, in the slot this job holds
            pass

    def _train_one(self) -> bool:
        """Train the current run; True when another run of ``then`` is now current and should train."""
        train_fn = self._train_fn
        try:
            if train_fn is None:
                from transformer.train import train as train_fn  # imported here: heavy, and only a job needs it
            result = train_fn(self.config, callback=self._callback, stop_event=self.stop_event)
        except Exception as error:  # shown on the page as a message, never raised into a rerun
            with self._lock:
                self._status = FAILED
                # A ValueError's message is meant for users (bad data, bad config); others get their type.
                plain = isinstance(error, ValueError) and str(error)
                self._error = str(error) if plain else f"{type(error).__name__}: {error}"
                self._error_details = traceback.format_exc()
                self._finished_at = time.monotonic()
            return False
        with self._lock:
            if self._then and not self.stop_event.is_set():
                self._earlier.append(result)
                self.config, self.name = self._then.pop(0)
                self._records, self._started_at = [], time.monotonic()
                return True
            self._result = result
            self._status = STOPPED if self.stop_event.is_set() else FINISHED
            self._finished_at = time.monotonic()
            return False


def session_job(state: MutableMapping[str, Any] | None = None) -> TrainingJob | None:
    """This browser session's job (``st.session_state`` unless another mapping is given)."""
    if state is None:
        import streamlit as st

        state = st.session_state
    return state.get(JOB_KEY)


def start_session_job(
    config: Any,
    *,
    train_fn: TrainFn | None = None,
    name: str = "trained model",
    then: Sequence[tuple[Any, str]] = (),
    state: MutableMapping[str, Any] | None = None,
) -> TrainingJob:
    """Start a job (of one run, or more with ``then``) and keep it as this session's job; a running one is stopped
    first."""
    if state is None:
        import streamlit as st

        state = st.session_state
    previous = state.get(JOB_KEY)
    if previous is not None and previous.running:
        previous.stop()
    job = TrainingJob(config, train_fn=train_fn, name=name, then=then).start()
    state[JOB_KEY] = job
    return job
