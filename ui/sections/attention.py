"""The Attention page's sections: rows labelled by what they do, the second model beside the first, and
switching heads off (ablation, Michel et al. 2019) with the two translations compared word by word."""

from __future__ import annotations

from typing import Any

import streamlit as st

from ui.charts import attention as charts
from ui.charts.head_view import head_view
from ui.charts.text_diff import compared_html
from ui.compute.analysis import Analysis, ablated_logits
from ui.figures import chart, show_chart
from ui.sections.app_context import AppContext
from ui.sections.input_analysis import analyse_input
from ui.state.widgets import csv_button, guard


def predicting(result: Analysis) -> list[str]:
    """Decoder positions labelled by what they do: "reads 'der' → predicts 'Hund'" as "der → Hund"."""
    outputs = result.output_tokens
    return [f"{read} → {outputs[t]}" if t < len(outputs) else read for t, read in enumerate(result.decoder_tokens)]


def labels_of(result: Analysis) -> dict[str, tuple[list[str], list[str]]]:
    """kind -> (query tokens, key tokens) of one analysed input; a decoder query says what it predicts."""
    rows = predicting(result)
    return {"encoder": (result.src_tokens, result.src_tokens),
            "decoder": (rows, result.decoder_tokens),
            "cross": (rows, result.src_tokens)}


def beside_it(app: AppContext, other: Analysis | None, other_note: str | None, show_other: bool, kind: str,
              layer: int, head: int | None, view: str, query: int, other_scores: list[Any],
              score_range: float | None) -> None:
    """The sidebar's "Compare with" model on the same input, the same view and the same colour scales."""
    name = "average of heads" if head is None else f"head {head}"
    st.markdown(f"**Beside it: {app.second.name}**, on the same input and the same scales"
                + (f" (its translation: `{other.output_text or '(empty)'}`)" if other is not None else ""))
    if other_note:
        st.info(other_note)
    elif show_other:
        other_queries, other_keys = labels_of(other)[kind]
        other_query = min(query, len(other_queries) - 1)
        left, right = st.columns(2)
        with left:
            show_chart(chart(charts.attention_heatmap, charts.head_weights(other.trace, kind, layer, head),
                             other_queries, other_keys, title=f"{app.second.name}: layer {layer}, {name}"),
                       half=True, key="attn_weights_2")
        with right:
            if view == "lines":
                show_chart(chart(head_view, charts.layer_weights(other.trace, kind, layer), other_queries,
                                 other_keys, heads=None if head is None else [head], query=other_query,
                                 title=f"{app.second.name}: lines"), half=True, key="attn_lines_2")
            elif view == "row":
                show_chart(chart(charts.query_row_chart, charts.head_weights(other.trace, kind, layer, head),
                                 other_query, other_queries, other_keys), half=True, key="attn_row_2")
            elif other_scores:
                show_chart(chart(charts.scores_heatmap, other_scores[0], other_queries, other_keys,
                                 title=f"{app.second.name}: scores, head {head}", zmax=score_range),
                           half=True, key="attn_scores_2")


def ablation_section(app: AppContext, analysis: Analysis) -> None:
    """Heads switched off for this input: both translations in full, and the next-token predictions' change."""
    st.subheader("Switch heads off")
    st.markdown("An ablated head's output is set to zero before $W^O$, for this input only; the weights are "
                "not touched. Does the translation change? Which predictions lose confidence?")
    config = app.pipeline.config
    off = st.multiselect("Heads to switch off",
                         charts.head_labels(config.n_encoder_layers, config.n_decoder_layers, config.n_heads),
                         key="attn_ablate", placeholder="e.g. cross L0 H1")
    if off:
        with guard("Running with heads switched off"):
            ablate = charts.parse_heads(off)
            ablated = analyse_input(app, ablate)
            if ablated is not None:  # both in full, the words that changed marked (st.metric would cut them)
                st.markdown(compared_html("Translation with every head", analysis.output_text,
                                          "With the chosen heads off", ablated.output_text), unsafe_allow_html=True)
            logits = ablated_logits(app.model_key, app.device, app.pipeline, analysis, ablate)
            vocab = [app.pipeline.tgt_tokenizer.id_to_piece(i) for i in range(config.tgt_vocab_size)]
            change = charts.logit_change_frame(analysis.decoder_tokens, analysis.trace["logits"][0], logits[0], vocab)
            st.markdown("Next-token predictions on the same decoder input (teacher forcing):")
            st.dataframe(change, hide_index=True)
            csv_button(change, "ablation.csv")
