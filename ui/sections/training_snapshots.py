"""The Training page's section 4: how the attention formed, over the snapshots a run saved during
training (each snapshot runs the current input, teacher-forced on the final model's output), and a kept
run's training curves from its log."""

from __future__ import annotations

import numpy as np
import streamlit as st

from transformer.checkpoints.checkpoint import CheckpointError, read_log
from transformer.train.scores import task_scores
from ui.charts import training as charts
from ui.compute.analysis import analyse, builtin_task, examples_for
from ui.figures import chart, show_chart
from ui.models import training
from ui.models.menu import load_pipeline, menu_text
from ui.sections.app_context import AppContext
from ui.state.settings import LAST_TRAINED, MAX_INPUT_CHARS
from ui.state.widgets import csv_button

SNAPSHOT_MODEL = "train_snapshot_model"  # the section's model menu (a widget key)
FOLLOWED = "train_snapshot_followed"  # session_state: the sidebar model (or new run) the menu last followed


def follow_sidebar(labels: list[str], current: str | None) -> None:
    """Point the section's model menu at the sidebar's model whenever that changes (a run that just finished is
    selected there too), or at the run this session trained last where the sidebar's model has no snapshots; a
    choice made in the menu itself stands until then. (A widget's ``index`` counts only on its first run: the
    menu stayed on a shipped model while the sidebar and the page's text had moved to the new run.)"""
    target = current if current in labels else st.session_state.get(LAST_TRAINED)
    if target not in labels:
        return
    if st.session_state.get(FOLLOWED) != target or st.session_state.get(SNAPSHOT_MODEL) not in labels:
        st.session_state[FOLLOWED] = target
        st.session_state[SNAPSHOT_MODEL] = target


def snapshots_section(app: AppContext) -> None:
    """Pick a model with snapshots, an input, a step, a layer and a head: its cross-attention then."""
    with_snapshots = training.models_with_snapshots()
    if not with_snapshots:
        st.info("No model with snapshots yet: train one above (snapshots are on by default).")
        return
    labels = [entry.label for entry, _ in with_snapshots]
    follow_sidebar(labels, app.model.label if app.model is not None else None)
    choice = st.selectbox("Model", labels, key=SNAPSHOT_MODEL,
                          format_func=lambda label: menu_text(with_snapshots[labels.index(label)][0]))
    entry, steps = with_snapshots[labels.index(choice)]
    text = app.text if app.model is not None and app.model.label == entry.label else None
    try:
        final = load_pipeline(entry, "cpu")
        examples = examples_for(final)
        text = st.text_input("Input sentence", value=text or (examples[0][0] if examples else app.text),
                             key=f"train_snapshot_text_{entry.key}", max_chars=MAX_INPUT_CHARS)[:MAX_INPUT_CHARS]
        run = training.snapshot_input(final, analyse(entry.key, "cpu", final, text).result)
    except (ValueError, CheckpointError, OSError, TypeError) as error:
        st.error(f"Cannot run this input on {menu_text(entry)}: {error}")
        return
    src_ids, tgt_ids, src_tokens, tgt_tokens = run.src_ids, run.tgt_ids, run.src_tokens, run.tgt_tokens
    st.caption(f"Final output: {run.output_text!r}")

    step_col, layer_col, head_col = st.columns([3, 1, 1])
    step = step_col.select_slider("Snapshot (training step)", steps, value=steps[-1], key=f"train_snapshot_{entry.key}")
    layer = layer_col.selectbox("Layer", range(final.config.n_decoder_layers), key="train_snapshot_layer")
    head = head_col.selectbox("Head", [-1, *range(final.config.n_heads)], key="train_snapshot_head",
                              format_func=lambda h: "mean of heads" if h < 0 else f"head {h}")
    head = None if head < 0 else head
    try:
        weights = training.snapshot_cross_attention(str(entry.folder), entry.key, step, src_ids, tgt_ids)
    except (CheckpointError, ValueError, OSError, RuntimeError) as error:
        st.error(f"Cannot load the snapshot at step {step}: {error}")
        return
    matrix = weights[layer].mean(axis=0) if head is None else weights[layer, head]
    what = "mean of heads" if head is None else f"head {head}"
    reading = "Cross-attention"
    if final.config.decoder_only:  # no cross-attention: its self-attention from the answer to the source
        reading = "Attention from the answer to the source"
        st.caption("A decoder-only model has no cross-attention: its self-attention over `source <s> answer` "
                   "reads the source too. The rows are the separator and the answer's tokens, the columns the "
                   "source's: the part of each row that reads the source (the rest reads what comes after it).")
    heat_col, sharp_col = st.columns([3, 2])
    with heat_col:
        show_chart(chart(charts.attention_heatmap, matrix, src_tokens, tgt_tokens,
                         title=f"{reading} at step {step}: layer {layer}, {what}"),
                   half=True, key="train_snapshot_heatmap")
        csv_button(charts.attention_frame(matrix, src_tokens, tgt_tokens),
                         f"cross_attention_step{step}_L{layer}.csv", key="train_snapshot_csv")
    with sharp_col:
        if st.checkbox("Sharpness over all snapshots", value=len(steps) <= 25, key="train_sharpness"):
            entropies = []
            for s in steps:
                w = training.snapshot_cross_attention(str(entry.folder), entry.key, s, src_ids, tgt_ids)[layer]
                entropies.append(charts.attention_entropy(w.mean(axis=0) if head is None else w[head]))
            show_chart(chart(charts.attention_entropy_chart, steps, entropies, current=step), half=True,
                       key="train_entropy")
            st.caption(f"Uniform attention over {len(src_ids)} source tokens has entropy {np.log(len(src_ids)):.2f}; "
                       "a head that reads exactly one token has 0.")

    try:
        log = read_log(entry.folder)
    except CheckpointError as error:
        st.warning(f"The training log cannot be read: {error}")
        log = []
    if log:
        with st.expander(f"Training curves of {menu_text(entry)} (from its log)"):
            fit = task_scores(builtin_task(final), final.tgt_tokenizer.kind)
            show_chart(chart(charts.training_curves_chart, charts.progress_frame(log), fit.names),
                       key="train_saved_curves")
            st.caption(fit.why)
