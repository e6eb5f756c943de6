"""The Heads page for a decoder-only language model: the roles of ``lm_head_summary`` (induction, previous-token,
duplicate-token, sink, copying), a layer x head grid per score with its chance and interval, the key/value groups
and the sliding-window layers. The encoder-decoder sections (alignment, agreement, importance, pruning) are not
drawn: they score heads against a translation's source, references and grammar, which a language model has not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from transformer.explain.lm_heads import THRESHOLDS
from ui.charts import lm_heads as charts
from ui.compute import lm_heads
from ui.compute.model_size import is_large
from ui.figures import chart, show_chart
from ui.sections import heads_navigation as navigation
from ui.sections.app_context import AppContext
from ui.state.widgets import asked, csv_button

if TYPE_CHECKING:  # the type only
    from transformer.lm_pipeline import LMPipeline

SCORE_KEY = "lm_heads_score"  # session_state: the score the grid shows
CLAIMS_SHOWN = 8  # heads whose claim the page writes out (induction heads first); the table holds every one
NOT_SHOWN = ("The translation models' sections (alignment, agreement, importance, the pruning curve) are not shown: "
             "they score heads against a source, reference translations and their grammar, which a language "
             "model's random repeated tokens do not have.")


def intro(pipeline: LMPipeline) -> None:
    """What the page measures and on what, with the papers."""
    n = lm_heads.repeat_length(pipeline)
    st.markdown(
        "A language model's heads are measured as Olsson et al. 2022 (*In-context Learning and Induction Heads*) "
        f"find induction heads: on {lm_heads.N_PROMPTS} sequences of {n} random tokens repeated once, "
        f"[BOS] r₁…r{_sub(n)} r₁…r{_sub(n)}, where nothing but the repeat predicts the second half. A head that "
        "looks back to the token after the current token's earlier occurrence and copies it is an induction "
        "head; most heads of a trained model also park weight on the first token, the *attention sink* of Xiao "
        "et al. 2023 (*Efficient Streaming Language Models with Attention Sinks*). The random tokens avoid the "
        f"{len(lm_heads.special_ids(pipeline))} ids this model's tokenizer and config call special (BOS/EOS, "
        f"padding, chat markers), seed {lm_heads.SEED}, the same for every visitor.")
    st.markdown("\n".join(f"- **{name}**: {meaning}" for name, meaning in charts.SCORES.values()))
    shares = THRESHOLDS["induction"]
    st.caption(f"A role needs its score at or above its threshold ({shares:.0%} of the weight for the attention "
               f"scores, {THRESHOLDS['copying']:.0%} for copying) and to beat chance with the low end of its 95% "
               "bootstrap interval (over the sequences); the first role that passes wins: induction (induction "
               "and copying), prefix-matching (induction alone), previous-token, duplicate-token, sink, copying, "
               "else mixed. Definitions and tests: docs/heads.md.")
    st.caption(NOT_SHOWN)


def _sub(n: int) -> str:
    return str(n).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉"))


def structure(summary: pd.DataFrame) -> None:
    """The key/value groups and the sliding-window layers, in words."""
    groups = charts.kv_groups(summary)
    if charts.grouped(summary):
        shared = "; ".join(f"kv{kv}: heads {', '.join(map(str, heads))}" for kv, heads in groups.items())
        st.caption(f"Grouped-query attention: {summary['head'].nunique()} query heads read {len(groups)} key/value "
                   f"head{'s' if len(groups) > 1 else ''} ({shared}); the head axis names each head's (h3 · kv1).")
    sliding = sorted(int(x) for x in summary.loc[summary.layer_type == "sliding", "layer"].unique())
    if sliding:
        window = int(summary.loc[summary.layer_type == "sliding", "window"].iloc[0])
        st.caption(f"Sliding-window layers ({', '.join(map(str, sliding))}) see only the last {window} keys; their "
                   "chance counts those keys, and a score whose target lies outside the window is undefined.")


def lm_heads_page(app: AppContext) -> None:
    """The whole page for a decoder-only model (``app.pipeline``; the caller has drawn the title): the scores on
    opening for a small model, at a button for a large one. The page stops after it."""
    pipe = app.pipeline
    intro(pipe)
    key = ("lm_heads", app.model_key, app.device)
    if is_large(pipe) and not asked(key, "Score every head", button_key="lm_heads_run",
                                    help=f"Runs the model on {lm_heads.N_PROMPTS} repeated sequences with every "
                                         "attention map kept: 12 s at SmolLM2-135M size on a 2-core CPU, "
                                         "minutes at billions of parameters."):
        st.info("Nothing is computed until you press the button.")
        st.stop()
    summary = lm_heads.lm_report(app.model_key, app.device, pipe)
    if isinstance(summary, str):
        st.info(f"No head roles: {summary}.")
        st.stop()

    st.subheader("The roles")
    structure(summary)
    event = show_chart(chart(charts.lm_role_grid, summary), key="lm_heads_roles", on_select="rerun",
                       selection_mode="points")
    chosen = navigation.clicked_head(event)
    if chosen is not None:
        navigation.open_on_attention_page(*chosen)
    claims = charts.lm_head_claims(summary, limit=CLAIMS_SHOWN)
    if claims:
        st.markdown("\n".join(f"- {claim}" for claim in claims))
        more = int((summary.role != "mixed").sum()) - len(claims)
        if more > 0:
            st.caption(f"{more} more head{'s' if more > 1 else ''} with a role: their claims are in the table below.")
    else:
        st.caption("No head passes a role's threshold and chance: every head is mixed (a randomly initialised "
                   "model's are).")
    st.dataframe(charts.role_counts(summary), hide_index=True)

    st.subheader("Every score per head")
    score = st.radio("Score", list(charts.SCORES), horizontal=True, key=SCORE_KEY,
                     format_func=lambda s: charts.SCORES[s][0])
    st.caption(f"**{charts.SCORES[score][0]}**: {charts.SCORES[score][1]} Hover a cell for its 95% interval, its "
               f"chance ({charts.CHANCE[score]}) and the head's claim; {charts.CLAIM_MARK} marks a head whose role "
               "rests on this score.")
    show_chart(chart(charts.lm_score_grid, summary, score), key="lm_heads_grid", detail=score)

    st.subheader("The table")
    st.dataframe(summary, hide_index=True)
    csv_button(summary, "lm_head_summary.csv", key="lm_heads_csv")
