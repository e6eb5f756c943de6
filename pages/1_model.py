"""Page 1: the architecture with this model's real sizes, and a check against torch.nn.Transformer on request.

This is the page a new browser session opens on, right after ``streamlit run``, so it is
ordered for start-up time. Its text and, on a session's first run, a placeholder chart go out
before the heavy imports (torch, about a second) and the model: the browser draws them, and
fetches and compiles Plotly's JavaScript (4.7 MB, a second or two), while the server imports
and loads, instead of after.
The check against torch.nn.Transformer builds a PyTorch copy of the model and runs both
on the input (a second the first time): it runs when asked, then stays on for this browser
session; its result is cached per model, device and input (``ui.analysis.parity``).
"""

import streamlit as st

PARITY_ASKED = "model_parity_asked"  # session_state: the reader asked for the comparison once
PLACEHOLDER_SHOWN = "model_placeholder_shown"  # session_state: this session's first run is over
DIAGRAM_PLACEHOLDER = {  # the diagram's size, empty: a Plotly figure, so the browser loads Plotly now
    "data": [{"type": "scatter", "x": [], "y": [], "hoverinfo": "skip"}],
    "layout": {"height": 820, "xaxis": {"visible": False}, "yaxis": {"visible": False}, "plot_bgcolor": "white",
               "annotations": [{"text": "Loading the model...", "showarrow": False,
                                "font": {"size": 16, "color": "#888"}}]},
}



def first_config():
    """The config of the model a new session opens on (the link's, else the first shipped folder, as the
    sidebar chooses), read from its config.json without torch; None when it cannot be told cheaply."""
    import json

    from transformer.network.config import TransformerConfig
    from ui.settings import models_dir

    try:
        folders = sorted(p for p in models_dir().iterdir() if (p / "config.json").is_file())
        name = st.query_params.get("model")
        chosen = next((p for p in folders if p.name == name), None) if name else (folders[0] if folders else None)
        if chosen is None:
            return None
        return TransformerConfig.from_dict(json.loads((chosen / "config.json").read_text())["model"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


st.title("The model")
st.markdown(
    "An encoder reads the source sentence; a decoder writes the translation one token at a time, "
    "looking at its own earlier tokens (masked self-attention) and at the encoder's output "
    "(cross-attention). Both stacks repeat the same layer N times; every sub-layer is wrapped in a "
    "residual connection and a LayerNorm:"
)
st.latex(r"\mathrm{LayerNorm}(x + \mathrm{Sublayer}(x)), \qquad "
         r"\mathrm{FFN}(x) = \max(0,\, xW_1 + b_1)\,W_2 + b_2")

left, right = st.columns([3, 2])
diagram = left.empty()
early_config = None
if not st.session_state.get(PLACEHOLDER_SHOWN):  # later runs would only make the browser redraw the diagram
    st.session_state[PLACEHOLDER_SHOWN] = True
    early_config = first_config()
    if early_config is None:
        diagram.plotly_chart(DIAGRAM_PLACEHOLDER, key="architecture_placeholder")
    else:  # the real diagram, from config.json alone: no torch, no model yet
        from ui.charts import model as charts
        from ui.figure_cache import chart
        from ui.presentation import show_chart

        show_chart(chart(charts.architecture_diagram, early_config), key="architecture_early", container=diagram)

from transformer.network.model import count_parameters  # noqa: E402  (torch: imported after the text is out)
from ui.charts import model as charts  # noqa: E402
from ui.figure_cache import chart  # noqa: E402
from ui.presentation import show_chart  # noqa: E402
from ui.sidebar import sidebar  # noqa: E402
from ui.widgets import csv_button, guard  # noqa: E402

app = sidebar(require_model=False)
if app.pipeline is None:
    diagram.empty()
app.require_model()
pipe = app.pipeline
config = pipe.config

if config != early_config:  # the model the sidebar chose is not the one drawn early
    show_chart(chart(charts.architecture_diagram, config), key="architecture", container=diagram)
with right:
    st.subheader("Sizes")
    st.table(charts.architecture_table(config).set_index("name"))  # a static table wraps the long "meaning" text

st.subheader("Parameters per part")
counts = count_parameters(pipe.model)
table = charts.parameter_table(config, counts)
st.dataframe(table, hide_index=True, column_config={"share": st.column_config.ProgressColumn(
    "share", format="percent", min_value=0.0, max_value=1.0)})
show_chart(chart(charts.parameter_chart, counts), key="parameters")
csv_button(table, "parameters.csv")

st.subheader("The same numbers as torch.nn.Transformer")
st.markdown(
    "`transformer.network.interop.to_torch` copies every weight into a model assembled only from PyTorch's own "
    "`nn.Embedding`, `nn.Transformer` and `nn.Linear`. Both run the current input (teacher-forced on the "
    "greedy translation); the largest difference of their logits shows that the from-scratch code "
    "computes what PyTorch computes, up to floating-point rounding."
)
if not st.session_state.get(PARITY_ASKED):
    st.button("Compare with torch.nn.Transformer", key="model_parity_run",
              on_click=lambda: st.session_state.update({PARITY_ASKED: True}),
              help="Builds the PyTorch copy and runs both models on the input sentence (a second the first time).")
    st.stop()
analysis = app.require_analysis()
with guard("The comparison with torch.nn.Transformer"):
    ours, theirs = app.parity(analysis)
    summary = charts.parity_summary(ours, theirs)
    a, b, c = st.columns(3)
    a.metric("largest |difference| of logits", f"{summary['max |difference|']:.2e}")
    b.metric("largest |logit|", f"{summary['max |logit|']:.2f}")
    c.metric("same predicted tokens", "yes" if summary["same predicted tokens"] else "no")
    st.caption(f"Input: {analysis.text!r} → {analysis.output_text!r}; logits of shape {tuple(ours.shape)}.")
