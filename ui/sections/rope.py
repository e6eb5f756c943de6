"""The Embeddings page's rotary positions (RoPE), for Llama, Mistral, Qwen and Gemma: the wavelength of every
dimension pair (with the model's scaling against the unscaled frequencies, and Gemma-3's second base), one query
turned along the positions, and the score of a query and a key against their distance, which shows that only the
offset matters. Computed with the model's own rotary modules (``ui.compute.positions.rotary_curves``), drawn by
``ui.charts.rope``."""

from __future__ import annotations

import streamlit as st

from ui.charts import formulas
from ui.charts import rope as charts
from ui.compute import positions
from ui.figures import chart, panel, panels, show_chart
from ui.sections.app_context import AppContext

MAX_POSITIONS = 256  # the score map is P x P cells


def _bases_text(app: AppContext) -> str:
    """Which base each layer turns by, and the scaling, in words."""
    c = app.pipeline.config
    text = f"This model's base is θ = {formulas.number(c.rope_theta)}"
    if c.rope_local_theta is not None:
        sliding = formulas.sliding_layers(c)
        full = [i for i in range(c.n_decoder_layers) if i not in sliding]
        text += (f" on its full-attention layers ({formulas.layer_ranges(full) or 'none'}), and "
                 f"θ = {formulas.number(c.rope_local_theta)}, unscaled, on its sliding-window layers "
                 f"({formulas.layer_ranges(sliding)}): two sets of wavelengths")
    if c.rope_scaling == "linear":
        text += (f". Its frequencies are divided by {c.rope_factor:g} (linear scaling, Chen et al. 2023): every "
                 "position turns as the position p / factor did before, so a longer context fits the turns trained")
    elif c.rope_scaling == "llama3":
        text += (f". Llama 3's scaling divides the slow pairs' frequencies by {c.rope_factor:g} (wavelengths above "
                 f"{c.rope_original_max_len:,} / {c.rope_low_freq_factor:g} positions, the original context over "
                 f"the low-frequency factor), keeps the fast ones (wavelengths below {c.rope_original_max_len:,} / "
                 f"{c.rope_high_freq_factor:g}) and blends in between (the grey lines)")
    return text + "."


def show(app: AppContext) -> None:
    """The rotary section: wavelengths, a turned query, scores against distance."""
    c = app.pipeline.config
    st.subheader("Rotary positions: each pair of dimensions turns at its own speed")
    count = st.slider("Positions", min(8, c.max_len), min(MAX_POSITIONS, c.max_len), min(64, c.max_len),
                      key="rope_positions")
    data = positions.rotary_curves(app.model_key, app.pipeline, count)
    st.markdown(f"Each head's {c.d_k} dimensions form {c.d_k // 2} planes (dimensions $i$ and $i + d_k/2$). At "
                r"position $m$ plane $i$ is turned by the angle $m\,\theta_i$, $\theta_i = \theta^{-2i/d_k}$: plane "
                r"0 by one radian per position, the last ones so slowly that a turn takes more positions than the "
                f"model reads. {_bases_text(app)}")
    bands = ((c.rope_original_max_len / c.rope_high_freq_factor, c.rope_original_max_len / c.rope_low_freq_factor)
             if c.rope_scaling == "llama3" else None)
    show_chart(chart(charts.wavelength_chart, data.inv_freq, data.unscaled, c.max_len, bands, c.rope_scaling),
               key="rope_wavelengths")
    half = c.d_k // 2
    pairs = sorted({0, 1, half // 2, half - 1} & set(range(half)))
    planes = ", ".join(map(str, pairs))
    st.markdown(f"The query $q = (1, \\dots, 1)$ at positions 0 to {count - 1}, in planes {planes}: "
                "each point goes round its circle, plane 0 a radian a step, the slow planes hardly at all. The "
                "rotation keeps its length: RoPE changes where a vector points, never how long it is.")
    show_chart(chart(charts.rotation_chart, data.rotated, pairs), key="rope_rotation")
    queries = sorted({count - 1, (2 * (count - 1)) // 3, (count - 1) // 3})
    st.markdown(r"The score $q_m \cdot k_n = (R_m q)^{T} (R_n k) = q^{T} R_{n-m} k$ of that query and the same "
                "vector as a key: left, for every query and earlier key (each diagonal one colour); right, against "
                "the distance $m - n$ for queries at positions " + ", ".join(map(str, queries))
                + ": the lines lie on one another. Only the offset matters.")
    show_chart(panels([panel(charts.score_map, data.scores), panel(charts.score_chart, data.scores, queries)]),
               key="rope_scores")
    st.caption(f"The lines differ by at most {charts.offset_spread(data.scores, queries):.1e}: the model computes the "
               "angles m θ_i in float32, as the families were trained, so a turn is exact to about 1e-7.")
