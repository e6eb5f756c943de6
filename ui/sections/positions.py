"""The Embeddings page's positions, in the model's own scheme: a table of position vectors (the paper's or
Marian's or fairseq's sinusoid, or BART's learned tables, ``ui.charts.embeddings``), or T5's relative buckets and
each head's learned bias (``ui.charts.positions``), or a rotary model's turns (``ui.sections.rope``); and this input's
embedding + position, or for T5 the bias its heads add to this input's scores. A decoder-only model has one stack
(GPT-2: one learned table, its ``tgt`` side) and one sequence, the prompt and its continuation."""

from __future__ import annotations

import streamlit as st

from ui.charts import embeddings as charts
from ui.charts import heatmap, positional_labels
from ui.charts import positions as position_charts
from ui.compute import positions
from ui.figures import chart, panel, panels, show_chart
from ui.sections import rope
from ui.sections.app_context import AppContext
from ui.state.widgets import csv_button

SIDES = {"encoder (source)": "src", "decoder (target)": "tgt"}


def show_intro(app: AppContext) -> None:
    """What the model adds for positions, its formula and the paper behind it."""
    config = app.pipeline.config
    layout, scaled = config.positional, config.scale_embedding
    scheme = "learned_decoder" if layout == "learned" and config.decoder_only else layout  # GPT-2: one table
    intro = position_charts.INTROS[scheme].replace("{offset}", str(config.position_offset))
    st.markdown(
        "Each token id picks a row of a learned embedding matrix"
        + (", scaled by $\\sqrt{d_{model}}$" if scaled else " (this model does not scale it by $\\sqrt{d_{model}}$)")
        + ". Attention by itself ignores the order of its inputs, " + intro
        + (" The sum then goes through a LayerNorm (the *embedding norm*) before the first layer."
           if config.embedding_norm else ""))
    st.latex(charts.pe_latex(scheme, config.position_offset))
    st.latex(charts.input_latex(scaled, layout, config.norm if config.embedding_norm else None))
    st.caption(position_charts.CITATIONS[scheme])


def show_scheme(app: AppContext) -> None:
    """The positions part: the table and its curves, or T5's buckets and head biases."""
    if app.pipeline.config.positional == "relative":
        _relative(app)
    elif app.pipeline.config.positional == "rotary":
        rope.show(app)
    else:
        _table(app)


