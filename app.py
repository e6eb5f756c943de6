"""Entry point: `streamlit run app.py`. Routes to the pages in pages/, one per step of the Transformer.

Each page draws the shared sidebar itself (``ui.sections.sidebar.sidebar()``): see ui/sections/sidebar.py for why
the sidebar is not drawn here. A page is listed only if its file exists.
"""

from pathlib import Path

import streamlit as st

PAGES_DIR = Path(__file__).resolve().parent / "pages"
PAGES = [  # file, title, icon
    ("1_model.py", "Model", ":material/account_tree:"),
    ("2_tokenization.py", "Tokenization", ":material/text_fields:"),
    ("3_embeddings.py", "Embeddings and positions", ":material/grid_on:"),
    ("4_attention.py", "Attention", ":material/visibility:"),
    ("5_explain.py", "Explain", ":material/psychology_alt:"),
    ("6_heads.py", "Heads", ":material/hub:"),
    ("7_patching.py", "Patching", ":material/swap_horiz:"),
    ("8_masks.py", "Masks", ":material/filter_alt:"),
    ("9_decoding.py", "Decoding", ":material/route:"),
    ("10_training.py", "Training", ":material/model_training:"),
]

st.set_page_config(page_title="Transformer explorer", page_icon=":material/hub:", layout="wide")
navigation = st.navigation([
    st.Page(PAGES_DIR / file, title=title, icon=icon, default=(i == 0))
    for i, (file, title, icon) in enumerate(PAGES) if (PAGES_DIR / file).is_file()
])
navigation.run()
