"""The shared sidebar every page draws first; it returns the choices as an ``AppContext``.

Every page begins with

    from ui.sections.sidebar import sidebar
    app = sidebar()                 # draws the shared sidebar, returns the choices (ui/sections/app_context.py)
    result = require_analysis(app)  # ui/sections/input_analysis.py: the input's analysis (or a notice and stop)

``sidebar()`` does its jobs in the sidebar's order, one function each: a training run that ended
(``_training_news``), where models come from (``_model_sources``: upload and open outside public mode, upload
only where public mode allows it), the models on offer and the opening link's choice (``_model_entries``,
``_follow_link``), the model menu and loading (``_model_menu``), a multilingual model's language pair
(``ui/sections/languages.py``: this session's view of the shared pipeline), the input sentence and what is said of it
(``_input_widgets``), the "Compare with" menu (ui/sections/compare.py), the device (``_device_menu``), and the
page's link and presentation mode (``_page_state``).

Why each page draws the sidebar itself rather than ``app.py``: under
``streamlit.testing.v1.AppTest`` a page of an app with a ``pages/`` folder is run through
the legacy pages mechanism, without the entry point, so a sidebar drawn by ``app.py``
would be missing there. A page that calls ``sidebar()`` has it in the browser and in tests.

The choices live in plain ``st.session_state`` keys (``MODEL``, ``TEXT``, ``DEVICE`` of
``ui.state.settings``); the widgets have their own keys and are re-seeded from the plain ones on
every run, because a widget's value does not survive a page on which it is not drawn.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from transformer.pipeline import Pipeline
from ui.compute import analysis
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
from ui.sections import compare, languages
from ui.sections.app_context import AppContext
from ui.state import links, presentation, routing, settings


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
        st.toast(f"Training finished: “{model_menu.session_menu_text(ended.registered_label)}” is now in the "
                 "model menu.",
                 icon=":material/check_circle:")
    elif ended.registration_error:
        st.toast(f"The training run ended but its checkpoint cannot be used: {ended.registration_error}",
                 icon=":material/error:")
    elif ended.status == training_job.FAILED:
        st.toast(f"Training failed: {ended.error}", icon=":material/error:")


def _training_news(select_trained: bool) -> None:
    """A training run that ended since the last script run joins the model menu; said with a toast except on
    the Training page (``select_trained``), which says it in its own words and makes it the current model."""
    ended = register_finished_training(select=select_trained)
    if ended is not None and not select_trained:
        _announce(ended)


def _model_sources(bar: DeltaGenerator) -> None:
    """Where a model comes from besides the menu: upload and open a folder outside public mode; in public mode
    no folder of the server opens, and uploads only where ``settings.uploads_allowed()`` says so."""
    if not settings.public():
        with bar.expander("Upload or open a model"):
            upload_widget()
            open_folder_widget()
    elif settings.uploads_allowed():
        with bar.expander("Upload a model"):
            upload_widget()


def _model_entries() -> dict[str, ModelEntry]:
    """The models on offer by label, the current one among them (a new one starts on an example), after the
    opening link's model and text (``_follow_link``)."""
    entries = {entry.label: entry for entry in available_models()}
    if st.session_state.get(settings.MODEL) not in entries:
        st.session_state[settings.MODEL] = next(iter(entries), None)
        st.session_state[settings.TEXT] = None
    links.take_incoming(off_when_absent={presentation.LINK_PARAM: "0"})  # Back from a present=1 view
    _follow_link(entries)
    return entries


def _chosen_device() -> str:
    """The session's device, "cpu" when the chosen one is not (or no longer) available."""
    device = st.session_state.get(settings.DEVICE)
    if device not in devices():
        device = st.session_state[settings.DEVICE] = "cpu"
    return device


def _model_menu(box: DeltaGenerator, entries: dict[str, ModelEntry], device: str
                ) -> tuple[ModelEntry | None, Pipeline | None]:
    """The model menu in ``box`` and the chosen model loaded on ``device``: (entry, pipeline), the pipeline None
    with a message when it cannot load, both None with a hint when there is no model at all."""
    if not entries:
        box.info(model_menu.no_model_message())  # in public mode no server path, and only what is offered
        return None, None
    _seed_widget(settings.MODEL_WIDGET, st.session_state[settings.MODEL])
    box.selectbox("Model", list(entries), key=settings.MODEL_WIDGET, on_change=_on_model_change,
                  format_func=lambda label: _menu_text(entries[label]))
    entry = entries[st.session_state[settings.MODEL]]
    try:
        return entry, load_pipeline(entry, device)
    except model_menu.LOAD_ERRORS as error:  # a message, never a traceback (ui/models/menu.py)
        message = model_menu.load_error_text(error)
        box.error(f"Cannot load {model_menu.menu_text(entry)}: {message[:400]}{'...' if len(message) > 400 else ''}")
        return entry, None


