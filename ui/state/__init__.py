"""Session state and links: the names and limits the app shares (``settings``), the view in the URL (``links``),
the selected token (``selection``), presentation mode and chart export (``presentation``), a session's
temporary folders (``tempdirs``), and the small widgets every page uses (``widgets``). Nothing here computes
on a model.
"""
