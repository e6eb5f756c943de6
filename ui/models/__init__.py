"""Models and runs: the model menu and loading (``menu``), uploaded or opened folders (``uploads``), runs trained
here and kept (``runs``), and the Training page's policy, defaults and background job (``training``,
``training_defaults``, ``training_job``).
"""
