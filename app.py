"""Placeholder entry point; the app comes with the Streamlit issue."""

import streamlit as st

st.title("Transformer explorer")
st.write("The model package is in `transformer/`.")
