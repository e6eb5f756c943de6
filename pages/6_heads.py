"""Page 6: what does each head do? Roles, importance and alignment over many sentences, and a pruning curve; for a
language model, the induction, previous-token, duplicate-token, sink and copying roles (ui/sections/lm_heads.py)."""

import streamlit as st

from ui.charts import heads as charts
from ui.compute import head_reports, heads
from ui.figures import chart, show_chart
from ui.sections import heads_navigation as navigation
from ui.sections import lm_heads, sentences_input
from ui.sections.sidebar import sidebar
from ui.state.widgets import asked, csv_button, guard

app = sidebar()

st.title("What does each head do?")
if app.decoder_only:  # a decoder-only model: its own measures, none of those below
    with guard("Measuring the heads"):
        lm_heads.lm_heads_page(app)
    st.stop()
st.markdown(
    "One sentence shows one head's pattern; what a head *does* shows over many. Each head is measured over "
    "many sentences: how spread its attention is (entropy), how far it looks, how much weight it puts on the "
    "same, previous or next token or on the special tokens, and how much the model needs it, by two measures: the "
    "**ablation** importance, the change in loss when it alone is switched off (negative: the model does better "
    "without it; skipped on a large model, where it takes minutes), and the **gradient** importance of Michel et "
    "al. 2019 (*Are Sixteen Heads Really Better than One?*), the expected |∂loss/∂gate| of a gate on the head's "
    "output, a first-order estimate that is never negative. Every score comes with a 95% bootstrap interval "
    "over the sentences and, where position alone could explain it, with what position alone achieves. For a "
    f"model of a built-in task the page draws {heads.N_SENTENCES} sentences of the task, whose true alignment "
    "(and, for `sentences`, grammar on both sides) is known, so it can check which heads follow it (Clark et al. "
    "2019, *What Does BERT Look At?*; Voita et al. 2019 found positional, syntactic and rare-word heads), and "
    "which decoder heads follow German agreement (the verb's row looking at its subject, the noun's at its "
    "article and adjectives). Any model can be measured on sentences you give."
)
app.require_model()
with guard("Measuring the heads"):
    if navigation.wants_own_sentences(app.pipeline):
        sentences = sentences_input.sentences_input(app.pipeline, key="heads", examples=[s for s, _ in app.examples])
        if sentences is None:
            st.stop()
        n = len(sentences.sources)
        if sentences.references is None:
            st.caption("No references given: the model's own greedy translations are used as references.")
        if not asked(("heads", app.model_key, app.device, sentences),
                     f"Measure the heads on these {n} sentences", button_key="heads_run",
                     help="Switches every head off once over all the sentences (skipped on a large model) and "
                          "takes the gradient of a gate on each, then runs the pruning curves: seconds on a small "
                          "model; on opus-mt half a minute, and the pruning curve waits for a second button."):
            st.info("Nothing is computed until you press the button.")
            st.stop()
        report = heads.own_report(app.model_key, app.device, app.pipeline, sentences)
    else:
        report = head_reports.head_report(app.model_key, app.device, app.pipeline, app.model.folder)
    if isinstance(report, str):
        st.info(f"No head statistics: {report}.")
        st.stop()

    if report.own_sentences:
        refs = ("the model's own greedy translations" if report.model_references else "your references")
        cut = (f" ({report.n_cut} of them reached the length limit without </s>)" if report.n_cut else "")
        st.success(f"Measured on your {report.n_sentences} sentences; references: {refs}{cut}.")
        with st.expander("The sentences and the references used"):
            st.dataframe(report.sentences, hide_index=True)

    st.subheader("Every head at a glance")
    by = st.radio("Importance", report.measures, horizontal=True, key="heads_importance",
                  format_func=lambda m: f"{m}: {charts.MEASURES[m][1]}",
                  help="Sizes the heads in the grid and orders the pruning curve below.")
    if "ablation" not in report.measures:
        st.caption("The ablation importance was skipped: one forward per head takes minutes on a model this large.")
    st.caption(f"Colour: the head's role (thresholds in `transformer/explain/heads.py`); size and number: its "
               f"{by} importance. Click a head to open it on the Attention page.")
    event = show_chart(chart(charts.head_grid, report.summary, by), key="heads_grid", on_select="rerun",
                       selection_mode="points")
    chosen = navigation.clicked_head(event)
    if chosen is not None:
        navigation.open_on_attention_page(*chosen)

    st.subheader("The heads that follow the task's structure")
    best = heads.best_heads(report)
    if report.own_sentences:
        st.caption("Your sentences come without a true alignment or grammar, so no head is checked against one: "
                   "open a cross-attention head on the Attention page to see what it aligns.")
    elif best.empty:
        st.caption("This task gives no true alignment or grammar to check heads against.")
    else:
        st.markdown("For the alignment: the share of output tokens whose most-attended source token is a true "
                    "one. For a relation (Universal Dependencies names): the share of dependents whose most-attended "
                    "token is their head word. For agreement (decoder self-attention): the share of German "
                    "agreement pairs (nsubj, det, det:poss, amod) where the row predicting the later word looks "
                    "most at the earlier one. "
                    "Beside each, what position alone achieves (the same index or proportional position; the best "
                    "fixed offset, Clark et al. 2019): a head is a finding only 10 points above it.")
        st.dataframe(best, hide_index=True)
        for claim in charts.head_claims(report.summary):
            st.caption(claim)

    st.subheader("The summary table")
    st.dataframe(report.summary, hide_index=True)
    csv_button(report.summary, "head_summary.csv", key="heads_summary_csv")

    st.subheader("Pruning: how many heads does the model need?")
    where = (f"the first {report.n_pruning} of your sentences" if report.own_sentences
             else f"{report.n_pruning} further sentences")
    curves = report.curves
    if not curves:  # a large model: the curve decodes the sentences again and again, so it waits for a button
        if not asked(("heads_pruning", app.model_key, app.device, sentences),
                     f"Run the pruning curve on {report.n_pruning} sentences", button_key="heads_pruning_run",
                     help=f"Decodes them again after every {heads.PRUNING_EVERY_LARGE} heads switched off: about "
                          "a minute on opus-mt."):
            st.stop()
        curves = heads.own_curves(app.model_key, app.device, app.pipeline, sentences, report)
    curve = curves[by]
    step = int(curve.n_heads_off.iloc[1]) if len(curve) > 1 else 1  # a large model's: every PRUNING_EVERY_LARGE
    normalised = " (divided by its ℓ2 norm over the heads of the same layer, as Michel et al. do)" \
        if by == "gradient" else ""
    st.markdown(f"Heads switched off cumulatively, least important first by the **{by}** importance chosen "
                f"above{normalised}, and the exact match of greedy translations with the references on {where} "
                f"after each {'step' if step == 1 else f'{step} heads'} (Michel et al.'s figure 3, which follows the "
                "gradient importance).")
    if report.model_references:
        st.caption("The references are the full model's own translations, so the exact match starts at 100% "
                   "(less any cut at the length limit): the curve shows how soon pruning changes the output.")
    show_chart(chart(charts.pruning_chart, curve, by), key="heads_pruning")
    csv_button(curve.astype({"heads_off": str}), f"pruning_curve_{by}.csv", key="heads_pruning_csv")
