"""The Training page's section 3 after the Train button: progress, live curves, the scores that fit the
task and the end of a run (it joins the model menu). Drawn as a fragment that reruns every second while
the session's run trains (``ui.models.training_job``)."""

from __future__ import annotations

import streamlit as st

from transformer.train.scores import LABELS, task_scores
from ui.charts import training as charts
from ui.figures import chart, show_chart
from ui.models import training_defaults, training_job
from ui.models.menu import session_menu_text
from ui.state.widgets import csv_button


def progress_panel(builtin: str | None) -> None:
    """Progress bar, live curves and the stop button; reruns itself every second while training.
    ``builtin``: the built-in task chosen on the page (None for the user's pairs), for its promise."""
    job = training_job.session_job()
    if job is None:
        promise = training_defaults.promise(builtin)
        st.info("Choose the settings above and press **Train**."
                + (f" With this page's defaults, {promise}." if promise else ""))
        return
    records = job.records()
    latest = job.latest()
    cfg = job.config
    fit = task_scores(None if cfg.data else cfg.task, cfg.tokenizer)  # the scores that measure this task
    step = getattr(latest, "step", 0) if latest is not None else 0
    fraction = min(1.0, job.elapsed / cfg.max_seconds) if cfg.max_seconds else 0.0
    if job.done:
        fraction = 1.0
    if job.queued:  # the server trains settings.max_trainings() runs at once; this one waits its turn
        st.progress(0.0, text=f"Waiting for a free training slot: number {job.queue_position} in the queue, "
                              f"{training_job.SLOTS.training()} run(s) training now")
        st.button("Stop", key="train_stop", on_click=job.stop)
        return
    if job.done and job.status != "failed" and job.result is None:  # stopped while it waited
        st.info("Stopped before it started: nothing was trained.")
        if not job.registered:  # the sidebar marks it on an app run; the fragment then stops polling
            st.rerun(scope="app")
        return
    status = {"running": f"Training: step {step}, {job.elapsed:.0f} s of {cfg.max_seconds:.0f} s",
              "stopped": f"Stopped at step {step} after {job.elapsed:.0f} s (of the {cfg.max_seconds:.0f} s allowed)",
              "finished": f"Finished: step {step}, {job.elapsed:.0f} s in all with the test sentences",
              "failed": f"Failed at step {step}"}.get(job.status, "")
    if job.n_runs > 1:  # "Train both": the encoder-decoder, then its decoder-only twin
        shape = "decoder-only" if getattr(cfg, "architecture", "") == "decoder" else "encoder-decoder"
        status = f"Run {job.run_number} of {job.n_runs} ({shape}). {status}"
    st.progress(fraction, text=status)
    if job.running:
        st.button("Stop", key="train_stop", on_click=job.stop)
    frame = charts.progress_frame(records)
    if len(frame):
        show_chart(chart(charts.training_curves_chart, frame, fit.names), key="train_curves")
        csv_button(frame.set_index("step") if "step" in frame else frame, "training_log.csv",
                         key="train_log_csv")
    if job.status == "failed":
        st.error(f"Training failed: {job.error}")
        with st.expander("Details"):
            st.code(job.error_details or "")
    elif job.done:
        result = job.result
        metrics = result.metrics or {}
        split = "test" if metrics.get("test") else "validation"
        test = metrics.get("test") or metrics.get("valid") or {}
        if test:
            st.caption(f"Greedy decoding on the {split} sentences"
                       + (" (the run was stopped before the test)" if split == "validation" else "") + ":")
            cols = st.columns(len(fit.names))
            for col, key in zip(cols, fit.names, strict=True):
                value = test.get(key)
                if value is not None:
                    col.metric(LABELS[key], f"{100 * value:.1f}%" if key in ("exact_match", "token_accuracy")
                               else f"{value:.1f}")
            st.caption(fit.why)
            note = training_defaults.bleu_note(test, training_defaults.single_word_targets(
                None if cfg.data else cfg.task, cfg.task_options, cfg.src_lang, cfg.tgt_lang))
            if note and "bleu" in fit.names:
                st.caption(note)
        if not job.registered:  # it ended after this run's sidebar: rerun the app, whose sidebar registers it
            st.rerun(scope="app")
        if job.registration_error:
            st.error(f"The run finished but its checkpoint cannot be used: {job.registration_error}")
        elif job.registered_label:
            st.success(f"The model is now selectable as “{session_menu_text(job.registered_label)}” in the sidebar "
                       f"({result.step} "
                       f"steps, {result.elapsed:.0f} s, {result.stop_reason})."
                       + (" Its encoder-decoder twin is in the menu too; section 5 shows them side by side."
                          if job.earlier_results() else ""))
    elif job.running and fraction >= 1.0:
        st.caption("Evaluating on the validation and test sentences...")


def progress_section(builtin: str | None) -> None:
    """The panel as a fragment: every second while this session's run trains, once otherwise."""
    job = training_job.session_job()
    st.fragment(lambda: progress_panel(builtin), run_every=1.0 if job is not None and job.running else None)()
