"""The Training page's section 1 choices that are not the tokenizer's: the data (a built-in task with its options,
or the user's own pairs) and the architecture (the paper's encoder-decoder, or a decoder-only model)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from transformer.text import tasks as data
from ui.models import training
from ui.state.settings import uploads_allowed

BUILT_IN = "Built-in task"
ARCHITECTURES = {"encoder-decoder": "encoder-decoder (the paper)", "decoder": "decoder-only (GPT)"}
BOTH_HELP = ("The encoder-decoder of these settings, then its decoder-only twin (one stack of 2N layers), one after "
             "the other; section 5 shows them side by side.")


@dataclass
class DataChoice:
    """What to train on, as the widgets chose it."""

    source: str  # BUILT_IN or the user's own pairs
    task: str = "copy"
    src_lang: str = "en"
    tgt_lang: str = "de"
    options: dict[str, Any] = field(default_factory=dict)
    n_train: int = 20000
    data_path: str | None = None  # an uploaded pairs file, once it is usable
    example: tuple[str, str] | None = None

    @property
    def builtin(self) -> str | None:
        """The built-in task, or None for the user's own pairs."""
        return self.task if self.source == BUILT_IN else None

    @property
    def waiting(self) -> bool:
        """Own pairs chosen, and no usable upload yet."""
        return self.source != BUILT_IN and self.data_path is None


def data_choices() -> DataChoice:
    """The data column: a built-in task with its options and size, or an upload of the user's own pairs."""
    own = ["My own pairs (TSV/CSV)"] if uploads_allowed() else []  # public mode: only when uploads are allowed
    choice = DataChoice(st.radio("Data", [BUILT_IN, *own], key="train_source"))
    if choice.source == BUILT_IN:
        choice.task = task = st.selectbox("Task", data.TASKS, index=data.TASKS.index("reverse"), key="train_task")
        st.caption(data.describe_task(task))
        if task in ("numbers", "dates"):
            langs = data.NUMBER_LANGS if task == "numbers" else data.DATE_LOCALES
            left, right = st.columns(2)
            choice.src_lang = left.selectbox("From", langs, index=langs.index("en"), key="train_src_lang")
            choice.tgt_lang = right.selectbox("To", langs, index=langs.index("de"), key="train_tgt_lang")
        if task in ("copy", "reverse", "sort"):
            choice.options["max_len"] = st.slider("Longest string", 2, 24, 12, key="train_max_chars")
        if task == "numbers":
            choice.options["max_number"] = st.select_slider("Largest number", [99, 999, 9999, 99_999, 999_999],
                                                            value=9999, key="train_max_number")
        if task == "sentences":  # one clause learns in a minute; subordinate clauses (verb last) take longer
            choice.options["max_clauses"] = st.slider("Clauses per sentence, at most", 1, 3, 1,
                                                      key="train_max_clauses")
        choice.n_train = st.select_slider("Training pairs", [200, 1000, 2000, 5000, 10000, 20000], value=5000,
                                          key="train_n_train")
        try:
            choice.example = training.task_example(task, choice.src_lang, choice.tgt_lang, choice.options)
        except ValueError as error:
            st.error(str(error))
    else:
        uploaded = st.file_uploader("Pairs: one per line, source<TAB>target (or CSV)", type=["tsv", "csv", "txt"],
                                    key="train_upload", max_upload_size=training.MAX_PAIRS_MB)
        if uploaded is not None:
            checked = training.read_upload(uploaded)
            if checked[0] == "error":
                st.error(f"Cannot use this file: {checked[1]}")
            else:
                _, choice.data_path, n_pairs, choice.example = checked
                st.success(f"{n_pairs:,} pairs, e.g. {choice.example[0]!r} → {choice.example[1]!r}")
    if choice.example:
        st.caption(f"Example: {choice.example[0]!r} → {choice.example[1]!r}")
    return choice


def architecture_switch() -> str:
    """The one architecture switch: "encoder-decoder" or "decoder" (a decoder-only model of twice the layers
    per stack, one stack, ``transformer.train.compare.decoder_twin``)."""
    architecture = st.radio("Architecture", list(ARCHITECTURES), format_func=ARCHITECTURES.get, horizontal=True,
                            key="train_architecture")
    if architecture == "decoder":
        st.caption("One stack of 2N layers reads `source <s> target </s>` as one sequence and learns the target "
                   "(no encoder, no cross-attention), in one joint vocabulary: as many layers as the "
                   "encoder-decoder's two stacks. **Train both** trains the encoder-decoder and then this model "
                   "on the same recipe, to compare them in section 5.")
    return architecture
