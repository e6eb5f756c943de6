"""The Streamlit app's own code, in rooms; the pages only connect widgets to it.

- ``state``: session state and links (settings, the URL, the selected token, presentation mode, widgets)
- ``models``: the model menu and loading, uploads, runs trained here, the Training page's job
- ``compute``: cached computation the pages draw (analysis, decoding, explanations, heads, patching)
- ``sections``: page sections more than one page draws (the sidebar, the second model, Figure 1, ...)
- ``charts``: pure chart functions, data in, figure or table out

A room imports only from the rooms above it in this list (``charts`` from none of them, but
``state`` for presentation); the pages import from all. The model logic lives in the
``transformer`` package; nothing there imports this package.
"""
