"""Charts for the faithfulness check (ERASER, DeYoung et al. 2020): each map's comprehensiveness and sufficiency
(AOPC over k = 1, 5, 10, 20, 50% of the source) with an interval over the output tokens, beside a random ranking's.

The data is ``ui.compute.faithfulness.measures``' frame: one row per map and measure (``key``, ``map``, ``removal``,
``measure``, ``method``, ``low``, ``high``, ``random``, ``beats_random``, ...). Data in, figure or table out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from . import MARGIN, label

PANELS = (("comprehensiveness", "higher is better: removing the top tokens costs p"),
          ("sufficiency", "lower is better: the top tokens alone keep p"))
BEATS = "#636efa"
FAILS = "#ef553b"
RANDOM = "grey"


def verdict(frame: pd.DataFrame, key: str) -> str:
    """In words, whether a map beats the random ranking on the two hard measures (the interval of the paired
    difference over the output tokens on the better side of 0), or why it cannot tell."""
    rows = frame[(frame.key == key) & frame.measure.isin([m for m, _ in PANELS])].set_index("measure")
    calls = rows["beats_random"]
    if (rows["rows"] == 0).any():
        return "undefined on every output token"
    if calls.isna().any():
        return "cannot tell (fewer than two output tokens measured)"
    failed = [m for m in calls.index if not bool(calls[m])]
    return "beats random" if not failed else "does not beat random on " + " and ".join(failed)


def faithfulness_chart(frame: pd.DataFrame) -> go.Figure:
    """Two panels, comprehensiveness and sufficiency: per map (best comprehensiveness on top) its mean over the output
    tokens with the 95% bootstrap interval, and the random ranking's mean as a grey diamond. A map that does not beat
    random on a measure is drawn red there and says so in its hover."""
    if frame.empty:
        raise ValueError("no faithfulness measures to draw")
    keys = list(dict.fromkeys(frame.key))
    names = [label(m) for m in dict.fromkeys(frame["map"])]
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04,
                        subplot_titles=[f"{m} (AOPC): {why}" for m, why in PANELS])
    for col, (measure, _) in enumerate(PANELS, start=1):
        rows = frame[frame.measure == measure].set_index("key").loc[keys]
        beats = rows["beats_random"].to_numpy(dtype=object)
        good = np.array([b is True or b is np.True_ for b in beats])
        said = np.where(good, "beats random", np.where(pd.isna(rows["beats_random"]), "cannot tell",
                                                        "does NOT beat random"))
        y = list(range(len(keys)))
        method = rows["method"].to_numpy(dtype=float)
        fig.add_trace(go.Scatter(
            x=method, y=y, mode="markers", marker=dict(size=10, color=np.where(good, BEATS, FAILS)),
            error_x=dict(type="data", symmetric=False, array=rows["high"].to_numpy(dtype=float) - method,
                         arrayminus=method - rows["low"].to_numpy(dtype=float), color="#888"),
            customdata=np.stack([names, rows["random"].to_numpy(dtype=float), said, rows["removal"]], axis=-1),
            hovertemplate=f"%{{customdata[0]}}<br>{measure}: %{{x:.4f}}<br>random ranking: %{{customdata[1]:.4f}}"
                          "<br>%{customdata[2]} (removed: %{customdata[3]})<extra></extra>",
            name=measure, showlegend=False), row=1, col=col)
        fig.add_trace(go.Scatter(
            x=rows["random"].to_numpy(dtype=float), y=y, mode="markers", name="random ranking",
            marker=dict(symbol="diamond", size=9, color=RANDOM), showlegend=col == 1,
            hovertemplate="random ranking: %{x:.4f}<extra></extra>"), row=1, col=col)
        fig.update_xaxes(title_text="p(full) − p(perturbed), mean over output tokens", row=1, col=col)
    fig.update_yaxes(tickvals=list(range(len(keys))), ticktext=names, autorange="reversed", row=1, col=1)
    fig.update_layout(margin=MARGIN, height=120 + 28 * len(keys), legend=dict(orientation="h", y=-0.15),
                      title="Faithfulness: blue beats the random ranking (95% interval of the difference), red does "
                            "not")
    return fig


def faithfulness_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per map: each measure's mean over the output tokens with its 95% interval, the random ranking's mean,
    what "removed" meant, and the verdict."""
    out = []
    for key in dict.fromkeys(frame.key):
        rows = frame[frame.key == key].set_index("measure")
        line = {"map": rows["map"].iloc[0], "removed": rows["removal"].iloc[0]}
        for measure, row in rows.iterrows():
            line[measure] = ("undefined" if np.isnan(row["method"]) else f"{row['method']:.4f}" if np.isnan(row["low"])
                             else f"{row['method']:.4f} [{row['low']:.4f}, {row['high']:.4f}]")
            line[f"{measure}, random"] = round(float(row["random"]), 4)
        line["verdict"] = verdict(frame, key)
        line["output tokens"] = int(rows["rows"].iloc[0])
        out.append(line)
    return pd.DataFrame(out)
