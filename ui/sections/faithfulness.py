"""The Explain page's faithfulness section: does removing what each map ranks highest change the output? ERASER's
comprehensiveness and sufficiency (DeYoung et al. 2020) of every map on this input, beside a random ranking, with an
interval over the output tokens; a map that does not beat random is marked."""

from __future__ import annotations

import streamlit as st

from transformer.explain.eraser import FRACTIONS, N_RANDOM
from ui.charts import faithfulness as charts
from ui.compute import explain
from ui.compute import faithfulness as compute
from ui.compute.analysis import Analysis
from ui.figures import chart, show_chart
from ui.sections.app_context import AppContext
from ui.state.widgets import asked, csv_button

TEXT = (
    "A map is *faithful* where the tokens it ranks highest are the ones the model needs (DeYoung et al. 2020, "
    "*ERASER*). For each output token, with the decoder's prefix unchanged: **comprehensiveness** = p(full source) − "
    "p(source with the map's top-k% tokens removed), higher is better; **sufficiency** = p(full) − p(only the top-k% "
    f"kept), lower is better; each averaged over k = {', '.join(f'{k:.0%}' for k in FRACTIONS)} (AOPC; ⌈k·n⌉ tokens, "
    "at least one). *Removed* means the method's own baseline: integrated gradients' baseline embedding, the zero "
    "embedding for input × gradient, `<unk>` for the others (as occlusion removes a token). `</s>` and a language "
    "code are never removed: a source without them is one the model never saw. The soft variants (Zhao & Aletras "
    "2023) keep each embedding element of token j with probability 1 − w_j (or w_j), w the map's scores scaled to "
    f"[0, 1]. The grey diamond is a random ranking (the mean of {N_RANDOM} seeded draws), which every map must beat; "
    "the bars are 95% bootstrap intervals over the output tokens, and a map beats random where the interval of its "
    "difference from random lies on the better side of 0.")
LM_TEXT = (
    "A map is *faithful* where the prompt tokens it ranks highest are the ones the model needs (DeYoung et al. "
    "2020, *ERASER*). For each generated token, with the tokens generated before it unchanged: "
    "**comprehensiveness** = p(full prompt) − p(prompt with the map's top-k% tokens removed), higher is better; "
    "**sufficiency** = p(full) − p(only the top-k% kept), lower is better; each averaged over k = "
    f"{', '.join(f'{k:.0%}' for k in FRACTIONS)} (AOPC; ⌈k·n⌉ tokens, at least one). *Removed* means the method's "
    "own baseline: integrated gradients' baseline embedding, the zero embedding for input × gradient, the model's "
    "unknown token for the others (as occlusion removes a token). The tokens its tokenizer calls special (BOS, "
    "chat markers) are never removed: a prompt without them is one the model never saw. Only the prompt is "
    "perturbed, so the measures rank each map's prompt part. The soft variants (Zhao & Aletras 2023) keep each "
    "embedding element of token j with probability 1 − w_j (or w_j), w the map's scores scaled to [0, 1]. The grey "
    f"diamond is a random ranking (the mean of {N_RANDOM} seeded draws), which every map must beat; the bars are "
    "95% bootstrap intervals over the generated tokens, and a map beats random where the interval of its "
    "difference from random lies on the better side of 0.")


def faithfulness(app: AppContext, analysis: Analysis, result: explain.Explanation, baseline: str) -> None:
    """Every computed map's faithfulness on this input (at a button on a large model), as a chart and a table."""
    st.subheader("Faithfulness: do the top-ranked tokens matter to the model?")
    st.markdown(LM_TEXT if result.decoder_only else TEXT)
    if compute.deferred(app.pipeline) and not asked(
            ("explain-faithfulness", app.model_key, app.device, analysis.text, baseline),
            f"Measure the faithfulness of {len(result.source)} maps", button_key="explain_faithfulness_run",
            help="A batched forward of the perturbed sources per map: seconds each at this size."):
        return
    with st.spinner("Removing each map's top tokens..."):
        frame, errors = compute.measures(app.model_key, app.device, app.pipeline, analysis, result, baseline)
    for key, message in errors.items():
        st.info(f"{explain.label(key)}: no faithfulness here ({message})")
    if frame.empty:
        return
    show_chart(chart(charts.faithfulness_chart, frame), key="explain_faithfulness")
    table = charts.faithfulness_table(frame)
    st.dataframe(table, hide_index=True)
    csv_button(frame.drop(columns="key"), "explain_faithfulness.csv", key="explain_faithfulness_csv")
    failing = table[table.verdict.str.startswith("does not")]
    if len(failing):
        st.markdown("**Not better than a random ranking on this input:** " + "; ".join(
            f"{row.map} ({row.verdict.removeprefix('does not beat random on ')})" for row in failing.itertuples()))
