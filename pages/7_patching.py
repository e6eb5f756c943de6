"""Page 7: activation patching: which activations carry the difference between two inputs?"""

import streamlit as st

from ui.charts import heads as charts
from ui.charts.text_diff import compared_html
from ui.charts.tokens import visible_piece
from ui.compute import analysis, explain, heads, patching
from ui.compute.decoding import decoder_only
from ui.figures import chart, show_chart
from ui.sections import heads_navigation as navigation
from ui.sections import lm_patching
from ui.sections.input_analysis import require_analysis
from ui.sections.sidebar import sidebar
from ui.state.settings import MAX_INPUT_CHARS
from ui.state.widgets import asked, csv_button, guard

app = sidebar()

st.title("Activation patching")
st.markdown(
    "Attention and attributions are correlations; patching is an experiment. Run the model on a **corrupted** "
    "input (one token changed), then copy a single activation from the run on the **clean** input and see how "
    "much of the clean answer comes back (Meng et al. 2022, *Locating and Editing Factual Associations in GPT*; "
    "the logit-difference form of Wang et al. 2022, *Interpretability in the Wild*):"
)
st.latex(r"\text{effect} = \frac{LD_{patched} - LD_{corrupt}}{LD_{clean} - LD_{corrupt}}, \qquad "
         r"LD = \text{logit}(\text{answer}) - \text{logit}(\text{wrong})")
st.caption("1: this activation alone restores the clean answer; 0: it changes nothing. Both inputs must have "
           "the same number of tokens, so that every position has a partner.")

clean = require_analysis(app)
if decoder_only(app.pipeline):  # a language model: a prompt pair with a swapped name, the last position's answer
    lm_patching.show(app, clean)
    st.stop()
suggestions = patching.suggested_pairs(app.pipeline)
if suggestions:
    pair = st.selectbox("Suggested pairs (they differ in one token)", [None, *suggestions], key="patch_pair",
                        format_func=lambda p: "Pick a pair" if p is None else f"{p[0]}  →  {p[1]}")
    if pair is not None:
        st.button("Use this pair", on_click=navigation.use_pair, args=pair, key="patch_use_pair")
navigation.seed_corrupt_input(app.pipeline, clean.text)
corrupt_text = st.text_input("Corrupted input (the clean one is the sidebar's input)", key=navigation.CORRUPT,
                             max_chars=MAX_INPUT_CHARS)[:MAX_INPUT_CHARS]  # max_chars is the browser's check

with guard("Patching"):
    if navigation.corrupted_run_waits(app, clean, corrupt_text):  # a large model: the button first
        st.stop()
    try:
        corrupt = analysis.analyse(app.model_key, app.device, app.pipeline, corrupt_text)
    except ValueError as error:
        st.warning(f"Cannot run the corrupted input: {error}")
        st.stop()
    # both pairs in full, the words that differ marked (a metric cut them exactly there)
    st.markdown(compared_html("Clean input", clean.text, "Corrupted input", corrupt.text)
                + compared_html("Clean translation", clean.output_text, "Corrupted translation", corrupt.output_text),
                unsafe_allow_html=True)
    for problem in app.pipeline.domain_warnings(corrupt_text):
        st.warning(f"The corrupted input leaves what this model learned: {problem}")
    if len(corrupt.src_tokens) != len(clean.src_tokens):
        st.warning(f"The corrupted input has {len(corrupt.src_tokens)} source tokens, the clean one "
                   f"{len(clean.src_tokens)}: patching pairs positions one to one, so it needs as many.")

    rows = clean.output_tokens
    navigation.follow_pair(clean, corrupt)  # a new pair: the picker starts where the translations differ
    position = st.selectbox("Explain the clean output token", range(len(rows)), key=navigation.POSITION,
                            format_func=lambda t: f"{t}: {visible_piece(rows[t])}")
    if not heads.runs_by_itself(app.pipeline) and not asked(
            navigation.patching_key(app, clean, corrupt_text), "Run activation patching",
            button_key="patch_run", help="Runs the model once per activation and position: seconds on a small "
                                         "model, longer on opus-mt."):
        st.info("Nothing is computed until you press the button. The pair is yours: the clean input is the "
                "sidebar's, the corrupted one the box above (the same number of tokens).")
        st.stop()
    try:
        table = patching.patching(app.model_key, app.device, app.pipeline, clean, corrupt_text, position)
    except ValueError as error:
        st.warning(f"Cannot patch these inputs: {error}")
        st.stop()
    if position < len(corrupt.output_tokens) and corrupt.output_tokens[position] == rows[position]:
        st.warning(f"Both inputs give “{rows[position]}” here, so the difference being restored is small and the "
                   "effects are ratios of small numbers: pick an output token where the translations differ.")
    dec_tokens = explain.explained_positions(app.pipeline, clean)
    said = patching.strongest(table, clean.src_tokens, dec_tokens)
    if said:
        st.markdown("**The largest effects:** " + "; ".join(said) + ". An effect near 1 at one site means that "
                    "activation carries the whole difference between the inputs for this token; effects spread "
                    "thinly mean the information travels along several paths.")
    else:
        st.info("Every effect is undefined here: the two inputs give the same logit difference for this token.")

    enc_col, dec_col = st.columns(2)
    show_chart(chart(charts.patching_layers, table, "encoder", clean.src_tokens), half=True, key="patch_encoder",
               container=enc_col)
    show_chart(chart(charts.patching_layers, table, "decoder", dec_tokens), half=True, key="patch_decoder",
               container=dec_col)
    show_chart(chart(charts.patching_head_grid, table), key="patch_heads")
    csv_button(table, "activation_patching.csv", key="patch_csv")
