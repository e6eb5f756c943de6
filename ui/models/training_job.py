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
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable, MutableMapping
from typing import Any

# The session_state key of the current session's job.
JOB_KEY = "training_job"

IDLE, RUNNING, FINISHED, STOPPED, FAILED = "idle", "running", "finished", "stopped", "failed"

TrainFn = Callable[..., Any]


class TrainingJob:
    """One training run in a background thread, observable from any rerun.

    ``train_fn(config, callback=..., stop_event=...)`` defaults to ``transformer.train.train``;
    its return value is kept as ``result``. Progress reports are stored as they come
    (a dict, a dataclass, or the keyword arguments of the call as a dict).
    """

    def __init__(self, config: Any, *, train_fn: TrainFn | None = None, name: str = "trained model") -> None:
        self.config = config
        self.name = name
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
            self._status = RUNNING
            self._started_at = time.monotonic()
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
        return self.status == RUNNING

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

    def records(self) -> list[Any]:
        """A copy of every progress report so far, oldest first."""
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
            return
        with self._lock:
            self._result = result
            self._status = STOPPED if self.stop_event.is_set() else FINISHED
            self._finished_at = time.monotonic()


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
    state: MutableMapping[str, Any] | None = None,
) -> TrainingJob:
    """Start a job and keep it as this session's job; a running one is stopped first."""
    if state is None:
        import streamlit as st

        state = st.session_state
    previous = state.get(JOB_KEY)
    if previous is not None and previous.running:
        previous.stop()
    job = TrainingJob(config, train_fn=train_fn, name=name).start()
    state[JOB_KEY] = job
    return job
