"""Entry point: `streamlit run app.py`. Routes to the pages in pages/, one per step of the Transformer
(``ui.state.routing.PAGES``; a page is listed only if its file exists).

Each page draws the shared sidebar itself (``ui.sections.sidebar.sidebar()``): see ui/sections/sidebar.py for why
the sidebar is not drawn here.

Each run, once its page is drawn, asks ``ui.state.collector`` to freeze the objects of newly imported libraries out
of the garbage collector's full collections (which stopped the server for up to a second); it acts at the first run
of the process and after the few runs that imported a library, and returns at once otherwise. It runs after the
page, not before: at the first run it would import torch, pandas and Plotly (2-3 s) before the first page's title,
which that page draws before it needs any of them. The page then runs in one of a bounded
number of slots (``ui.state.run_slots``): the cores, not the visitors, set how many runs share the GIL.
"""

import streamlit as st

from ui.state import collector, routing, run_slots

st.set_page_config(page_title="Transformer explorer", page_icon=":material/hub:", layout="wide")
page = routing.navigation()
try:
    with run_slots.slot(), routing.routed():  # at most settings.run_slots() runs compute at once
        page.run()
finally:  # a rerun or st.stop() ends a run too
    collector.freeze_imports()  # acts at the first run and after new imports only (ui/state/collector.py)
