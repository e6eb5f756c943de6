"""The Streamlit app's own code, in rooms; the pages only connect widgets to it.

- ``charts``: pure chart functions, data in, a plain Plotly figure or a table out
- ``state``: session state and links (settings, the URL, the selected token, presentation mode, widgets)
- ``figures``: how a figure reaches the browser (``show_chart``, the figure cache, margins, the house style,
  the projector's restyle), behind one entry point
- ``models``: the model menu and loading, uploads, runs trained here, the Training page's job
- ``compute``: cached computation the pages draw (analysis, decoding, explanations, heads, patching)
- ``sections``: page sections more than one page draws (the sidebar, the second model, Figure 1, ...)

A room imports only from itself and the rooms before it in this list (``tests/test_layout.py``); the pages
import from all. The model logic lives in the ``transformer`` package; nothing there imports this package.
"""

# Imported here, once, because every session's first script run imports this package first (app.py -> ui.state
# .routing) and Python's per-module import lock makes a second session wait until the first has finished it.
# Left to Streamlit's own lazy import, fifteen sessions opening in the same seconds raced on it: one drew
# "partially initialized module 'PIL.Image'" (docs/benchmarks.md, the load test's notes).
import PIL.Image  # noqa: E402, F401
