"""The server's garbage collector, set once per process: the libraries' own objects are taken out of its full
collections, so that a full collection no longer stops the server for a fraction of a second.

CPython frees most objects by reference counting; its cycle collector (generational) also runs a *full*
collection now and then (when the objects that survived the younger generations have grown by a quarter since
the last one), and a full collection walks every container object the process tracks while holding the GIL.
With Streamlit, torch, numpy, pandas, pyarrow and Plotly imported the server tracks about 260,000 of them (module
dicts, functions, classes, Plotly's validators) that live as long as the process. Walking them took 0.2 s on an
idle core and 0.3-1.3 s on the load test's busy cores, 15 times in its first minute (``gc.callbacks`` in the
server, docs/benchmarks.md); all that time no other thread runs, the server's event loop included, so even
/_stcore/health went unanswered. (``runner.postScriptGC = false`` in .streamlit/config.toml removed the full
collection Streamlit itself ran after every script run; these are Python's own.)

``freeze_libraries`` imports those libraries (every page imports them anyway), runs one full collection (so that
no garbage is frozen) and calls ``gc.freeze()``: every object alive at that moment moves to a permanent generation
that no collection walks again (Python >= 3.7; the Python docs' ``gc.freeze``, and Instagram's "Dismissing Python
Garbage Collection at Instagram", 2017, for the same use on a web server). Cycles among later objects (figures,
models, session state) are still collected, each full collection now walking only those. The cost: an object
alive at the freeze that later becomes part of unreachable cycle is never freed; at the first script run of the
process that is the libraries and the first session's state, a bounded amount once.

It is a process-wide setting, so it is done once per process (the first script run's ``app.py``), never per call.
"""

from __future__ import annotations

import gc
import importlib
import threading

LIBRARIES = ("numpy", "pandas", "pyarrow", "plotly.graph_objects", "torch")  # what every page imports

_LOCK = threading.Lock()
_frozen = False


def freeze_libraries() -> bool:
    """Once per process: import ``LIBRARIES``, collect, and freeze every object alive (module docstring). True
    on the call that froze; False on every later call, which returns at once (a session's run arriving while
    the first one freezes waits for it)."""
    global _frozen
    if _frozen:
        return False
    with _LOCK:
        if _frozen:
            return False
        for name in LIBRARIES:
            importlib.import_module(name)
        gc.collect()
        gc.freeze()
        _frozen = True
    return True
