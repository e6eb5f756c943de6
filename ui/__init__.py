"""The Streamlit app's own code: shared state and sidebar (``state``), pure chart functions (``charts``).

The model logic lives in the ``transformer`` package; nothing there imports this package.
"""