def _table(app: AppContext) -> None:
    config = app.pipeline.config
    layout, d_model = config.positional, config.d_model
    learned = layout == "learned"
    st.subheader("The learned position vectors" if learned else "The positional encoding table")
    count = st.slider("Positions", min(4, config.max_len), min(200, config.max_len), min(50, config.max_len),
                      key="emb_positions")
    side = "tgt" if config.decoder_only else (  # a decoder-only model's one table (GPT-2's wpe)
        SIDES[st.radio("Stack", list(SIDES), horizontal=True, key="emb_table_side")] if learned else "src")
    table = positions.position_table(app.model_key, app.pipeline, count, side)  # the model's own values
    st.markdown("Left: the table, one row per position. Right: the dot product of two positions' vectors"
                + (", which shows what training made of them: neighbours alike or not." if learned else
                   ", which depends (almost) only on their distance and is largest for a position with itself."))
    show_chart(panels([panel(charts.positional_heatmap, table, layout), panel(charts.position_similarity, table)]),
               key="pe_table")  # one figure of two panels: the browser draws it faster than two
    table_col, similarity_col = st.columns(2)
    with table_col:
        csv_button(charts.table_frame(table), f"positions_{side}.csv" if learned else "positional_encoding.csv")
    with similarity_col:
        csv_button(charts.similarity_frame(table), "position_similarity.csv")
    default_dims = sorted({0, 1, min(4, d_model - 2), d_model // 2, d_model - 2} & set(range(d_model)))
    dims = st.multiselect("Dimensions to plot", list(range(d_model)), default=default_dims, key="emb_dims")
    if dims:
        show_chart(chart(charts.positional_curves, table, dims, layout), key="pe_curves")
    else:
        st.info("Pick at least one dimension to plot.")


def _relative(app: AppContext) -> None:
    config = app.pipeline.config
    st.subheader("Relative position buckets and each head's bias")
    reach = st.slider("Distances shown (±)", 4, max(8, 2 * config.relative_max_distance),
                      positions.default_reach(config.relative_max_distance), key="emb_reach")
    data = positions.relative_bias(app.model_key, app.pipeline, reach)
    st.markdown(
        f"{config.relative_buckets} buckets; beyond a distance of {config.relative_max_distance} all distances share "
        "the last one. The encoder gives half its buckets to keys before the query and half to keys after; the "
        "decoder, which never sees a later key, gives all of them to the past (later keys: no bucket).")
    show_chart(chart(position_charts.bucket_map, data.distances, data.buckets), key="pe_buckets")
    st.markdown("Each head's bias against the distance, one line per head: the number the head adds to the score "
                "of a key that far from its query, in every layer of the stack.")
    show_chart(panels([panel(position_charts.head_bias, data.distances, data.bias[stack], stack)
                       for stack in ("encoder", "decoder")]), key="pe_head_bias")


def show_input(app: AppContext, analysis) -> None:  # noqa: ANN001  (ui.compute.analysis.Analysis)
    """This input's embedding, position and their sum per token; for relative positions, the embedding and the
    bias each head adds to this input's self-attention scores (the trace's ``{stack}.position_bias``)."""
    config = app.pipeline.config
    if config.positional == "rotary":
        _rotary_input(app, analysis)
        return
    st.subheader("This input: embedding + position" if config.positional != "relative"
                 else "This input: embedding, and the bias on its scores")
    if config.decoder_only:  # one stack: the prompt and its continuation
        prefix, tokens = "tgt", analysis.decoder_tokens
    else:
        side = st.radio("Side", ["source (encoder input)", "target (decoder input)"], horizontal=True,
                        key="emb_side")
        prefix, tokens = ("src", analysis.src_tokens) if side.startswith("source") else ("tgt", analysis.decoder_tokens)
    trace = analysis.trace
    embed, pos, total = trace[f"{prefix}.embed"][0], trace[f"{prefix}.pos"], trace[f"{prefix}.input"][0]
    norm = config.norm if config.embedding_norm else None
    if config.positional == "relative":
        stack = "encoder" if prefix == "src" else "decoder"
        st.markdown("Nothing is added to the embedding: the first layer reads the embedding itself. The position "
                    "enters each self-attention layer's scores instead, as the bias below.")
        head = st.selectbox("Head", list(range(config.n_heads)), key="emb_bias_head")
        bias = trace[f"{stack}.position_bias"][0, head]  # (T, T): the same in every layer of the stack
        show_chart(chart(position_charts.input_bias, bias, tokens, tokens, head, stack), key="input_bias")
        return
    show_chart(chart(charts.token_vectors, embed, pos, total, tokens, config.scale_embedding, norm),
               key="token_vectors")
    csv_button(charts.vectors_frame(embed, pos, total, tokens, config.scale_embedding), f"{prefix}_embeddings.csv")


def _rotary_input(app: AppContext, analysis) -> None:  # noqa: ANN001  (ui.compute.analysis.Analysis)
    """A rotary model's input: the embeddings alone (nothing is added; positions turn q and k in attention)."""
    config = app.pipeline.config
    st.subheader("This input: the embeddings, with nothing added")
    st.markdown("The first layer reads each token's embedding" + (r" times $\sqrt{d_{model}}$" if config.scale_embedding
                                                                  else "")
                + " as it is: the prompt and its continuation, position by position. Where each token stands enters "
                "every attention layer instead, as the turns above of its query and key.")
    embed = analysis.trace["tgt.input"][0]  # (L, d_model): layer 0's input
    dims = [str(i) for i in range(embed.shape[1])]
    show_chart(chart(heatmap, embed, dims, positional_labels(analysis.decoder_tokens),
                     title="Layer 0's input: one row per token", x_title="dimension", y_title="token",
                     colorscale="RdBu_r", zmid=0.0, colorbar_title="value", show_values=False), key="rope_input")
