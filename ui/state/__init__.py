"""Session state and links: the names and limits the app shares (``settings``), the view in the URL (``links``),
the selected token (``selection``), presentation mode and the chart-download format (``presentation``: the
choice and its widgets; the charts' restyle is ``ui.figures``'s), a session's temporary folders (``tempdirs``),
the small widgets every page uses (``widgets``), and what the server's garbage collector walks (``collector``).
Nothing here computes on a model.
"""
