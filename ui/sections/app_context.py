"""``AppContext``: the sidebar's choices of this run (model, pipeline, device, input text), as plain state.

``ui.sections.sidebar.sidebar()`` draws the sidebar and returns one. It carries the choices and nothing else:
a page or section asks the compute layer itself, with the context's ``model_key``, ``device`` and
``pipeline`` (``ui.compute.analysis.parity(app.model_key, app.device, app.pipeline, result)``), and the input's
analysis with its notices on the page comes from ``ui.sections.input_analysis``. So there is one way to each
computation, not a second one through this class.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import streamlit as st

from transformer.pipeline import Pipeline
from ui.models.menu import ModelEntry, cache_key, is_decoder_only, no_model_message
from ui.sections import compare


@dataclass(frozen=True)
class AppContext:
    """The shared choices of this run: model, device, input text (and the model's examples)."""

    model: ModelEntry | None
    pipeline: Pipeline | None  # this session's: a multilingual model's view with the sidebar's language pair
    device: str
    text: str
    examples: list[tuple[str, str]] = field(default_factory=list)
    second: compare.Second | None = None  # the sidebar's "Compare with" model, on the pages that draw one
    chat: bool = False  # a decoder-only model's prompt goes through its chat template (the sidebar's "Chat")

    @property
    def model_key(self) -> str:
        """The chosen model's key in the caches of ``ui.compute`` ("" when there is none), with a multilingual
        model's language pair in it (``ui.models.menu.cache_key``) and "|chat" when the prompt goes through the
        chat template: every cached computation sees the pair and the template."""
        if not self.model:
            return ""
        return cache_key(self.model.key, self.pipeline) + ("|chat" if self.chat else "")

    @property
    def decoder_only(self) -> bool:
        """Whether the model is a decoder-only language model (``ui.models.menu.is_decoder_only``)."""
        return is_decoder_only(self.pipeline)

    def second_app(self) -> AppContext | None:
        """The same choices with the sidebar's "Compare with" model in place of the model (or None)."""
        if self.second is None:
            return None
        entry = ModelEntry(self.second.label, self.second.key, "compare", family=self.second.family)
        chat = self.chat and getattr(self.second.pipeline, "has_chat_template", False)
        return AppContext(entry, self.second.pipeline, self.device, self.text, self.examples, chat=chat)

    def require_model(self) -> None:
        """Stop the page with a message when no model is available or the chosen one did not load."""
        if self.pipeline is not None:
            return
        if self.model is None:
            st.info(no_model_message())
        else:
            st.error("The chosen model could not be loaded; pick another one in the sidebar.")
        st.stop()
