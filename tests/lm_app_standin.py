"""A stand-in sidebar for the Explain page's tests of decoder-only models: it hands the page an ``LMPipeline`` and
the shared analysis of a prompt and a short greedy continuation (``N_NEW`` tokens, where the app's is 20: the
tests stay fast), built as ``ui.compute.analysis._analyse_lm`` builds it (``LMPipeline.trace``, the sequence's
readable pieces). tests/test_lm_explain_page.py's last test goes through the real sidebar (``app_helpers.open_page``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from ui.compute import analysis
from ui.compute.analysis import Analysis
from ui.models.menu import ModelEntry
from ui.sections import app_context, compare
from ui.sections import sidebar as sidebar_module
from ui.sections.app_context import AppContext
from ui.state.settings import RECORD_TOP_K

N_NEW = 5  # generated tokens: the tests' continuations (the app's default is 20: LMPipeline.trace)


def lm_analysis(pipe, text: str, max_new_tokens: int = N_NEW) -> Analysis:  # noqa: ANN001  (an LMPipeline)
    """The analysis h-lmapp1 gives a decoder-only model: the prompt continued greedily, the trace of one forward
    over prompt + continuation (no ``src.ids``: no encoder)."""
    result = pipe.trace(text, max_new_tokens=max_new_tokens, record_top_k=RECORD_TOP_K, warn=False)
    sequence = pipe.tokenizer.display_pieces(result.trace["tgt.ids"][0].tolist())
    return Analysis(text, result, list(result.src_pieces), sequence, result.output_text, pipe.eos_ids[0])


def open_lm_page(monkeypatch: pytest.MonkeyPatch, page: str, pipeline, key: str, text: str,  # noqa: ANN001
                 max_new_tokens: int = N_NEW, second: compare.Second | None = None) -> AppTest:
    """``page`` (a path) run with a sidebar that hands it ``pipeline`` as the model ``key`` (the caches keep
    results per key for the test process's life: one key per pipeline), ``text`` as the prompt and ``second`` as
    the "Compare with" model (a translation model's input is analysed as the real sidebar's is)."""
    entry = ModelEntry(f"tiny {key}", key, "opened")
    monkeypatch.setattr(sidebar_module, "sidebar", lambda **_: AppContext(entry, pipeline, "cpu", text,
                                                                          second=second))
    real_key, real_analyse = app_context.cache_key, analysis.analyse
    monkeypatch.setattr(app_context, "cache_key", lambda key, pipe: key if getattr(pipe, "kind", "") == "decoder"
                        else real_key(key, pipe))  # a language model has no language pair
    monkeypatch.setattr(analysis, "analyse", lambda model_key, device, pipe, text, ablate=None, **_:
                        lm_analysis(pipe, text, max_new_tokens) if getattr(pipe, "kind", "") == "decoder"
                        else real_analyse(model_key, device, pipe, text, ablate))
    return AppTest.from_file(str(Path(page).resolve()), default_timeout=300).run()
