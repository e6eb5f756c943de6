"""The Training page's section on kept runs: the table, rename, delete, download, and two runs' curves compared."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from transformer.checkpoints.checkpoint import CheckpointError, read_log
from ui.charts import training as charts
from ui.figures import chart, show_chart
from ui.models import runs, training_job
from ui.models.menu import kept_run_names
from ui.state import owner, settings


@st.cache_data(max_entries=4, show_spinner=False)
def _zip(folder: str, modified: float) -> bytes:
    """A run's zip, built once per run version rather than on every rerun of the page."""
    return runs.run_zip(Path(folder))


def runs_frame(kept: list[runs.SavedRun], names: dict[Path, str] | None = None) -> pd.DataFrame:
    """One row per kept run, newest first, each named as the model menu names it (``names``: by folder; default
    ``runs.run_names`` of ``kept``)."""
    names = runs.run_names(kept) if names is None else names
    return pd.DataFrame([{"name": names[r.folder], "task": r.task, "steps": r.steps, "parameters": r.parameters,
                          "MB": round(r.megabytes, 1), "trained": pd.Timestamp(r.created, unit="s").floor("s"),
                          "folder": r.folder.name} for r in kept],
                        columns=["name", "task", "steps", "parameters", "MB", "trained", "folder"])


def kept_runs_section() -> None:
    """Runs trained here by any session of this server, kept across reloads (``ui.models.runs``)."""
    st.header("Kept runs")
    me = owner.session_id()
    kept = runs.visible_runs(me, owner.linked_runs())
    if settings.public():
        st.caption(f"Every run trained on this page is kept on the server and listed in this browser's model "
                   f"menu. On this public server a run is yours alone: another browser opens it only through "
                   f"its link (the sidebar's \"Link to this view\"), and cannot rename or delete it. You keep "
                   f"{settings.runs_per_session()} runs; your oldest goes when you start another.")
    else:
        st.caption(f"Every run trained on this page is kept on the server and listed in the sidebar's model "
                   f"menu, after a reload too. The runs are shared by every browser using this server; beyond "
                   f"{runs.MAX_RUNS} runs the oldest are removed when a new one starts.")
    if not kept:
        st.info("No run kept yet: train one above.")
        return
    names = {**runs.run_names(kept), **kept_run_names()}  # one name everywhere: the model menu's
    st.dataframe(runs_frame(kept, names), hide_index=True)
    by_folder = {r.folder.name: r for r in kept}
    chosen = by_folder[st.selectbox("Run", list(by_folder), key="runs_choice",
                                    format_func=lambda f: names[by_folder[f].folder])]
    job = training_job.session_job()
    busy = job.config.out if job is not None and job.running else None
    name_col, download_col, delete_col = st.columns([3, 2, 2])
    mine = not settings.public() or chosen.owner == me  # public mode: only the owner renames or deletes
    new_name = name_col.text_input("Name", value=chosen.name, key=f"runs_name_{chosen.folder.name}",
                                   disabled=not mine)
    if new_name != chosen.name and mine:
        try:
            runs.rename_run(chosen.folder, new_name, owner=me)
            st.rerun()
        except ValueError as error:
            name_col.error(str(error))
    download_col.download_button("Download as a checkpoint zip", _zip(str(chosen.folder), chosen.created),
                                 file_name=f"{chosen.folder.name}.zip", mime="application/zip", key="runs_zip")
    if delete_col.button("Delete this run", key="runs_delete", disabled=not mine):
        try:
            runs.delete_run(chosen.folder, busy=busy, owner=me)
            st.rerun()
        except (ValueError, OSError) as error:
            delete_col.error(str(error))

    compared = st.multiselect("Compare the curves of", list(by_folder), default=list(by_folder)[:2],
                              max_selections=4, key="runs_compare", format_func=lambda f: names[by_folder[f].folder])
    frames = {}
    for folder in compared:
        try:
            log = read_log(by_folder[folder].folder)
            frames[names[by_folder[folder].folder]] = charts.progress_frame(log)
        except CheckpointError as error:
            st.warning(f"{names[by_folder[folder].folder]}: the training log cannot be read: {error}")
    if frames:
        show_chart(chart(charts.compare_runs_chart, frames), key="runs_compare_chart")
