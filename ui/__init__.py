"""The Streamlit app's own code; the pages only connect widgets to it.

- ``settings``: folders, environment variables, session_state and widget keys, limits
- ``models``: the model menu (shipped, trained and uploaded models) and loading them (cached)
- ``analysis``: the cached computations on the current input (trace, batch, parity, ablation, tokenizers)
- ``decoding``: beam search and sampling for the Decoding page (cached)
- ``training``: the Training page's policy (config, run folder, uploaded pairs) and its snapshots
- ``training_job``: a training run off the script thread, one per browser session
- ``sidebar``: the shared sidebar every page draws, and the choices it returns (``AppContext``)
- ``uploads``: unpacking an uploaded checkpoint .zip safely, and its widget
- ``widgets``: small helpers (an error box instead of a traceback, a CSV button)
- ``charts``: pure chart functions, data in, figure or table out

The model logic lives in the ``transformer`` package; nothing there imports this package.
"""
