"""Page 3: token embeddings, the model's own positions (the paper's sinusoid, Marian's or fairseq's layout of
it, BART's learned tables, or T5's relative buckets and each head's bias), and this input's sum."""

import streamlit as st

from ui.sections import positions
from ui.sections.input_analysis import require_analysis
from ui.sections.sidebar import sidebar

app = sidebar()

st.title("Embeddings and positional encoding")
positions.show_intro(app)
positions.show_scheme(app)
positions.show_input(app, require_analysis(app))
