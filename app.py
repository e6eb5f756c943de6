"""Entry point: `streamlit run app.py`. Routes to the pages in pages/, one per step of the Transformer
(``ui.state.routing.PAGES``; a page is listed only if its file exists).

Each page draws the shared sidebar itself (``ui.sections.sidebar.sidebar()``): see ui/sections/sidebar.py for why
the sidebar is not drawn here.
"""

import streamlit as st

from ui.state import routing

st.set_page_config(page_title="Transformer explorer", page_icon=":material/hub:", layout="wide")
page = routing.navigation()
with routing.routed():
    page.run()
