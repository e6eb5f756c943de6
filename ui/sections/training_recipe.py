"""The Training page's section 2 charts: the learning rate over the steps (the paper's warm-up, then
1/sqrt(step), or a constant) and what label smoothing does to one target distribution."""

from __future__ import annotations

from typing import Any

import streamlit as st

from transformer.train import TrainConfig
from ui.charts import training as charts
from ui.figures import chart, show_chart
from ui.models import training
from ui.models.training import SPECIALS
from ui.state.widgets import csv_button


def recipe_charts(config: TrainConfig, example: tuple[str, str] | None, sched_col: Any, smooth_col: Any) -> None:
    """The schedule chart in ``sched_col``, the label-smoothing chart in ``smooth_col``, with their CSVs."""
    schedule, d_model, warmup, smoothing = config.schedule, config.d_model, config.warmup, config.label_smoothing
    with sched_col:
        horizon = max(4 * config.warmup, 1000)
        schedule_frame = charts.lr_schedule_frame(config.d_model, config.warmup, horizon,
                                                  lr_fn=training.learning_rate_fn(config))
        show_chart(chart(charts.lr_schedule_chart, schedule_frame,
                         warmup_steps=config.warmup if schedule == "noam" else None,
                         title=f"Learning rate (d_model = {d_model}, warm-up = {warmup})"),
                        half=True, key="train_lr_chart")
        csv_button(schedule_frame.set_index("step"), "learning_rate.csv", key="train_lr_csv")
    with smooth_col:
        target = (example[1] if example else "hello") or "hello"
        pieces = list(dict.fromkeys(target.replace(" ", "")))[:12] or ["a"]
        smoothed = charts.label_smoothing_frame(SPECIALS + pieces, len(SPECIALS), smoothing)
        show_chart(chart(charts.label_smoothing_chart, smoothed, epsilon=smoothing), half=True,
                   key="train_smoothing_chart")
        st.caption(f"A small vocabulary of V = {len(smoothed)} (the specials and the characters of an example target), "
                   f"the reference {pieces[0]!r}: it gets {1 - smoothing + smoothing / len(smoothed):.3f}, every other "
                   f"token {smoothing / len(smoothed):.4f}.")
        csv_button(smoothed.set_index("token"), "label_smoothing.csv", key="train_smoothing_csv")
