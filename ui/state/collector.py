"""What the server's garbage collector walks: the libraries' own objects are taken out of its full collections, so
that a full collection no longer stops the server for a fraction of a second.

CPython frees most objects by reference counting; its cycle collector (generational) also runs a *full*
collection now and then (when the objects that survived the younger generations have grown by a quarter since
the last one), and a full collection walks every container object the process tracks while holding the GIL.
With Streamlit, torch, numpy, pandas, pyarrow and Plotly imported the server tracks about 260,000 of them (module
dicts, functions, classes, Plotly's validators) that live as long as the process. Walking them took 0.2 s on an
idle core and 0.15-1.3 s on the load test's busy cores, 14 times in its first minute (``gc.callbacks`` in the
server, docs/benchmarks.md); all that time no other thread runs, the server's event loop included, so even
/_stcore/health went unanswered. (``runner.postScriptGC = false`` in .streamlit/config.toml removed the full
collection Streamlit itself ran after every script run; these are Python's own.)

``freeze_imports`` imports those libraries (every page imports them anyway), runs one full collection (so that no
garbage is frozen) and calls ``gc.freeze()``: every object alive at that moment moves to a permanent generation
that no collection walks again (Python >= 3.7; the Python docs' ``gc.freeze``, and Instagram's "Dismissing Python
Garbage Collection at Instagram", 2017, for the same use on a web server). Modules imported later by one page
bring their own: the Explain page's Captum brings matplotlib, IPython and sympy, 115,000 objects more; so a run
that finds ``NEW_MODULES`` or more modules imported since the last freeze freezes again. That happens a handful of
times in a server's life (once per lazily imported library), never per run. Cycles among later objects (figures,
models, session state) are still collected, each full collection now walking only those. The cost: an object
alive at a freeze that later becomes part of an unreachable cycle is never freed (other sessions' objects of that
moment among them): a bounded amount, a handful of times.

It changes the whole process, so ``app.py`` asks for it at the end of every run (after the page is drawn: imported
before the page, the libraries delayed the first page's title by 2-3 s at start-up) and it acts only when imports
brought new modules: at the first run, and after the few runs that import a library lazily.
"""

from __future__ import annotations

import gc
import importlib
import sys
import threading

LIBRARIES = ("numpy", "pandas", "pyarrow", "plotly.graph_objects", "torch")  # what every page imports
NEW_MODULES = 50  # modules imported since the last freeze that make the next run freeze again

_LOCK = threading.Lock()
_modules_at_freeze = 0  # len(sys.modules) at the last freeze; 0: none yet


def freeze_imports() -> bool:
    """Freeze (module docstring) when no freeze was done yet in this process (after importing ``LIBRARIES``) or
    when ``NEW_MODULES`` or more modules were imported since the last one; True when it froze. Otherwise it returns
    at once; a run arriving while another freezes waits for it."""
    global _modules_at_freeze
    if _modules_at_freeze and len(sys.modules) < _modules_at_freeze + NEW_MODULES:
        return False
    with _LOCK:
        if _modules_at_freeze and len(sys.modules) < _modules_at_freeze + NEW_MODULES:
            return False
        for name in LIBRARIES:
            importlib.import_module(name)
        gc.collect()
        gc.freeze()
        _modules_at_freeze = len(sys.modules)
    return True
