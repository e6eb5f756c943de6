"""Page 4: every attention head as a heatmap, all heads at a glance, and what switching heads off does."""

import streamlit as st

from ui import links, selection
from ui.charts import attention as charts
from ui.charts import clickable_cells, matrix_frame
from ui.presentation import show_chart
from ui.sidebar import sidebar
from ui.widgets import csv_button, guard

app = sidebar()
config = app.pipeline.config

st.title("Attention")
st.markdown(
    "Every token asks a *query*; every token it may look at offers a *key* and a *value*. The weights of "
    "one row say how much each key's value goes into that query's output. Each of the h heads does this "
    "with its own projections of width $d_k = d_{model}/h$; their outputs are concatenated and projected back."
)
st.latex(r"\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^{T}}{\sqrt{d_k}}\right) V, \qquad "
         r"\mathrm{head}_i = \mathrm{Attention}(QW_i^Q, KW_i^K, VW_i^V)")

analysis = app.require_analysis()
trace = analysis.trace
labels = {  # kind -> (query tokens, key tokens)
    "encoder": (analysis.src_tokens, analysis.src_tokens),
    "decoder": (analysis.decoder_tokens, analysis.decoder_tokens),
    "cross": (analysis.decoder_tokens, analysis.src_tokens),
}
links.restore("kind", "attn_kind", charts.KIND_TITLES)
kind = st.radio("Attention", list(charts.KIND_TITLES), format_func=charts.KIND_TITLES.get, horizontal=True,
                key="attn_kind")
n_layers = config.n_encoder_layers if kind == "encoder" else config.n_decoder_layers
queries, keys = labels[kind]
st.caption(f"Queries: {'source' if kind == 'encoder' else 'decoder input'} tokens (rows); "
           f"keys: {'decoder input' if kind == 'decoder' else 'source'} tokens (columns).")

layer_col, head_col = st.columns(2)
links.restore("layer", "attn_layer", range(n_layers), links.parse_int)
links.restore("head", "attn_head", [*range(config.n_heads), "average"],
              lambda raw: raw if raw == "average" else links.parse_int(raw))
layer = layer_col.selectbox("Layer", range(n_layers), key="attn_layer")
choice = head_col.selectbox("Head", [*range(config.n_heads), "average"], key="attn_head",
                            format_func=lambda h: "average of all heads" if h == "average" else f"head {h}")
head = None if choice == "average" else choice
weights = charts.head_weights(trace, kind, layer, head)
name = "average of heads" if head is None else f"head {head}"

weights_col, scores_col = st.columns(2)
with weights_col:
    on_click = selection.on_row_click("attn_weights", "attn_query") if kind == "encoder" else \
        selection.on_output_click("attn_weights")  # decoder rows are output positions, shared by every page
    heat = charts.attention_heatmap(weights, queries, keys, title=f"Weights: layer {layer}, {name}")
    show_chart(clickable_cells(heat), key="attn_weights", on_select=on_click, selection_mode="points")
    st.caption("Click a row: its query becomes the selected token" + ("." if kind == "encoder" else
               ", here and on the Decoding and Explain pages."))
    csv_button(matrix_frame(weights, queries, keys), f"{kind}_L{layer}_{name.replace(' ', '_')}.csv")
with scores_col:
    if head is None:
        st.info("Scores exist per head: pick a head to see them before the softmax.")
    else:
        scores = charts.head_scores(trace, kind, layer, head)
        show_chart(charts.scores_heatmap(scores, queries, keys, title=f"Scores QK^T/sqrt(d_k): head {head}"),
                        key="attn_scores")
        csv_button(matrix_frame(scores, queries, keys), f"{kind}_L{layer}_head{head}_scores.csv")

links.restore("query", "attn_query", range(len(queries)), links.parse_int)
if kind != "encoder":  # decoder rows are output positions: the token selected on any page
    selection.apply_output("attn_query", len(queries))
query = st.selectbox("One query's row", range(len(queries)), key="attn_query",
                     format_func=lambda i: f"{i}: {queries[i]}")
if kind != "encoder":
    selection.note_output("attn_query", query)
show_chart(charts.query_row_chart(weights, query, queries, keys), key="attn_row")
links.publish(kind=kind, layer=layer, head=choice, query=query)

st.subheader("All layers and heads")
st.markdown("Small multiples on one colour scale: look for diagonals (attend to the same position), "
            "off-diagonals (the previous or next token) and single columns (a token everybody reads).")
show_chart(charts.head_grid(trace, kind), key="attn_grid")
csv_button(charts.grid_frame(trace, kind, queries, keys), f"{kind}_all_heads.csv", key="attn_grid_csv")

st.subheader("Switch heads off")
st.markdown("An ablated head's output is set to zero before $W^O$, for this input only; the weights are "
            "not touched. Does the translation change? Which predictions lose confidence?")
off = st.multiselect("Heads to switch off",
                     charts.head_labels(config.n_encoder_layers, config.n_decoder_layers, config.n_heads),
                     key="attn_ablate", placeholder="e.g. cross L0 H1")
if off:
    with guard("Running with heads switched off"):
        ablate = charts.parse_heads(off)
        ablated = app.analysis(ablate=ablate)
        if ablated is not None:
            before, after = st.columns(2)
            before.metric("Translation with every head", analysis.output_text or "(empty)")
            after.metric("With the chosen heads off", ablated.output_text or "(empty)")
        logits = app.ablated_logits(analysis, ablate)
        vocab = [app.pipeline.tgt_tokenizer.id_to_piece(i) for i in range(config.tgt_vocab_size)]
        change = charts.logit_change_frame(analysis.decoder_tokens, trace["logits"][0], logits[0], vocab)
        st.markdown("Next-token predictions on the same decoder input (teacher forcing):")
        st.dataframe(change, hide_index=True)
        csv_button(change, "ablation.csv")
