"""Charts for the training page: pure functions, data in, Plotly figure or pandas table out.

- the learning-rate schedule of section 5.3 of the paper,
      lrate = d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)
  (linear warm-up, then decay with the inverse square root of the step);
- the label-smoothed target distribution of section 5.4 (epsilon_ls = 0.1), in the
  convention of ``torch.nn.functional.cross_entropy(label_smoothing=eps)``: every one
  of the V classes gets eps / V and the correct one another 1 - eps;
- live curves from the trainer's progress records (loss, accuracy, BLEU/chrF);
- the cross-attention of one snapshot, as a heatmap and as a table for CSV.

Nothing here imports Streamlit or runs a model.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from transformer.train.schedule import noam_lr

from . import MARGIN, heatmap, label, labels, matrix_frame, to_numpy

# --- learning-rate schedule ---------------------------------------------------------


def lr_schedule_frame(
    d_model: int, warmup_steps: int, total_steps: int, factor: float = 1.0, points: int = 400,
    lr_fn: Callable[[int], float] | None = None,
) -> pd.DataFrame:
    """The learning rate at up to ``points`` steps from 1 to total_steps, the warm-up end always among them.

    By default the paper's schedule (``transformer.train.schedule.noam_lr``) with ``factor``;
    ``lr_fn(step)`` draws another rule instead (the trainer's ``learning_rate`` for a config,
    e.g. a constant rate). Columns: step (int), lr (float).
    """
    if d_model < 1 or warmup_steps < 1:
        raise ValueError(f"d_model and warmup_steps must be positive, got {d_model} and {warmup_steps}")
    if total_steps < 1:
        raise ValueError(f"total_steps must be positive, got {total_steps}")
    steps = np.unique(np.concatenate([
        np.linspace(1, total_steps, num=max(2, points)).round().astype(int),
        [min(warmup_steps, total_steps)],
    ]))
    rate = lr_fn or (lambda step: noam_lr(step, d_model, warmup_steps, factor))
    return pd.DataFrame({"step": steps.astype(int), "lr": [float(rate(int(s))) for s in steps]})


def lr_schedule_chart(frame: pd.DataFrame, *, warmup_steps: int | None = None, title: str | None = None) -> go.Figure:
    """A line of lr over step; a dotted line marks the end of warm-up, where the rate peaks."""
    fig = go.Figure(go.Scatter(x=frame["step"], y=frame["lr"], mode="lines", name="learning rate",
                               hovertemplate="step %{x}<br>lr %{y:.3g}<extra></extra>"))
    if warmup_steps is not None and warmup_steps <= frame["step"].max():
        fig.add_vline(x=warmup_steps, line_dash="dot", line_color="gray",
                      annotation_text=f"warm-up ends (step {warmup_steps})", annotation_position="top right")
    fig.update_layout(title=title or "Learning-rate schedule", xaxis_title="training step",
                      yaxis_title="learning rate", yaxis_tickformat=".1e", height=320,
                      margin=MARGIN)
    return fig


# --- label smoothing ----------------------------------------------------------------


def label_smoothing_frame(vocab: Sequence[str], target: int, epsilon: float) -> pd.DataFrame:
    """The smoothed target distribution q over a vocabulary for one correct token.

    q(k) = (1 - eps) * [k == target] + eps / V, as torch's cross_entropy(label_smoothing=eps)
    uses it. Columns: token, probability, target (bool). Sums to 1.
    """
    n = len(vocab)
    if n < 1:
        raise ValueError("the vocabulary is empty")
    if not 0 <= target < n:
        raise ValueError(f"target must be an index into the vocabulary (0..{n - 1}), got {target}")
    if not 0.0 <= epsilon < 1.0:
        raise ValueError(f"label smoothing must be in [0, 1), got {epsilon}")
    probs = np.full(n, epsilon / n)
    probs[target] += 1.0 - epsilon
    return pd.DataFrame({"token": list(vocab), "probability": probs, "target": np.arange(n) == target})


def label_smoothing_chart(frame: pd.DataFrame, *, epsilon: float | None = None) -> go.Figure:
    """Bars of the smoothed target, the correct token highlighted."""
    colors = np.where(frame["target"], "#d62728", "#1f77b4")
    positions = list(range(len(frame)))  # numeric axis with token labels: equal pieces stay apart
    fig = go.Figure(go.Bar(x=positions, y=frame["probability"], marker_color=colors,
                           customdata=labels(frame["token"]),
                           hovertemplate="%{customdata}: %{y:.4f}<extra></extra>"))
    fig.update_xaxes(tickvals=positions, ticktext=labels(frame["token"]))
    title = "Label-smoothed target" + (f" (epsilon = {epsilon:g})" if epsilon is not None else "")
    fig.update_layout(title=title, xaxis_title="token", yaxis_title="target probability",
                      yaxis_range=[0, 1.05], height=320, margin=MARGIN)
    return fig


# --- live training curves -----------------------------------------------------------

# Metric names the trainer may report, with a label for the charts; any name may be missing.
LOSS_COLUMNS = {"loss": "train loss", "val_loss": "validation loss"}
ACCURACY_COLUMNS = {"token_accuracy": "token accuracy", "exact_match": "exact match"}
SCORE_COLUMNS = {"bleu": "BLEU", "chrf": "chrF"}


def _as_mapping(record: Any) -> Mapping[str, Any]:
    if isinstance(record, Mapping):
        return record
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        return dataclasses.asdict(record)
    return vars(record)


def _flatten(record: Mapping[str, Any]) -> dict[str, Any]:
    """One level of nesting ({"metrics": {"bleu": ..}}) becomes plain columns."""
    flat: dict[str, Any] = {}
    for key, value in record.items():
        if isinstance(value, Mapping):
            flat.update({k: v for k, v in value.items() if not isinstance(v, Mapping)})
        else:
            flat[key] = value
    return flat


def progress_frame(records: Iterable[Any]) -> pd.DataFrame:
    """Progress records (dicts, dataclasses or objects) -> one row per record, sorted by step.

    ``transformer.train.Progress`` nests its eval metrics ({"metrics": {"bleu": ...}}); they
    become columns. Numbers that are missing (an eval not computed at that step) are NaN;
    non-finite losses stay in so the chart shows where a run diverged.
    """
    rows = [_flatten(_as_mapping(r)) for r in records]
    # The trainer's last report ("done") repeats the test metrics without their "test_" prefix.
    rows = [r for r in rows if r.get("phase") != "done"]
    frame = pd.DataFrame(rows)
    if frame.empty:
        return pd.DataFrame({"step": pd.Series(dtype=int)})
    if "step" in frame:
        frame = frame.sort_values("step", kind="stable").reset_index(drop=True)
    return frame


def _is_percent(series: pd.Series) -> bool:
    """Accuracies may come as fractions (0..1) or percentages (0..100)."""
    values = series.dropna()
    return bool(len(values)) and float(values.max()) > 1.0 + 1e-9


def training_curves_chart(frame: pd.DataFrame, scores: tuple[str, ...] = tuple(SCORE_COLUMNS)) -> go.Figure:
    """Three panels over the training step: losses, accuracies (%), and the ``scores`` that fit the
    task (``transformer.train.scores.task_scores``: chrF alone for a character task, BLEU / chrF else)."""
    shown = {name: label for name, label in SCORE_COLUMNS.items() if name in scores}
    fig = make_subplots(rows=1, cols=3, subplot_titles=("loss", "accuracy (%)", " / ".join(shown.values())),
                        horizontal_spacing=0.08)
    if "step" in frame and len(frame):
        for col, (columns, scale_to_percent) in enumerate(
            ((LOSS_COLUMNS, False), (ACCURACY_COLUMNS, True), (shown, False)), start=1
        ):
            for name, label in columns.items():
                if name not in frame or frame[name].dropna().empty:
                    continue
                points = frame[["step", name]].dropna()
                y = points[name].astype(float)
                if scale_to_percent and not _is_percent(y):
                    y = y * 100
                fig.add_trace(go.Scatter(x=points["step"], y=y, name=label,
                                         mode="lines" if name == "loss" else "lines+markers",
                                         hovertemplate=f"{label}<br>step %{{x}}<br>%{{y:.3g}}<extra></extra>"),
                              row=1, col=col)
    fig.update_xaxes(title_text="step")
    fig.update_layout(height=330, margin=dict(l=10, r=10, t=40, b=10),
                      legend=dict(orientation="h", yanchor="bottom", y=-0.45))
    return fig


def compare_runs_chart(frames: dict[str, pd.DataFrame], *, target: float | None = None) -> go.Figure:
    """Several runs' training loss and validation exact match over the step, one colour per run; ``target``: an
    exact match (0..1) drawn as a dotted line across the second panel."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("training loss", "validation exact match (%)"),
                        horizontal_spacing=0.1)
    palette = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")
    for i, (name, frame) in enumerate(frames.items()):
        color = palette[i % len(palette)]
        for col, column in ((1, "loss"), (2, "exact_match")):
            if column not in frame or frame[column].dropna().empty:
                continue
            points = frame[["step", column]].dropna()
            y = points[column].astype(float)
            if column == "exact_match" and not _is_percent(y):
                y = y * 100
            fig.add_trace(go.Scatter(x=points["step"], y=y, name=label(name), legendgroup=name, showlegend=col == 1,
                                     mode="lines" if column == "loss" else "lines+markers", line=dict(color=color),
                                     hovertemplate=f"{label(name)}<br>step %{{x}}<br>%{{y:.3g}}<extra></extra>"),
                          row=1, col=col)
    if target is not None:
        fig.add_hline(y=100 * target, line_dash="dot", line_color="grey", annotation_text=f"{target:.0%}",
                      row=1, col=2)
    fig.update_xaxes(title_text="step")
    fig.update_layout(height=340, margin=dict(l=10, r=10, t=40, b=10),
                      legend=dict(orientation="h", yanchor="bottom", y=-0.5))
    return fig


