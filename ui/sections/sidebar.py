"""The shared sidebar every page draws first, and the choices it returns (``AppContext``).

Every page begins with

    from ui.sections.sidebar import sidebar
    app = sidebar()                 # draws the shared sidebar, returns the choices
    result = app.require_analysis() # the input's tokens, translation and Trace (or a warning and stop)

``app.pipeline`` is the loaded ``transformer.pipeline.Pipeline``; ``app.analysis()`` is the
greedy translation of ``app.text`` with the Trace of its teacher-forced forward pass, from
the caches of ``ui.compute.analysis``.

Why each page draws the sidebar itself rather than ``app.py``: under
``streamlit.testing.v1.AppTest`` a page of an app with a ``pages/`` folder is run through
the legacy pages mechanism, without the entry point, so a sidebar drawn by ``app.py``
would be missing there. A page that calls ``sidebar()`` has it in the browser and in tests.

The choices live in plain ``st.session_state`` keys (``MODEL``, ``TEXT``, ``DEVICE`` of
``ui.state.settings``); the widgets have their own keys and are re-seeded from the plain ones on
every run, because a widget's value does not survive a page on which it is not drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import streamlit as st
import torch

from transformer.output_bounds import DECODE_SECONDS, timeout_message
from transformer.pipeline import Pipeline
from ui.compute import analysis
from ui.compute.analysis import Ablation, Analysis, BatchAnalysis
from ui.models import menu as model_menu
from ui.models import training_job
from ui.models.menu import (
    ModelEntry,
    available_models,
    devices,
    load_pipeline,
    register_finished_training,
    select_model,
)
from ui.models.uploads import open_folder_widget, upload_widget
from ui.sections import compare
from ui.state import links, presentation, routing, settings


@dataclass
class AppContext:
    """The shared choices of this run: model, device, input text (and the model's examples)."""

    model: ModelEntry | None
    pipeline: Pipeline | None
    device: str
    text: str
    examples: list[tuple[str, str]] = field(default_factory=list)
    second: compare.Second | None = None  # the sidebar's "Compare with" model, on the pages that draw one

    @property
    def model_key(self) -> str:
        return self.model.key if self.model else ""

    def second_app(self) -> AppContext | None:
        """The same choices with the sidebar's "Compare with" model in place of the model (or None)."""
        if self.second is None:
            return None
        entry = ModelEntry(self.second.label, self.second.key, "compare")
        return AppContext(entry, self.second.pipeline, self.device, self.text, self.examples)

    def analysis(self, ablate: Ablation | None = None) -> Analysis | None:
        """The input through the model (cached), or None with a message on the page for bad input."""
        if self.pipeline is None:
            st.warning("No model is loaded: choose or upload one in the sidebar.")
            return None
        if not self.text.strip():
            st.warning("The input sentence is empty: type one in the sidebar or pick an example.")
            return None
        try:
            result = analysis.analyse(self.model_key, self.device, self.pipeline, self.text, ablate)
        except ValueError as error:  # empty after cleaning, nothing tokenized, a bad ablation
            st.warning(f"Cannot run this input: {error}")
            return None
        if not ablate:
            if result.result.unknown_chars:
                shown = " ".join(repr(c) for c in result.result.unknown_chars)
                st.warning(f"Characters this model's tokenizer never saw became <unk>: {shown}. "
                           "Expect a poor translation.")
            if result.result.truncated:
                st.warning(f"The input is longer than the model's {self.pipeline.config.max_len} positions "
                           "and was cut.")
        if result.result.timed_out:
            st.warning(f"Translating stopped at its time limit: {timeout_message(DECODE_SECONDS)}.")
        return result

    def batch(self, texts: Sequence[str]) -> BatchAnalysis:
        """Several sentences as one padded batch: greedy outputs as decoder inputs, one traced forward."""
        return analysis.batch(self.model_key, self.device, self.pipeline, texts)

    def parity(self, result: Analysis) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits of this model and of its copy built from torch.nn.Transformer on the analysed input."""
        return analysis.parity(self.model_key, self.device, self.pipeline, result)

    def ablated_logits(self, result: Analysis, ablate: Ablation) -> torch.Tensor:
        """Logits on the analysed input (same decoder input) with the given heads switched off."""
        return analysis.ablated_logits(self.model_key, self.device, self.pipeline, result, ablate)

    def require_model(self) -> None:
        """Stop the page with a message when no model is available or the chosen one did not load."""
        if self.pipeline is not None:
            return
        if self.model is None:
            st.info(model_menu.no_model_message())
        else:
            st.error("The chosen model could not be loaded; pick another one in the sidebar.")
        st.stop()

    def require_analysis(self, ablate: Ablation | None = None) -> Analysis:
        """``analysis()``, or stop the page after its message."""
        result = self.analysis(ablate)
        if result is None:
            st.stop()
        return result


def _seed_widget(widget_key: str, value: Any) -> None:
    """Give a widget the shared value before it is drawn (see the module docstring)."""
    st.session_state[widget_key] = value


def _on_model_change() -> None:
    select_model(st.session_state[settings.MODEL_WIDGET])


def _on_example_change() -> None:
    choice = st.session_state.get(settings.EXAMPLE_WIDGET)
    if choice:
        st.session_state[settings.TEXT] = choice


TEXT_CUT = "input_text_cut"  # session_state: the length of a text that was cut to MAX_INPUT_CHARS, to say so


def _on_text_change() -> None:
    text = st.session_state[settings.TEXT_WIDGET] or ""
    if len(text) > settings.MAX_INPUT_CHARS:  # cut with a notice (a widget's max_chars drops a paste silently)
        st.session_state[TEXT_CUT] = len(text)
        text = text[: settings.MAX_INPUT_CHARS]
    st.session_state[settings.TEXT] = text


def _follow_link(entries: dict[str, ModelEntry]) -> None:
    """The opening link's model and text (see ui/state/links.py): an unknown model gets a notice."""
    model = links.incoming("model")
    if model is not None and model.startswith(model_menu.RUN_LINK):  # a kept run by its link id (public mode)
        label = model_menu.follow_run_link(model)
        if label is None:
            links.notice(f"the linked run is no longer kept on this server; showing {next(iter(entries), 'none')}")
            model = None
        else:
            entries.update({entry.label: entry for entry in available_models()})
            model = label
    if model is not None:
        model = model_menu.find_label(entries, model)  # a renamed run is still found by its run id
        if model in entries:
            if model != st.session_state.get(settings.MODEL):
                select_model(model)
        elif model_menu.looks_like_run(model):
            links.notice(f"the run {model[:60]!r} is no longer kept on this server (deleted, or removed when newer "
                         f"runs came); showing {next(iter(entries), 'none')}")
        else:
            links.notice(f"there is no model {model[:60]!r} here; showing {next(iter(entries), 'none')}")
    text = links.incoming("text")
    if text is not None:
        st.session_state[settings.TEXT_WIDGET] = text
        _on_text_change()  # cut to the input's limit, with its notice


def _on_device_change() -> None:
    st.session_state[settings.DEVICE] = st.session_state[settings.DEVICE_WIDGET]


def _announce(ended: training_job.TrainingJob) -> None:
    """A toast for a training run that ended while another page was shown."""
    if ended.registered_label:
        st.toast(f"Training finished: “{ended.registered_label}” is now in the model menu.",
                 icon=":material/check_circle:")
    elif ended.registration_error:
        st.toast(f"The training run ended but its checkpoint cannot be used: {ended.registration_error}",
                 icon=":material/error:")
    elif ended.status == training_job.FAILED:
        st.toast(f"Training failed: {ended.error}", icon=":material/error:")


def sidebar(*, require_model: bool = True, select_trained: bool = False, with_compare: bool = False) -> AppContext:
    """Draw the shared sidebar (model, upload, input sentence, examples, device) and return the choices.

    With ``require_model`` (every page but training) the page stops with a message when no
    model is available or the chosen one does not load. A training run that ended since the
    last script run joins the model menu, with a toast; ``select_trained`` (the Training page)
    also makes it the current model, where another page keeps the model the user is looking at.
    ``with_compare`` (Attention, Explain, Decoding) adds the "Compare with" menu (ui/sections/compare.py).
    """
    routing.route_through_app()  # a fresh server's first deep link: through app.py, as any other run
    ended = register_finished_training(select=select_trained)
    if ended is not None and not select_trained:  # the Training page says it in its own words
        _announce(ended)
    bar = st.sidebar
    model_box = bar.container()
    if not settings.public():
        with bar.expander("Upload or open a model"):
            upload_widget()
            open_folder_widget()
    elif settings.uploads_allowed():  # public mode: no folder of the server opens; uploads only when allowed
        with bar.expander("Upload a model"):
            upload_widget()

    entries = {entry.label: entry for entry in available_models()}
    if st.session_state.get(settings.MODEL) not in entries:
        st.session_state[settings.MODEL] = next(iter(entries), None)
        st.session_state[settings.TEXT] = None
    links.take_incoming(off_when_absent={presentation.LINK_PARAM: "0"})  # Back from a present=1 view
    _follow_link(entries)
    device = st.session_state.get(settings.DEVICE)
    if device not in devices():
        device = st.session_state[settings.DEVICE] = "cpu"

    entry, pipeline = None, None
    if not entries:
        model_box.info(f"No model yet: train one on the Training page, upload or open one below, or put model "
                       f"folders (ours or Hugging Face opus-mt) into {settings.models_dir()}.")
    else:
        _seed_widget(settings.MODEL_WIDGET, st.session_state[settings.MODEL])
        model_box.selectbox("Model", list(entries), key=settings.MODEL_WIDGET, on_change=_on_model_change)
        entry = entries[st.session_state[settings.MODEL]]
        try:
            pipeline = load_pipeline(entry, device)
        except model_menu.LOAD_ERRORS as error:  # a message, never a traceback (ui/models/menu.py)
            message = model_menu.load_error_text(error)
            model_box.error(f"Cannot load {entry.label}: {message[:400]}{'...' if len(message) > 400 else ''}")

    examples = analysis.examples_for(pipeline) if pipeline is not None else []
    if st.session_state.get(settings.TEXT) is None:  # a new model: start from a mid-length example
        st.session_state[settings.TEXT] = examples[len(examples) // 2][0] if examples else ""
    if examples:
        bar.selectbox("Example sentences", [src for src, _ in examples], index=None, key=settings.EXAMPLE_WIDGET,
                      placeholder="Pick an example", on_change=_on_example_change)
    _seed_widget(settings.TEXT_WIDGET, st.session_state[settings.TEXT])
    bar.text_input("Input sentence", key=settings.TEXT_WIDGET, on_change=_on_text_change,
                   help=f"Up to {settings.MAX_INPUT_CHARS} characters; a longer text is cut, with a notice.")
    cut = st.session_state.pop(TEXT_CUT, None)
    if cut:
        bar.warning(f"The input had {cut:,} characters and was cut to the first {settings.MAX_INPUT_CHARS}.")
    expected = dict(examples).get(st.session_state[settings.TEXT])
    if expected:
        bar.caption(f"Expected output: {expected}")
    if pipeline is not None:  # said next to the input, on every page: the output below it may be wrong
        for problem in pipeline.domain_warnings(st.session_state[settings.TEXT] or ""):
            bar.warning(f"Outside what this model learned: {problem}", icon=":material/warning:")

    second = compare.compare_widget(entries, entry, device) if with_compare and pipeline is not None else None
    _seed_widget(settings.DEVICE_WIDGET, device)
    bar.selectbox("Device", devices(), key=settings.DEVICE_WIDGET, on_change=_on_device_change)
    if pipeline is not None:
        what = model_menu.describe(pipeline)
        bar.caption(f"{what[:1].upper()}{what[1:]} · {pipeline.model.num_parameters():,} parameters · "
                    f"device {pipeline.device}")

    presentation.switch(bar)
    presentation.style_page()
    links.start({"model": model_menu.link_value(entry), "text": st.session_state[settings.TEXT],
                 "compare": second.label if second is not None else None,
                 presentation.LINK_PARAM: presentation.link_value()})
    app = AppContext(entry, pipeline, device, st.session_state[settings.TEXT], examples, second)
    if require_model:
        app.require_model()
    return app
