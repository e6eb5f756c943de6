"""Entry point: `streamlit run app.py`. Routes to the pages in pages/, one per step of the Transformer
(``ui.state.routing.PAGES``; a page is listed only if its file exists).

Each page draws the shared sidebar itself (``ui.sections.sidebar.sidebar()``): see ui/sections/sidebar.py for why
the sidebar is not drawn here.

The first run in the process also sets the server's garbage collector (``ui.state.collector``: the libraries'
objects frozen out of its full collections, which stopped the server for up to a second); later runs skip it.
"""

import streamlit as st

from ui.state import collector, routing

collector.freeze_libraries()  # once per process (ui/state/collector.py)

st.set_page_config(page_title="Transformer explorer", page_icon=":material/hub:", layout="wide")
page = routing.navigation()
with routing.routed():
    page.run()
