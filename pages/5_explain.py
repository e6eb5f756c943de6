"""Page 5: why did this output token come out? Every attribution method side by side, where each prediction comes
from (ALTI+), word alignments scored against gold, the randomization check, and the logit lens; for a language
model, each token of the prompt's continuation by the prompt and the tokens before it (ui/sections/lm_explain.py)."""

import streamlit as st

from ui.charts import explain as charts
from ui.charts.tokens import visible_piece
from ui.compute import explain
from ui.compute.analysis import first_chosen_output
from ui.figures import chart, show_chart
from ui.sections import explain as sections
from ui.sections import lm_explain
from ui.sections.input_analysis import analyse_input, require_analysis
from ui.sections.sidebar import sidebar
from ui.state import links, selection
from ui.state.widgets import csv_button, guard

app = sidebar(with_compare=True)
if app.decoder_only:  # a prompt's continuation: its own labels and sections
    lm_explain.lm_explain_page(app)
    st.stop()

st.title("Explain an output token")
st.markdown(
    "An attention heatmap shows where a head looked, not why a token came out. Each method below answers "
    "*which source tokens made this output token likely* in its own way, so read them side by side: where "
    "they agree, trust the answer more; where they disagree, ask which of them finds what is known to be true: "
    "*Do the methods agree?* scores each against the task's true alignment on this input, and *Word "
    "alignments* over many sentences against gold links."
)
with st.expander("The methods, and why they can disagree"):
    st.markdown(sections.METHODS_TEXT)

baseline = sections.choose_baseline()
analysis = require_analysis(app)
with guard("Explaining this translation"):
    methods = sections.methods_to_compute(app, analysis)
    try:
        with st.spinner("Explaining with every method..."):
            result = explain.explain(app.model_key, app.device, app.pipeline, analysis, methods, baseline)
    except ValueError as error:
        st.warning(f"Nothing to explain: {error}")
        st.stop()

    rows = result.out_tokens
    st.markdown(f"**Translation:** `{analysis.output_text or '(empty)'}` — choose an output token to explain:")
    links.restore("token", "explain_row", range(len(rows)), links.parse_int)
    selection.apply_output("explain_row", len(rows))
    reads = result.lens_positions  # row i reads reads[i] and predicts rows[i]: "der → Hund"

    def label(i: int) -> str:
        return f"{visible_piece(reads[i])} → {visible_piece(rows[i])}" if i < len(reads) else visible_piece(rows[i])

    chosen = st.pills("Output token", range(len(rows)), format_func=label, selection_mode="single",
                      default=None if "explain_row" in st.session_state  # a default beside a set value warns
                      else first_chosen_output(app.pipeline, analysis),  # past a forced language code
                      key="explain_row", label_visibility="collapsed")
    row = int(chosen) if chosen is not None and int(chosen) < len(rows) else 0  # a shorter new translation: 0
    selection.note_output("explain_row", row)
    for method, message in result.errors.items():
        st.info(f"{explain.title(method)} cannot run here: {message}")

    st.subheader(f"Which source tokens made “{rows[row]}” likely?")
    show_chart(chart(charts.token_row_bars, result.source, result.src_tokens, rows[row], row), key="explain_rowchart")
    csv_button(charts.row_frame(result.source, result.src_tokens, row), f"explain_row{row}.csv", key="explain_row_csv")
    sections.undefined_note(result, row)
    other_app = app.second_app()
    if other_app is not None:  # the sidebar's "Compare with" model: the same question, rows scaled alike
        st.markdown(f"**Beside it: {app.second.name}**")
        other = analyse_input(other_app)
        try:
            other_result = explain.explain(other_app.model_key, app.device, other_app.pipeline, other,
                                           sections.compare_methods(app, other_app, methods), baseline) \
                if other is not None else None
        except ValueError as error:
            st.info(f"{app.second.name}: nothing to explain ({error})")
            other_result = None
        if other_result is not None:
            other_row = min(row, len(other_result.out_tokens) - 1)
            show_chart(chart(charts.token_row_bars, other_result.source, other_result.src_tokens,
                             other_result.out_tokens[other_row], other_row), key="explain_rowchart_2")
    sections.ig_convergence(result, row, baseline)

    st.subheader("Every output token, every method")
    st.markdown("Each panel is output tokens (rows) × source tokens (columns). Rows are scaled per method so "
                "that each row's largest magnitude is 1: the panels share one colour scale. Value zeroing and ALTI+ "
                "appear twice: rolled out through every layer, and the last decoder layer alone (`· layer N`).")
    show_chart(chart(charts.method_grid, result.source, result.src_tokens, rows), key="explain_grid")
    sections.undefined_note(result)
    links.restore("method", "explain_csv_method", list(result.source))
    method = st.selectbox("Download one method's matrix", list(result.source), key="explain_csv_method",
                          format_func=explain.title)
    csv_button(charts.attribution_frame(result.source[method], result.src_tokens, rows), f"explain_{method}.csv",
               key="explain_matrix_csv")
    links.publish(token=row, method=method)

    st.subheader("Beyond one token")
    links.restore("more", "explain_more", list(sections.MORE))
    more = st.segmented_control("Show", list(sections.MORE), format_func=sections.MORE.get,
                                default=None if "explain_more" in st.session_state else "agreement",
                                key="explain_more", help="One section at a time: each is a chart the browser has to "
                                "draw.")
    links.publish(more=more)
    sections.show(more, app, analysis, result, baseline)