def _menu_text(entry: ModelEntry) -> str:
    """The model menu's text: the family beside the name where both fit the menu, else the name alone (the caption
    under the device menu names the family); a menu cut "tiny-mbart50 · mBART-50 (mbart)" at its edge."""
    text = model_menu.menu_text(entry)
    return text if languages.fits_menu(text) else entry.label


def _input_widgets(bar: DeltaGenerator, pipeline: Pipeline | None) -> list[tuple[str, str]]:
    """The example menu and the input sentence, with what is said of the input beside it: that it was cut, the
    example's expected output, the model's domain warnings. Returns the model's examples (source, expected)."""
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
    expected = analysis.expected_output(pipeline, st.session_state[settings.TEXT] or "", examples) \
        if pipeline is not None else None  # an example's target, else the task's for the user's own input, or why not
    if expected:
        bar.caption(expected)
    if pipeline is not None:  # said next to the input, on every page: the output below it may be wrong
        for problem in getattr(pipeline, "domain_warnings", lambda _: [])(st.session_state[settings.TEXT] or ""):
            bar.warning(f"Outside what this model learned: {problem}", icon=":material/warning:")
    return examples


def _device_menu(bar: DeltaGenerator, device: str, pipeline: Pipeline | None) -> None:
    """The device menu, and under it what the loaded model is, its size and where it runs."""
    _seed_widget(settings.DEVICE_WIDGET, device)
    bar.selectbox("Device", devices(), key=settings.DEVICE_WIDGET, on_change=_on_device_change)
    if pipeline is not None:
        what = model_menu.describe(pipeline)
        bar.caption(f"{what[:1].upper()}{what[1:]} · {pipeline.model.num_parameters():,} parameters · "
                    f"device {pipeline.device}")


def _page_state(bar: DeltaGenerator, entry: ModelEntry | None, pipeline: Pipeline | None,
                second: compare.Second | None) -> None:
    """The presentation-mode switch and style, and the page's link (model, text, a multilingual model's language
    pair, second model, presentation)."""
    presentation.switch(bar)
    presentation.style_page()
    links.start({"model": model_menu.link_value(entry), "text": st.session_state[settings.TEXT],
                 languages.SRC_LANG: getattr(pipeline, "src_lang", None),
                 languages.TGT_LANG: getattr(pipeline, "tgt_lang", None),
                 "compare": second.label if second is not None else None,
                 presentation.LINK_PARAM: presentation.link_value()})


def sidebar(*, require_model: bool = True, select_trained: bool = False, with_compare: bool = False) -> AppContext:
    """Draw the shared sidebar (model, upload, input sentence, examples, device) and return the choices.

    With ``require_model`` (every page but training) the page stops with a message when no
    model is available or the chosen one does not load. A training run that ended since the
    last script run joins the model menu, with a toast; ``select_trained`` (the Training page)
    also makes it the current model, where another page keeps the model the user is looking at.
    ``with_compare`` (Attention, Explain, Decoding) adds the "Compare with" menu (ui/sections/compare.py).
    """
    routing.route_through_app()  # a fresh server's first deep link: through app.py, as any other run
    _training_news(select_trained)
    bar = st.sidebar
    model_box = bar.container()  # the model menu on top, drawn once the link's choice is known
    _model_sources(bar)
    entries = _model_entries()
    device = _chosen_device()
    entry, pipeline = _model_menu(model_box, entries, device)
    pipeline = languages.language_menu(model_box, pipeline)  # this session's language pair (a view: never shared)
    examples = _input_widgets(bar, pipeline)
    second = compare.compare_widget(entries, entry, device) if with_compare and pipeline is not None else None
    if second is not None:  # the same pair for a second multilingual model that knows it
        second = replace(second, pipeline=languages.pair_for(second.pipeline, pipeline))
    _device_menu(bar, device, pipeline)
    _page_state(bar, entry, pipeline, second)
    app = AppContext(entry, pipeline, device, st.session_state[settings.TEXT], examples, second)
    if require_model:
        app.require_model()
    return app
