"""Page 4: every attention head as a heatmap, all heads at a glance, and what switching heads off does."""

import streamlit as st

from ui.charts import attention as charts
from ui.charts import formulas, matrix_frame
from ui.charts.head_view import head_view
from ui.compute.model_size import is_large
from ui.figures import chart, show_chart
from ui.sections import compare, inside_head
from ui.sections.attention import ablation_section, beside_it, kind_titles, labels_of, lm_notes, sliding_window
from ui.sections.input_analysis import analyse_input, require_analysis
from ui.sections.sidebar import sidebar
from ui.state import links, selection
from ui.state.widgets import csv_button, guard

VIEWS = ("lines", "scores", "row")  # what the Attention page shows beside the weights: ?view=lines
VIEW_NAMES = {"lines": "Lines (head view)", "scores": "Scores before the softmax", "row": "The selected query's row"}

app = sidebar(with_compare=True)
config = app.pipeline.config

st.title("Attention")
st.markdown(
    "Every token asks a *query*; every token it may look at offers a *key* and a *value*. The weights of "
    "one row say how much each key's value goes into that query's output. Each of the h heads does this "
    f"with its own projections of width {formulas.head_width_latex(config)}; their outputs are concatenated and "
    "projected back."
)
st.latex(formulas.attention_latex(config))
if note := formulas.formula_note(config):
    st.caption(note)

analysis = require_analysis(app)
trace = analysis.trace


labels, titles = labels_of(analysis), kind_titles(analysis)  # a decoder-only model: causal self-attention only
if st.session_state.get("attn_kind", "decoder") not in titles:  # e.g. "cross", chosen on an encoder-decoder
    st.session_state["attn_kind"] = "decoder"
links.restore("kind", "attn_kind", titles)
kind = st.radio("Attention", list(titles), format_func=titles.get, horizontal=True, key="attn_kind")
n_layers = config.n_encoder_layers if kind == "encoder" else config.n_decoder_layers
queries, keys = labels[kind]
if len(titles) > 1:
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
if len(titles) == 1:
    lm_notes(config, analysis, layer)
weights = charts.head_weights(trace, kind, layer, head)
name = "average of heads" if head is None else f"head {head}"
view_name = f"{kind}_L{layer}{'mean' if head is None else f'H{head}'}"  # in the downloads' file names

links.restore("query", "attn_query", range(len(queries)), links.parse_int)
if kind != "encoder":  # decoder rows are output positions: the token selected on any page
    selection.apply_output("attn_query", len(queries))
query = st.selectbox("Selected query", range(len(queries)), key="attn_query",
                     format_func=lambda i: f"{i}: {queries[i]}")
if kind != "encoder":
    selection.note_output("attn_query", query)
# a click on a row or a query token selects it: on this page only for source tokens, everywhere for outputs
on_click = (lambda chart: selection.on_row_click(chart, "attn_query")) if kind == "encoder" else \
    selection.on_output_click

# The sidebar's "Compare with" model on the same input: drawn below, on the same scales.
other_app = app.second_app()
other = analyse_input(other_app) if other_app is not None else None
other_note = compare.same_shape_note(app.second, kind, layer, head) if app.second is not None else None
show_other = other is not None and other_note is None
score_range = None  # the scores' colour range, shared with the second model
other_scores = [charts.head_scores(other.trace, kind, layer, head)] if show_other and head is not None else []

weights_col, right_col = st.columns(2)
with weights_col:
    heat = chart(charts.attention_heatmap, weights, queries, keys, title=f"Weights: layer {layer}, {name}",
                 window=sliding_window(config, kind, layer), clickable=True)
    show_chart(heat, half=True, key="attn_weights", what="attention", detail=view_name,
               on_select=on_click("attn_weights"), selection_mode="points")
    csv_button(matrix_frame(weights, queries, keys), f"{kind}_L{layer}_{name.replace(' ', '_')}.csv")
with right_col:
    links.restore("view", "attn_view", VIEWS)
    view = st.radio("Beside it", VIEWS, horizontal=True, key="attn_view", label_visibility="collapsed",
                    format_func=VIEW_NAMES.get)
    if view == "lines":
        lines = chart(head_view, charts.layer_weights(trace, kind, layer), queries, keys,
                      heads=None if head is None else [head], query=query,
                      title=f"Lines: layer {layer}, {'every head' if head is None else name}")
        show_chart(lines, half=True, key="attn_lines", what="attention_lines", detail=view_name,
                   on_select=on_click("attn_lines"), selection_mode="points")
        st.caption("BertViz's head view (Vig 2019): a line's opacity is its weight. The selected query's lines "
                   "are drawn strongly; click a query token on the left to select it.")
    elif view == "row":  # one figure fewer on the page until asked for: each costs the browser ~0.1-0.3 s
        show_chart(chart(charts.query_row_chart, weights, query, queries, keys), half=True, key="attn_row",
                   what="attention_row", detail=f"{view_name}_q{query}")
    elif head is None:
        st.info("Scores exist per head: pick a head to see them before the softmax.")
    else:
        scores = charts.head_scores(trace, kind, layer, head)
        score_range = charts.common_score_range(scores, *other_scores)  # one colour range for both models
        title = f"Scores {formulas.config_score(config, kind)}: head {head}"
        show_chart(chart(charts.scores_heatmap, scores, queries, keys, title=title, zmax=score_range), half=True,
                   key="attn_scores", what="attention_scores", detail=view_name)
        csv_button(matrix_frame(scores, queries, keys), f"{kind}_L{layer}_head{head}_scores.csv")
if app.second is not None:
    beside_it(app, other, other_note, show_other, kind, layer, head, view, query, other_scores, score_range)
st.caption("Click a row of the heatmap or a query token: it becomes the selected query"
           + ("." if kind == "encoder" else ", here and on the Decoding and Explain pages."))


st.subheader("Inside one head, step by step")
links.restore("steps", "attn_steps", (True, False), lambda raw: raw == "1")
if st.toggle("Show how the selected head computes the selected query's output", key="attn_steps"):
    if head is None:
        st.info("Pick one head (not the average) to see its computation.")
    else:
        with guard("Computing inside the head"):
            inside_head.show(app, trace, kind, layer, head, query, queries, keys)
links.publish(kind=kind, layer=layer, head=choice, query=query, view=view,
              steps=1 if st.session_state.get("attn_steps") else None)

st.subheader("All layers and heads")
st.markdown("Small multiples on one colour scale: look for diagonals (attend to the same position), "
            "off-diagonals (the previous or next token) and single columns (a token everybody reads).")
n_panels = n_layers * config.n_heads
# At opus-mt size the browser takes seconds to draw 48 panels (3.5 s a visit): drawn when asked for
if not is_large(app.pipeline) or st.toggle(f"Draw all {n_panels} heads (a large model: a few seconds)",
                                           key="attn_grid_on"):
    windows = [sliding_window(config, kind, la) for la in range(n_layers)]  # a sliding layer's edge on its panels
    show_chart(chart(charts.head_grid, trace, kind, query_tokens=queries, key_tokens=keys, windows=windows,
                     clickable="panels"),
               key="attn_grid", selection_mode="points",
               on_select=selection.on_panel_click("attn_grid", n_panels, config.n_heads, "attn_layer", "attn_head"))
    st.caption("Click a head to open it above.")
    csv_button(charts.grid_frame(trace, kind, queries, keys), f"{kind}_all_heads.csv", key="attn_grid_csv")

ablation_section(app, analysis)
