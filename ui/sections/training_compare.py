"""The Training page's section 5: a decoder-only run beside its encoder-decoder twin (same task, size and seed;
``ui.models.training_compare``): each one's steps and seconds to 97% exact match and its parameters, their curves
on one chart, and, for one input, where each reads the source while it writes the answer."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from transformer.checkpoints.checkpoint import CheckpointError
from ui.charts import training as charts
from ui.compute.analysis import analyse, examples_for
from ui.compute.source_attention import SourceAttention, source_attention
from ui.figures import chart, show_chart
from ui.models import training_compare
from ui.models.menu import ModelEntry, available_models, load_pipeline, menu_text
from ui.models.training_compare import TARGET
from ui.sections.app_context import AppContext
from ui.state.settings import MAX_INPUT_CHARS

INTRO = (
    "The same task in two shapes. The encoder-decoder reads the source with its encoder and writes the target with "
    "its decoder, which looks back at the source through **cross-attention**. The decoder-only model reads "
    "`source <s> target` as one sequence in one stack of 2N layers: its causal self-attention lets each answer "
    "token look back at the source, so the same information sits in its self-attention, from the answer's "
    "positions to the source's. **Train both** in section 3 trains such a pair one after the other.")


def _pair_text(pair: tuple[ModelEntry, ModelEntry]) -> str:
    return f"{menu_text(pair[1])} beside {menu_text(pair[0])}"


def architectures_section(app: AppContext) -> None:
    """Pick a pair of twins (the sidebar's model's, else the newest), then its figures, curves and attention."""
    st.header("5. Decoder-only beside encoder-decoder")
    st.markdown(INTRO)
    pairs = training_compare.twin_pairs(available_models())
    if not pairs:
        st.info("No decoder-only run with an encoder-decoder twin yet: press **Train both** in section 3.")
        return
    current = app.model.label if app.model is not None else None
    first = next((i for i, pair in enumerate(pairs) if current in (pair[0].label, pair[1].label)), 0)
    index = st.selectbox("Runs", range(len(pairs)), index=first, format_func=lambda i: _pair_text(pairs[i]),
                         key=f"train_twins_{pairs[first][1].key}")  # follows the sidebar's model when it changes
    encoder_decoder, decoder = pairs[index]
    figures(encoder_decoder, decoder)
    attention_side_by_side(app, encoder_decoder, decoder)


def figures(encoder_decoder: ModelEntry, decoder: ModelEntry) -> None:
    """Each run's steps and training seconds to ``TARGET`` read off its log, its size, and both runs' curves."""
    rows, frames = [], {}
    for entry in (encoder_decoder, decoder):
        facts = training_compare.run_facts(entry)
        try:
            log = training_compare.read_run_log(entry)
        except CheckpointError as error:
            st.warning(f"{menu_text(entry)}: the training log cannot be read: {error}")
            return
        if facts is None:
            return
        rows.append(training_compare.time_to_target_row(menu_text(entry), facts, log))
        frames[f"{training_compare.ARCHITECTURE_NAMES[facts.architecture]}: {menu_text(entry)}"] = \
            charts.progress_frame(log)
    table = pd.DataFrame(rows)
    st.dataframe(table, hide_index=True, column_config={
        "last exact match": st.column_config.NumberColumn(format="percent"),
        "parameters": st.column_config.NumberColumn(format="localized")})
    st.caption(f"Steps and training seconds to the first evaluation at or above {TARGET:.0%} exact match on the "
               "validation pairs (never trained on), read off each run's log; the seconds leave the evaluations' "
               "own time out (with them: the next column). A run evaluates every few seconds, so a figure is the "
               "evaluation's, not the first step that got there; None: the run never got there.")
    show_chart(chart(charts.compare_runs_chart, frames, target=TARGET), key="train_twins_curves")


def _heatmap(side: SourceAttention, layer: int, head: int | None, key: str) -> None:
    matrix = side.weights.mean(axis=0) if head is None else side.weights[head]
    what = "mean of heads" if head is None else f"head {head}"
    reading = "decoder-only: answer → source" if side.decoder_only else "encoder-decoder: cross-attention"
    show_chart(chart(charts.attention_heatmap, matrix, side.src_tokens, side.tgt_tokens,
                     title=f"{reading}, layer {layer}, {what}"), half=True, key=key)


def attention_side_by_side(app: AppContext, encoder_decoder: ModelEntry, decoder: ModelEntry) -> None:
    """For one input, the encoder-decoder's cross-attention next to the decoder-only model's attention from the
    answer's positions to the source's (each on its own greedy output), one layer of each, a head or their mean."""
    st.subheader("How their attention solves it")
    try:
        pipes = [load_pipeline(entry, "cpu") for entry in (encoder_decoder, decoder)]
        examples = examples_for(pipes[0])
        ours = app.model is not None and app.model.label in (encoder_decoder.label, decoder.label)
        text = st.text_input("Input", value=app.text if ours else (examples[0][0] if examples else app.text),
                             key=f"train_twins_text_{decoder.key}", max_chars=MAX_INPUT_CHARS)[:MAX_INPUT_CHARS]
        analyses = [analyse(entry.key, "cpu", pipe, text) for entry, pipe in zip((encoder_decoder, decoder), pipes,
                                                                                 strict=True)]
    except (ValueError, CheckpointError, OSError, TypeError) as error:
        st.error(f"Cannot run this input on the pair: {error}")
        return
    columns = st.columns(3)
    layers = [columns[i].selectbox(f"Layer of the {what}", range(pipe.config.n_decoder_layers),
                                   index=pipe.config.n_decoder_layers - 1, key=f"train_twins_layer_{i}_{decoder.key}")
              for i, (what, pipe) in enumerate(zip(("encoder-decoder's decoder", "decoder-only model"), pipes,
                                                   strict=True))]
    head = columns[2].selectbox("Head", [-1, *range(pipes[0].config.n_heads)], key="train_twins_head",
                                format_func=lambda h: "mean of heads" if h < 0 else f"head {h}")
    head = None if head < 0 or head >= pipes[1].config.n_heads else head
    left, right = st.columns(2)
    for column, entry, analysis, layer, i in zip((left, right), (encoder_decoder, decoder), analyses, layers,
                                                 range(2), strict=True):
        with column:
            _heatmap(source_attention(analysis, layer), layer, head, f"train_twins_heatmap_{i}")
            st.caption(f"{menu_text(entry)}, its output: {analysis.output_text!r}")
    st.caption("Rows: what each model reads while it writes the answer (the decoder input `<s> y1 .. yn`; in the "
               "decoder-only model the separator and the answer's tokens), each on its own output. Columns: the "
               "source. An encoder-decoder's row sums to 1 over the source; a decoder-only model's row is the "
               "part of its attention that reads the source (the rest reads the separator and the answer so far). "
               "For `reverse`, both learn the anti-diagonal.")
