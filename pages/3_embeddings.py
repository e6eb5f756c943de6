"""Page 3: token embeddings, the sinusoidal positional encoding, and their sum."""

import streamlit as st

from transformer.network.positional import sinusoidal_table
from ui.charts import embeddings as charts
from ui.figures import chart, panel, panels, show_chart
from ui.sections.input_analysis import require_analysis
from ui.sections.sidebar import sidebar
from ui.state.widgets import csv_button

app = sidebar()
config = app.pipeline.config
d_model = config.d_model

st.title("Embeddings and positional encoding")
layout, scaled = config.positional, config.scale_embedding
st.markdown(
    "Each token id picks a row of a learned embedding matrix"
    + (", scaled by $\\sqrt{d_{model}}$" if scaled else " (this model does not scale it by $\\sqrt{d_{model}}$)")
    + ". Attention by itself ignores the order of its inputs, so a fixed *positional encoding* is added: sines "
    "and cosines whose wavelengths grow geometrically from $2\\pi$ to $10000 \\cdot 2\\pi$ along the dimensions. "
    "For any offset k, PE(pos + k) is a linear function of PE(pos), which makes relative positions easy to use."
    + (" This model (Marian) lays the same waves out as all the sines, then all the cosines, where the paper "
       "alternates them." if layout == "marian" else "")
)
st.latex(charts.PE_LATEX[layout])
st.latex(charts.input_latex(scaled))

st.subheader("The positional encoding table")
positions = st.slider("Positions", 4, min(200, config.max_len), min(50, config.max_len), key="emb_positions")
table = sinusoidal_table(positions, d_model, layout=layout)  # the model's own layout and values
st.markdown("Left: the table, one row per position. Right: the dot product of two positions' encodings, which "
            "depends (almost) only on their distance and is largest for a position with itself.")
show_chart(panels([panel(charts.positional_heatmap, table), panel(charts.position_similarity, table)]),
           key="pe_table")  # one figure of two panels: the browser draws it faster than two
table_col, similarity_col = st.columns(2)
with table_col:
    csv_button(charts.table_frame(table), "positional_encoding.csv")
with similarity_col:
    csv_button(charts.similarity_frame(table), "position_similarity.csv")

default_dims = sorted({0, 1, min(4, d_model - 2), d_model // 2, d_model - 2} & set(range(d_model)))
dims = st.multiselect("Dimensions to plot", list(range(d_model)), default=default_dims, key="emb_dims")
if dims:
    show_chart(chart(charts.positional_curves, table, dims, layout), key="pe_curves")
else:
    st.info("Pick at least one dimension to plot.")

st.subheader("This input: embedding + position")
analysis = require_analysis(app)
side = st.radio("Side", ["source (encoder input)", "target (decoder input)"], horizontal=True, key="emb_side")
prefix, tokens = ("src", analysis.src_tokens) if side.startswith("source") else ("tgt", analysis.decoder_tokens)
trace = analysis.trace
embed, pos, total = trace[f"{prefix}.embed"][0], trace[f"{prefix}.pos"], trace[f"{prefix}.input"][0]
show_chart(chart(charts.token_vectors, embed, pos, total, tokens, scaled), key="token_vectors")
csv_button(charts.vectors_frame(embed, pos, total, tokens, scaled), f"{prefix}_embeddings.csv")
