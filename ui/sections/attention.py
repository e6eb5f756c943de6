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


def decoder_only(result: Analysis) -> bool:
    """Whether the analysis is a decoder-only model's: one sequence, the prompt and its continuation."""
    return "src.ids" not in result.trace


def lm_predicting(result: Analysis) -> list[str]:
    """A language model's positions labelled by what they do: position t reads token t and predicts token t + 1
    (the last one what would come next: the end of text where the continuation ended, else cut)."""
    tokens = result.decoder_tokens
    last = "(end)" if result.result.finished else "(time limit)" if result.result.timed_out else "(max length)"
    return [f"{read} → {tokens[t + 1] if t + 1 < len(tokens) else last}" for t, read in enumerate(tokens)]


def kind_titles(result: Analysis) -> dict[str, str]:
    """The kinds of attention the analysed model has: a decoder-only model only causal self-attention."""
    return charts.LM_KIND_TITLES if decoder_only(result) else charts.KIND_TITLES


def sliding_window(config: Any, kind: str, layer: int) -> int | None:
    """The window of (kind, layer) where it is a sliding layer (Mistral's every layer, Gemma's every other),
    else None."""
    if kind != "decoder" or getattr(config, "sliding_window", None) is None:
        return None
    return config.sliding_window if config.layer_type(layer) == "sliding" else None


def lm_notes(config: Any, result: Analysis, layer: int) -> None:
    """What a decoder-only model's attention is, under the layer picker: why there is no encoder or cross-attention,
    where the prompt ends, this layer's window, and which query heads share key/value heads (GQA)."""
    prompt = len(result.src_tokens)
    st.caption("One stack, so one kind of attention: a decoder-only model has no encoder (there is no source "
               "sentence to read first) and hence no cross-attention. The prompt and its continuation are one "
               f"sequence (positions 0..{prompt - 1} the prompt, {prompt}.. the continuation); each token attends "
               "to itself and the tokens before it (the causal mask: the upper triangle is 0).")
    window = sliding_window(config, "decoder", layer)
    if window is not None:
        cut = len(result.decoder_tokens) > window
        st.caption(f"Layer {layer} is a sliding-window layer: a query sees only its last {window} tokens (itself "
                   "included)" + (", left of the red staircase the weights are 0." if cut else
                                  f"; this sequence ({len(result.decoder_tokens)} tokens) fits in the window, "
                                  "so it cuts nothing here."))
    elif getattr(config, "sliding_window", None) is not None:
        st.caption(f"Layer {layer} is a full layer: it sees every earlier token (this model's other layers "
                   f"slide a window of {config.sliding_window}).")
    groups = charts.kv_heads_of(result.trace, "decoder", layer)
    if groups is not None:
        st.caption(f"Grouped-query attention: {config.n_heads} query heads share {config.kv_heads} key/value "
                   f"heads, {config.n_heads // config.kv_heads} each (their weights differ: each has its own "
                   "queries).")
        st.dataframe(charts.kv_group_frame(groups), hide_index=True)


def labels_of(result: Analysis) -> dict[str, tuple[list[str], list[str]]]:
    """kind -> (query tokens, key tokens) of one analysed input; a decoder query says what it predicts."""
    if decoder_only(result):
        return {"decoder": (lm_predicting(result), result.decoder_tokens)}
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
    lm = decoder_only(analysis)
    off = st.multiselect("Heads to switch off",
                         charts.head_labels(config.n_encoder_layers, config.n_decoder_layers, config.n_heads,
                                            cross=not lm),
                         key="attn_ablate", placeholder="e.g. decoder L0 H1" if lm else "e.g. cross L0 H1")
    if off:
        with guard("Running with heads switched off"):
            ablate = charts.parse_heads(off)
            ablated = analyse_input(app, ablate)
            if ablated is not None:  # both in full, the words that changed marked (st.metric would cut them)
                st.markdown(compared_html(f"{'Continuation' if lm else 'Translation'} with every head",
                                          analysis.output_text,
                                          "With the chosen heads off", ablated.output_text), unsafe_allow_html=True)
            logits = ablated_logits(app.model_key, app.device, app.pipeline, analysis, ablate)
            vocab = [app.pipeline.tgt_tokenizer.id_to_piece(i) for i in range(config.tgt_vocab_size)]
            change = charts.logit_change_frame(analysis.decoder_tokens, analysis.trace["logits"][0], logits[0], vocab)
            st.markdown("Next-token predictions on the same " + ("prompt and continuation:" if lm else
                                                                   "decoder input (teacher forcing):"))
            st.dataframe(change, hide_index=True)
            csv_button(change, "ablation.csv")