# --- attention across snapshots -----------------------------------------------------


def attention_frame(weights: Any, src_tokens: Sequence[str], tgt_tokens: Sequence[str]) -> pd.DataFrame:
    """A (T_q, T_k) attention matrix as a table for CSV: rows = decoder tokens, columns = source tokens,
    labelled with their position ("3:a") so repeated tokens keep their own cell."""
    return matrix_frame(weights, tgt_tokens, src_tokens)


def attention_heatmap(weights: Any, src_tokens: Sequence[str], tgt_tokens: Sequence[str], *,
                      title: str = "Cross-attention") -> go.Figure:
    """Cross-attention of one snapshot: decoder tokens (queries) down, source tokens (keys) across."""
    return heatmap(weights, list(src_tokens), list(tgt_tokens), title=title, x_title="source token",
                   y_title="decoder input", colorscale="Blues", zmin=0.0, zmax=1.0, colorbar_title="weight")


def attention_entropy(weights: Any) -> float:
    """Mean entropy (nats) of the rows of an attention matrix: high = spread out, 0 = one-hot.

    A single number that tells how sharp the attention became as the model learned.
    """
    matrix = np.clip(to_numpy(weights), 0.0, None)
    if matrix.size == 0:
        return math.nan
    rows = matrix / np.maximum(matrix.sum(axis=-1, keepdims=True), 1e-12)
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.where(rows > 0, rows * np.log(rows), 0.0).sum(axis=-1)
    return float(ent.mean())


def attention_entropy_chart(
    steps: Sequence[int], entropies: Sequence[float], *, current: int | None = None
) -> go.Figure:
    """How sharp the cross-attention got over the snapshots (mean row entropy per step)."""
    fig = go.Figure(go.Scatter(x=list(steps), y=list(entropies), mode="lines+markers", name="entropy",
                               hovertemplate="step %{x}<br>entropy %{y:.3f} nats<extra></extra>"))
    if current is not None:
        fig.add_vline(x=current, line_dash="dot", line_color="#d62728")
    fig.update_layout(title="Sharpness over training", xaxis_title="step",
                      yaxis_title="entropy (nats)", height=260, margin=MARGIN)
    return fig
