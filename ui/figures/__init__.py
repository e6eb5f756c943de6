"""How a figure reaches the browser: the one place that knows Plotly's layout rules and Streamlit's theme.

Chart functions (``ui.charts``) build plain Plotly figures; pages and sections show them with ``show_chart``
and reuse built ones with ``chart``/``panels``. Everything between is here, and no chart module imports it
(``tests/test_layout.py``):

- ``display``: ``show_chart``, ``st.plotly_chart`` with the machinery below applied and the download options;
- ``cache``: built figures reused across reruns (``chart``, ``panel``, ``panels``), margins fitted once;
- ``grid``: several single-panel figures as one figure of panels (``side_by_side``);
- ``margins``: margins that already fit a figure's labels, so that the browser lays it out once;
- ``cell_text``: numbers in heatmap cells only where the cells, as drawn, hold them;
- ``crowding``: every k-th token label where they would overlap;
- ``text_size``: how wide a text is in the browser, without a browser;
- ``house_style``: Streamlit's theme written into shared figures, so that the browser draws them once;
- ``projector``: the restyle for presentation mode, one copy per figure and variant;
- ``versions``: the plotly and streamlit versions these pixel constants were measured with.

Outside this folder only this entry point is imported (``ui.figures.text_size`` too, by the Model page's SVG
diagram and the sidebar's language menus, which measure their own text).
"""

from ui.figures.cache import chart, panel, panels
from ui.figures.display import show_chart
from ui.figures.grid import side_by_side

__all__ = ["chart", "panel", "panels", "show_chart", "side_by_side"]
