"""Page 1: the architecture with this model's real sizes, and a check against torch.nn.Transformer on request.

The check builds a copy of the model from torch.nn.Transformer and runs both on the input: a
second or so the first time (torch's own modules warm up). It runs when asked, so the first
page of the app shows only what loading the model costs; once asked it stays on for this
browser session, and its result is cached per model, device and input (``state._parity``).
"""

import streamlit as st

from transformer.model import count_parameters
from ui import state
from ui.charts import model as charts

PARITY_ASKED = "model_parity_asked"  # session_state: the reader asked for the comparison once

app = state.sidebar()
pipe = app.pipeline
config = pipe.config

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
with left:
    st.plotly_chart(charts.architecture_diagram(config), key="architecture")
with right:
    st.subheader("Sizes")
    st.dataframe(charts.architecture_table(config), hide_index=True)

st.subheader("Parameters per part")
counts = count_parameters(pipe.model)
table = charts.parameter_table(config, counts)
st.dataframe(table, hide_index=True, column_config={"share": st.column_config.ProgressColumn(
    "share", format="percent", min_value=0.0, max_value=1.0)})
st.plotly_chart(charts.parameter_chart(counts), key="parameters")
state.csv_button(table, "parameters.csv")

st.subheader("The same numbers as torch.nn.Transformer")
st.markdown(
    "`transformer.interop.to_torch` copies every weight into a model assembled only from PyTorch's own "
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
with state.guard("The comparison with torch.nn.Transformer"):
    ours, theirs = app.parity(analysis)
    summary = charts.parity_summary(ours, theirs)
    a, b, c = st.columns(3)
    a.metric("largest |difference| of logits", f"{summary['max |difference|']:.2e}")
    b.metric("largest |logit|", f"{summary['max |logit|']:.2f}")
    c.metric("same predicted tokens", "yes" if summary["same predicted tokens"] else "no")
    st.caption(f"Input: {analysis.text!r} → {analysis.output_text!r}; logits of shape {tuple(ours.shape)}.")
