"""Page 6: what does each head do? Roles, importance and alignment over many sentences, and a pruning curve."""

import streamlit as st

from ui import heads
from ui.charts import heads as charts
from ui.figure_cache import chart
from ui.presentation import show_chart
from ui.sidebar import sidebar
from ui.widgets import csv_button, guard

app = sidebar()

st.title("What does each head do?")
st.markdown(
    "One sentence shows one head's pattern; what a head *does* shows over many. Each head is measured over "
    f"{heads.N_SENTENCES} sentences of the model's task: how spread its attention is (entropy), how far it "
    "looks, how much weight it puts on the same, previous or next token or on `<s>`/`</s>`, and how much the "
    "loss rises when it alone is switched off (its **importance**, Michel et al. 2019, *Are Sixteen Heads "
    "Really Better than One?*). Because our tasks are generated, the true alignment (and, for `sentences`, "
    "the grammar) of every example is known, so the page can check which heads follow it (Clark et al. "
    "2019, *What Does BERT Look At?*; Voita et al. 2019 found positional, syntactic and rare-word heads)."
)
app.require_model()
with guard("Measuring the heads"):
    report = heads.head_report(app.model_key, app.device, app.pipeline)
    if isinstance(report, str):
        st.info(f"No head statistics: {report}.")
        st.stop()

    st.subheader("Every head at a glance")
    st.caption("Colour: the head's role (thresholds in `transformer/explain/heads.py`); size and number: its "
               "importance. Click a head to open it on the Attention page.")
    event = show_chart(chart(charts.head_grid, report.summary), key="heads_grid", on_select="rerun",
                       selection_mode="points")
    chosen = heads.clicked_head(event)
    if chosen is not None:
        heads.open_on_attention_page(*chosen)

    st.subheader("The heads that follow the task's structure")
    best = heads.best_heads(report)
    if best.empty:
        st.caption("This task gives no true alignment or grammar to check heads against.")
    else:
        st.markdown("For the alignment: the share of output tokens whose most-attended source token is a true "
                    "one. For a relation: the share of dependents whose most-attended token is their head word.")
        st.dataframe(best, hide_index=True)

    st.subheader("The summary table")
    st.dataframe(report.summary, hide_index=True)
    csv_button(report.summary, "head_summary.csv", key="heads_summary_csv")

    st.subheader("Pruning: how many heads does the model need?")
    st.markdown("Heads switched off cumulatively, least important first, and the exact match of greedy "
                f"translations on {heads.N_HELD_OUT} further sentences after each step (Michel et al.'s figure).")
    show_chart(chart(charts.pruning_chart, report.curve), key="heads_pruning")
    csv_button(report.curve.astype({"heads_off": str}), "pruning_curve.csv", key="heads_pruning_csv")
