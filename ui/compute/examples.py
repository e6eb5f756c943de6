"""A model's example inputs, what the sidebar says of the expected output, and tokenizers retrained for comparison.

Moved out of ``ui.compute.analysis`` (which re-exports every name, so ``analysis.examples_for`` still works): the
examples come from a model's training meta, its built-in task or its Hugging Face family; a decoder-only model's
prompt has no expected continuation, and the sidebar says why (``NO_EXPECTED_CONTINUATION``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import streamlit as st

from transformer.lm_pipeline import LMPipeline
from transformer.pipeline import Pipeline
from ui.models.menu import is_decoder_only
from ui.state.settings import N_EXAMPLES


@st.cache_data(max_entries=64, show_spinner=False)
def _examples(task: str | None, options: dict, src_lang: str, tgt_lang: str) -> list[tuple[str, str]]:
    """A few (source, target) pairs of the model's task, freshly generated."""
    from transformer.text.tasks import TASKS, make_task

    if task not in TASKS:
        return []
    try:
        splits = make_task(task, n_train=N_EXAMPLES, n_valid=0, n_test=0, seed=12345,
                           src_lang=src_lang, tgt_lang=tgt_lang, **options)
    except Exception:  # an option this version of the tasks does not know: no examples, not a broken app
        return []
    return sorted(splits.train, key=lambda pair: len(pair[0]))


def builtin_task(pipeline: Pipeline) -> str | None:
    """The built-in task a model was trained on (its examples, alignment and grammar are known), or None for a
    model trained on a user's file or on a task this version does not have."""
    from transformer.text.tasks import TASKS

    task = pipeline.meta.get("task")
    return task if task in TASKS and not pipeline.meta.get("data") else None


def hub_examples(model_type: str, name: str, src_lang: str | None) -> list[str]:
    """Example inputs for a Hugging Face folder, as its family gives them (``Family.examples_for``: English
    sentences where the model reads English, T5's with its translation prefix; none where the source is another
    language, in which we hold no sentences)."""
    from transformer.hub.families import family_or_none

    family = family_or_none(model_type)
    return family.examples_for(name, src_lang) if family else []


def examples_for(pipeline: Pipeline) -> list[tuple[str, str]]:
    """Example (source, expected target) pairs for a model, from its training meta (a Hugging Face model reading
    English gets a few English sentences, with no expected target: ``hub_examples``)."""
    meta = pipeline.meta
    given = meta.get("examples")
    if isinstance(given, list) and given:
        return [(str(e[0]), str(e[1])) if isinstance(e, list | tuple) else (str(e), "") for e in given]
    if meta.get("source") == "huggingface":
        src_lang = None if is_decoder_only(pipeline) else pipeline.src_lang  # a prompt has no source language
        texts = hub_examples(str(meta.get("model_type", "")), str(meta.get("name", "")), src_lang)
        return [(text, "") for text in texts]
    return _examples(builtin_task(pipeline), dict(meta.get("task_options") or {}),
                     str(meta.get("src_lang", "en")), str(meta.get("tgt_lang", "de")))


# What the sidebar says under a decoder-only model's prompt, in place of an expected output.
NO_EXPECTED_CONTINUATION = ("No expected output: a language model continues the prompt with what it finds likely, "
                            "and no rule gives the one right continuation of open text.")


def expected_output(pipeline: Pipeline | LMPipeline, text: str, examples: Sequence[tuple[str, str]]) -> str | None:
    """What the sidebar says under the input of what the model should answer: an example's target, else the
    reference the model's built-in task writes for the input (``transformer.text.domains.expected_target``: a
    user's own valid input too), else why there is none. None for an empty input."""
    from transformer.text.domains import expected_target

    if not text.strip():
        return None
    given = dict(examples).get(text)
    if given:
        return f"Expected output: {given}"
    if is_decoder_only(pipeline) and pipeline.meta.get("source") == "huggingface":  # ours: the task's rule
        return NO_EXPECTED_CONTINUATION
    task, meta = builtin_task(pipeline), pipeline.meta
    if task is None:
        why = ("a Hugging Face model translates open text, where no rule gives the one right answer"
               if meta.get("source") == "huggingface" else
               "this model learnt from its own pairs, and no rule gives the answer for a new input")
        return f"No expected output: {why}."
    try:
        return "Expected output: " + expected_target(task, text, src_lang=str(meta.get("src_lang", "en")),
                                                     tgt_lang=str(meta.get("tgt_lang", "de")),
                                                     options=dict(meta.get("task_options") or {}))
    except ValueError as error:
        return f"No expected output: {error}."


@st.cache_resource(max_entries=16, show_spinner="Training the tokenizer...")
def retrained_tokenizer(task: str, options_items: tuple, src_lang: str, tgt_lang: str, kind: str,
                        vocab_size: int, n_pairs: int = 2000) -> Any:
    """A shared tokenizer of another kind or size, trained on ``n_pairs`` pairs of a built-in task."""
    from transformer.text.tasks import make_task
    from transformer.text.tokenizers import build_tokenizers

    splits = make_task(task, n_train=n_pairs, n_valid=0, n_test=0, seed=0, src_lang=src_lang, tgt_lang=tgt_lang,
                       **dict(options_items))
    return build_tokenizers(splits, kind=kind, vocab_size=vocab_size, shared=True)[0]
