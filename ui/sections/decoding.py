"""The Decoding page's sections: an output in full, the second model decoding with the same settings, and
the beam search tree (each step keeps the k most likely prefixes; Freitag & Al-Onaizan 2017 on its pruning)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from ui.charts import decoding as charts
from ui.compute import decoding
from ui.figures import chart, show_chart
from ui.sections.app_context import AppContext
from ui.sections.input_analysis import analyse_input
from ui.state import selection
from ui.state.widgets import csv_button


def output_text(ids: Any, tokenizer: Any) -> str:
    """Output ids as text, "(empty)" for none."""
    return tokenizer.decode(list(ids)) or "(empty)"


def output_box(label: str, text: str) -> None:
    """An output sentence in full (st.metric would cut a long one)."""
    st.markdown(f"**{label}**")
    st.code(text, language=None, wrap_lines=True)


def decoding_beside(app: AppContext, beam_size: int, length_penalty: float, early_stopping: bool,
                    temperature: float, top_k: int | None, top_p: float | None, seed: int) -> None:
    """The sidebar's "Compare with" model decoding the same input with the same settings."""
    other_app = app.second_app()
    if other_app is None:
        return
    st.markdown(f"**Beside it: {app.second.name}**, with the same settings")
    other = analyse_input(other_app)
    if other is None:
        return
    tokenizer = other_app.pipeline.tgt_tokenizer
    cols = st.columns(3)
    with cols[0]:
        output_box("Greedy", other.output_text or "(empty)")
    try:
        key, pipe = other_app.model_key, other_app.pipeline
        other_beam = decoding.beam(key, app.device, pipe, other, beam_size, length_penalty, early_stopping)
        other_sample = decoding.sampled(key, app.device, pipe, other, temperature, top_k, top_p, seed)
    except (ValueError, RuntimeError) as error:
        st.info(f"{app.second.name} cannot decode this input: {error}")
    else:
        with cols[1]:
            output_box("Beam search", output_text(other_beam.best.tokens, tokenizer))
        with cols[2]:
            output_box("Sampling", output_text(other_sample.tokens[0], tokenizer))
    other_views = charts.decode_step_views(other.result.steps)
    if other_views:
        show_chart(chart(charts.confidence_chart, charts.steps_frame(other_views, tokenizer.id_to_piece),
                         title=f"{app.second.name}: probability of each greedy token"), key="dec_confidence_2")


def beam_tree_section(beam: Any, beam_size: int, piece: Callable[[int], str], join: Callable[..., str], *,
                      large: bool = False) -> None:
    """The search tree of the best hypothesis's beam search (on a ``large`` model once asked for), and every
    finished hypothesis (``join``: ids -> text)."""
    st.header("The beam search tree")
    st.markdown(
        f"Each step extends every live prefix by every token and keeps the {beam_size} most likely "
        "(blue); a prefix that ends in `</s>` becomes a finished hypothesis (green). The red path is "
        "the best hypothesis. Labels: the token and, below it where the step has room, the log P of the "
        "prefix it ends; hover a node for every number."
    )
    # at opus-mt size the tree has hundreds of labelled nodes (0.2 s to draw on every visit): drawn when asked for
    if not large or st.toggle("Draw the search tree (a large model)", key="dec_tree_on"):
        pruned = st.checkbox("Also show the pruned candidates", key="dec_pruned")
        tree = charts.beam_tree_frame(beam.history, piece, best=beam.best.tokens, include_pruned=pruned)
        show_chart(chart(charts.beam_tree_chart, tree), key="dec_tree")
        csv_button(tree, "beam_tree.csv", key="dec_tree_csv")
    hypotheses = charts.hypotheses_frame(beam.hypotheses, piece, join=join)
    st.dataframe(hypotheses, hide_index=True)


def step_charts(views: list[Any], t: int, method: str, src_tokens: list[str], piece: Callable[[int], str], *,
                large: bool = False) -> None:
    """Step ``t`` (1-based) of an output: the next-token distribution and the cross-attention that step, then
    (folded, or on a ``large`` model behind a toggle) every step's cross-attention and each choice's probability."""
    view = views[t - 1]
    probs_col, attention_col = st.columns(2)
    with probs_col:
        top = charts.top_k_frame(view.top_ids, view.top_probs, piece, chosen=view.chosen)
        title = "Next-token probabilities" + (" (after T, top-k, top-p)" if method == "Sampling" else "")
        show_chart(chart(charts.top_k_chart, top, title=title), half=True, key="dec_topk")
        csv_button(top, f"step{t}_top_k.csv", key="dec_topk_csv")
    with attention_col:
        n_layers = view.cross_attention.shape[0]
        choice = st.selectbox("Rows", [-1, *range(n_layers)], key="dec_attn_rows",
                              format_func=lambda r: "every layer (mean of heads)" if r < 0 else f"heads of layer {r}")
        rows = None if choice < 0 else choice
        show_chart(chart(charts.step_attention_heatmap, view.cross_attention, src_tokens, layer=rows),
                   half=True, key="dec_step_attention")
        csv_button(charts.step_attention_frame(view.cross_attention, src_tokens, layer=rows),
                         f"step{t}_cross_attention.csv", key="dec_attn_csv")

    whole = "The whole output: cross-attention of every step, and each choice's probability"
    if large:  # a folded expander still draws its charts: on a large model they wait for the toggle
        if st.toggle(whole, key="dec_whole_on"):
            _whole_output(views, t, method, src_tokens, piece)
    else:
        with st.expander(whole):
            _whole_output(views, t, method, src_tokens, piece)


def _whole_output(views: list[Any], t: int, method: str, src_tokens: list[str], piece: Callable[[int], str]) -> None:
    """Every step's cross-attention, and each choice's probability (a click on a bar goes to its step)."""
    out_tokens = [piece(v.chosen) for v in views]
    show_chart(chart(charts.output_attention_heatmap, [v.cross_attention for v in views], src_tokens, out_tokens),
               key="dec_output_attention")
    confidence = charts.steps_frame(views, piece)
    show_chart(chart(charts.confidence_chart, confidence, current=t), key="dec_confidence",
               on_select=selection.on_output_click("dec_confidence"), selection_mode="points")
    st.caption("Click a bar to go to its step.")
    csv_button(confidence, f"{method.lower().replace(' ', '_')}_steps.csv", key="dec_steps_csv")
