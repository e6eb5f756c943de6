"""The Patching page on a decoder-only language model: a prompt pair that differs in one swapped name or word
(Wang et al. 2022's indirect-object identification: "When Mary and John went to the store, John gave a drink to"
against the same with Mary and John swapped), the logit difference of the two swapped tokens at the last position as
the metric, every layer output and head patched at every prompt position (``lm_activation_patching``).

The clean prompt is the sidebar's; the corrupted one starts as its names swapped (``patching.swap_names``). Both must
have as many tokens; a pair that does not is named with its counts, and nothing runs."""

from __future__ import annotations

import streamlit as st

from ui.charts import heads as charts
from ui.charts.text_diff import compared_html
from ui.compute import analysis, patching
from ui.compute.analysis import Analysis
from ui.figures import chart, show_chart
from ui.sections import heads_navigation as navigation
from ui.sections.app_context import AppContext
from ui.state.settings import MAX_INPUT_CHARS
from ui.state.widgets import asked, csv_button

METRIC = "patch_lm_metric"  # session_state key of the metric's choice


def seed_corrupt_prompt(clean_text: str) -> None:
    """Start the corrupted prompt at the clean one's names swapped (the IOI twin), once per clean prompt."""
    if st.session_state.get(navigation.CORRUPT_FOR) == clean_text and st.session_state.get(navigation.CORRUPT):
        return
    st.session_state[navigation.CORRUPT] = patching.swap_names(clean_text) or clean_text
    st.session_state[navigation.CORRUPT_FOR] = clean_text


def show(app: AppContext, clean: Analysis) -> None:
    """The whole decoder-only section of the page, under its shared introduction."""
    pipe = app.pipeline
    piece = lambda i: pipe.tokenizer.display_pieces([i])[0]  # noqa: E731  (readable byte-level pieces)
    st.markdown("For a language model the pair is one prompt with a name or word swapped, as in Wang et al.'s "
                "indirect-object identification: the clean prompt should continue with the name that was not "
                "repeated; the swap makes the other name the right one. The metric is the logit difference of the "
                "two swapped tokens at the last position, and every layer output and head is patched at every "
                "prompt position.")
    st.button("Use the names example", key="patch_use_ioi", on_click=navigation.use_pair, args=patching.IOI_PAIR,
              help=f"{patching.IOI_PAIR[0]}  →  {patching.IOI_PAIR[1]}")
    seed_corrupt_prompt(clean.text)
    corrupt_text = st.text_input("Corrupted prompt (the clean one is the sidebar's)", key=navigation.CORRUPT,
                                 max_chars=MAX_INPUT_CHARS)[:MAX_INPUT_CHARS]
    st.markdown(compared_html("Clean prompt", clean.text, "Corrupted prompt", corrupt_text), unsafe_allow_html=True)
    try:
        _, _, answer, wrong = patching.lm_pair(pipe, clean.text, corrupt_text, chat=app.chat)
    except ValueError as error:
        st.warning(f"Cannot patch these prompts: {error}.")
        return
    metric = st.radio("Logit difference of", list(patching.LM_METRICS), key=METRIC,
                      format_func=patching.LM_METRICS.get, horizontal=True)
    if metric == "swapped":
        st.latex(rf"LD = \text{{logit}}(\texttt{{{_tex(piece(answer))}}}) - "
                 rf"\text{{logit}}(\texttt{{{_tex(piece(wrong))}}})\ \text{{at the last position}}")
    key = ("lm-patching", app.model_key, app.device, clean.text, corrupt_text, metric)
    if not asked(key, "Run activation patching", button_key="patch_run",
                 help="Continues the corrupted prompt, then runs the model once per activation and position."):
        st.info("Nothing is computed until you press the button: it runs the model once per layer output and head "
                "at every prompt position.")
        return
    corrupt = analysis.analyse(app.model_key, app.device, pipe, corrupt_text, chat=app.chat)
    st.markdown(compared_html("Clean continuation", clean.output_text, "Corrupted continuation",
                              corrupt.output_text), unsafe_allow_html=True)
    table = patching.lm_patching(app.model_key, app.device, pipe, clean.text, corrupt_text, metric, chat=app.chat)
    said_answer, said_wrong = piece(table.attrs["answer"]), piece(table.attrs["wrong"])
    st.markdown(f"Logit difference `{said_answer}` − `{said_wrong}` at the last position: clean "
                f"**{table.attrs['clean_difference']:.3f}**, corrupted **{table.attrs['corrupt_difference']:.3f}**.")
    tokens = clean.src_tokens
    said = patching.strongest(table, tokens, tokens, lm=True)
    if said:
        st.markdown("**The largest effects:** " + "; ".join(said) + ". Before the first swapped token every effect "
                    "is 0 (the two runs are equal there); the last layer at the last position restores it all.")
    else:
        st.info("Every effect is undefined here: the two prompts give the same logit difference.")
    show_chart(chart(charts.patching_layers, table, "decoder", tokens), key="patch_decoder")
    layer = st.selectbox("Heads of layer", range(pipe.config.n_decoder_layers), key="patch_lm_layer")
    show_chart(chart(charts.patching_heads, table, "decoder", layer, tokens), key="patch_layer_heads")
    show_chart(chart(charts.patching_head_grid, table), key="patch_heads")
    csv_button(table, "activation_patching.csv", key="patch_csv")


def _tex(text: str) -> str:
    """A token inside \\texttt{}: LaTeX's special characters escaped."""
    out = text
    for char, escaped in (("\\", r"\backslash "), ("{", r"\{"), ("}", r"\}"), ("_", r"\_"), ("$", r"\$"),
                          ("#", r"\#"), ("%", r"\%"), ("&", r"\&"), ("^", r"\hat{}"), ("~", r"\sim ")):
        out = out.replace(char, escaped)
    return out
