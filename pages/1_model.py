"""Page 1: the architecture with this model's real sizes, and a check against torch.nn.Transformer on request.

This is the page a new browser session opens on, right after ``streamlit run``, so it is
ordered for start-up time. On a session's first run its text and the architecture diagram (SVG, drawn
from config.json: no torch, no Plotly) go out before the heavy imports (torch, about a second) and the
model. The check against torch.nn.Transformer builds a PyTorch copy of the model and runs both
on the input (a second the first time): it runs when asked, then stays on for this browser
session; its result is cached per model, device and input (``ui.compute.analysis.parity``).
"""

import streamlit as st

from ui.sections import architecture
from ui.state.routing import route_through_app

PARITY_ASKED = "model_parity_asked"  # session_state: the reader asked for the comparison once
EARLY_DRAWN = "model_diagram_drawn_early"  # session_state: this session's first run is over
PARAMETERS_PLACEHOLDER = {  # the parameter chart's size, empty
    "data": [{"type": "bar", "x": [], "y": [], "hoverinfo": "skip"}],
    "layout": {"height": 320, "xaxis": {"visible": False}, "yaxis": {"visible": False}, "plot_bgcolor": "white",
               "margin": {"l": 10, "r": 10, "t": 50, "b": 10}},
}


route_through_app()  # before anything is drawn (the sidebar comes later on this page)
st.title("The model")
intro = st.empty()  # the paper's encoder-decoder, or a decoder-only model's one stack

left, right = st.columns([3, 2])
diagram = left.empty()
own_formulas = st.container()  # this model's sub-layer and feed-forward, across the page: in a column they were cut
st.subheader("Parameters per part")
parameters_table, parameters_chart = st.empty(), st.empty()  # filled once the model is loaded
early_config = None
if not st.session_state.get(EARLY_DRAWN):  # a session's first run: before torch and the model
    st.session_state[EARLY_DRAWN] = True
    early_config = architecture.first_config()
    architecture.show_intro(intro, early_config)
    if early_config is not None:
        architecture.show(diagram, early_config)

from transformer.network.model import count_parameters  # noqa: E402  (torch: imported after the text is out)

if early_config is not None:
    # An empty Plotly figure where the parameter chart will be: the browser fetches and compiles Plotly
    # (4.7 MB) while the server loads the model, instead of after; sent only now, so that compiling it
    # does not hold up drawing the diagram.
    parameters_chart.plotly_chart(PARAMETERS_PLACEHOLDER, key="parameters_placeholder")
from ui.charts import model as charts  # noqa: E402
from ui.compute.analysis import parity, parity_gap  # noqa: E402
from ui.figures import chart, show_chart  # noqa: E402
from ui.models.menu import describe, is_huggingface  # noqa: E402
from ui.sections.input_analysis import require_analysis  # noqa: E402
from ui.sections.sidebar import sidebar  # noqa: E402
from ui.state.presentation import presenting  # noqa: E402
from ui.state.widgets import csv_button, guard  # noqa: E402

app = sidebar(require_model=False)
if app.pipeline is None:
    architecture.show_intro(intro, None)
    diagram.empty()
    parameters_chart.empty()
app.require_model()
pipe = app.pipeline
config = pipe.config

architecture.show_intro(intro, config)
svg = architecture.show(diagram, config, presenting=presenting())  # the sidebar's model (an SVG redraws cheaply)
left.download_button("Download the diagram (SVG)", svg, file_name="architecture.svg", mime="image/svg+xml",
                     key="architecture_svg", on_click="ignore")
with right:
    st.subheader("Sizes")
    st.table(charts.architecture_table(config).set_index("name"))  # a static table wraps the long "meaning" text
own_formulas.caption("This model's sub-layer and feed-forward:")
own_formulas.latex(charts.sublayer_latex(config))

counts = count_parameters(pipe.model)
table = charts.parameter_table(config, counts)
# a static table wraps the long formulas (T5's is 88 characters), which a data grid cut at the column's edge
parameters_table.table(table.assign(share=table["share"].map("{:.1%}".format)).set_index("part"))
show_chart(chart(charts.parameter_chart, counts), half=True, key="parameters", container=parameters_chart)
csv_button(table, "parameters.csv")

st.subheader("The same numbers as torch.nn.Transformer")
st.markdown(
    "`transformer.network.interop.to_torch` copies every weight into a model assembled only from PyTorch's own "
    "`nn.Embedding`, `nn.Transformer` and `nn.Linear`. Both run the current input (teacher-forced on the "
    "greedy translation); the largest difference of their logits shows that the from-scratch code "
    "computes what PyTorch computes, up to floating-point rounding."
)
gap = parity_gap(pipe)
if gap:
    st.info(f"This comparison does not apply to this model: {gap}." + (
        f" Being the {describe(pipe)}, it is checked against the `transformers` library's own implementation "
        f"instead (`tests/{'test_decoder_network' if config.decoder_only else 'test_hub_parity'}.py`: the same "
        "logits, in float64)." if is_huggingface(pipe) else ""))
    st.stop()
if not st.session_state.get(PARITY_ASKED):
    st.button("Compare with torch.nn.Transformer", key="model_parity_run",
              on_click=lambda: st.session_state.update({PARITY_ASKED: True}),
              help="Builds the PyTorch copy and runs both models on the input sentence (a second the first time).")
    st.stop()
analysis = require_analysis(app)
with guard("The comparison with torch.nn.Transformer"):
    ours, theirs = parity(app.model_key, app.device, app.pipeline, analysis)
    summary = charts.parity_summary(ours, theirs)
    a, b, c = st.columns(3)
    a.metric("largest |difference| of logits", f"{summary['max |difference|']:.2e}")
    b.metric("largest |logit|", f"{summary['max |logit|']:.2f}")
    c.metric("same predicted tokens", "yes" if summary["same predicted tokens"] else "no")
    st.caption(f"Input: {analysis.text!r} → {analysis.output_text!r}; logits of shape {tuple(ours.shape)}.")
