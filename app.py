"""Entry point: `streamlit run app.py`. Routes to the pages in pages/, one per step of the Transformer
(``ui.state.routing.PAGES``; a page is listed only if its file exists).

Each page draws the shared sidebar itself (``ui.sections.sidebar.sidebar()``): see ui/sections/sidebar.py for why
the sidebar is not drawn here.

Each run first asks ``ui.state.collector`` to freeze the objects of newly imported libraries out of the garbage
collector's full collections (which stopped the server for up to a second); it acts at the first run of the process
and after the few runs that imported a library, and returns at once otherwise; and ``ui.state.gil`` to hand the GIL
over every 1 ms rather than 5 (the event loop then waits less behind the visitors' runs), once per process.
"""

import streamlit as st

from ui.state import collector, gil, routing

collector.freeze_imports()  # acts at the first run and after new imports only (ui/state/collector.py)
gil.shorten_switch_interval()  # once per process (ui/state/gil.py)

st.set_page_config(page_title="Transformer explorer", page_icon=":material/hub:", layout="wide")
page = routing.navigation()
with routing.routed():
    page.run()
