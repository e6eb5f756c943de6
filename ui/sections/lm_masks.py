"""The Masks page for a decoder-only model: the causal mask, a left-padded batch of prompts with its attention mask,
and the sliding window of a model that has one (Mistral; Gemma on alternate layers), with what a mask does to one
head's scores and weights.

The masks are the ones the model's forward built for the batch (``ui.compute.masks.lm_batch`` reads them from its
trace), so the page shows what the model used, not a drawing of what it should use.
"""

from __future__ import annotations

import streamlit as st

from ui.charts import attention as attention_charts
from ui.charts import formulas, matrix_frame
from ui.charts import masks as charts
from ui.compute import masks as mask_compute
from ui.figures import panel, panels, show_chart
from ui.sections.app_context import AppContext
from ui.state.settings import MAX_INPUT_CHARS
from ui.state.widgets import csv_button, guard

MAX_PROMPTS = 6
PAD_LABEL = "(pad)"  # a padding position: the pad id may be a real token's (GPT-2's is <|endoftext|>)


def _prompts(app: AppContext) -> list[str]:
    """The batch box, one prompt per line; by default the sidebar's prompt and an example of another length."""
    candidates = [*([app.text] if app.text.strip() else []), *[src for src, _ in app.examples if src != app.text]]
    default = charts.different_lengths(candidates, 2)
    limit = MAX_PROMPTS * (MAX_INPUT_CHARS + 1)
    text = st.text_area(f"The batch: one prompt per line (up to {MAX_PROMPTS})", "\n".join(default),
                        key="lm_mask_batch", height=90, max_chars=limit)
    lines = [line.strip()[:MAX_INPUT_CHARS] for line in text[:limit].splitlines() if line.strip()]
    if len(lines) > MAX_PROMPTS:
        st.info(f"The batch holds the first {MAX_PROMPTS} prompts; {len(lines) - MAX_PROMPTS} more lines were left "
                "out.")
    return lines[:MAX_PROMPTS]


def _labels(batch: mask_compute.LMBatch, row: int) -> list[str]:
    """One prompt's position labels: "(pad)" on its left padding, then its pieces."""
    pieces = batch.pieces[row]
    return [PAD_LABEL] * (batch.ids.shape[1] - len(pieces)) + list(pieces)


def show(app: AppContext) -> None:
    """The page for a decoder-only model."""
    config = app.pipeline.config
    window = formulas.window_text(config)
    st.markdown(
        "A language model reads its sequence left to right: the query at position $i$ may attend to the keys "
        "$0..i$ and never to a later one (the *causal* mask), so a position's output depends only on what came "
        "before it. Prompts of different lengths share a batch by padding the short ones **on the left**, so "
        "that every prompt's last token, whose next token is generated, sits in the last column; the *attention "
        "mask* (1 at tokens, 0 at padding) keeps every padding position out of the keys, and each prompt's "
        "positions count from its own first token, so a padded prompt gives the logits it gives alone."
        + (f" This model also has a *sliding window*: {window}, where a query sees only its last "
           f"{config.sliding_window} keys (itself included)." if window else "")
        + " A masked score becomes $-\\infty$, so after the softmax its weight is exactly 0. Here True (blue) "
        "means *may attend*.")
    st.latex(formulas.attention_latex(config, mask=True) + r", \qquad "
             r"M_{ij} = \begin{cases} 0 & j \le i,\ \text{key } j \text{ a token}"
             + (r",\ i - j < W" if window else "") + r" \\ -\infty & \text{otherwise} \end{cases}")
    prompts = _prompts(app)
    if not prompts:
        st.warning("Type at least one prompt, one per line.")
        return
    batch = None
    with guard("Running the batch"):
        batch = mask_compute.lm_batch(app.model_key, app.device, app.pipeline, prompts, app.chat)
    if batch is None:
        return

    st.subheader("The left-padded batch and its attention mask")
    names, columns = [f"prompt {b}" for b in range(len(prompts))], [str(i) for i in range(batch.ids.shape[1])]
    st.dataframe(charts.batch_frame([_labels(batch, b) for b in range(len(prompts))], batch.ids).set_axis(names))
    mask_col, position_col = st.columns(2)
    mask_col.markdown("**Attention mask** (1: a token, 0: padding)")
    mask_col.dataframe(matrix_frame(batch.attention_mask.astype(int), names, columns))
    position_col.markdown("**Positions** as the model counts them (from each prompt's first token)")
    position_col.dataframe(matrix_frame(batch.positions, names, columns))
    st.caption(f"The padding holds the pad id {config.pad_id} "
               f"(`{app.pipeline.tokenizer.display_pieces([config.pad_id])[0]}`), which may be a real token of the "
               "vocabulary (GPT-2 pads with its end of text): only the attention mask says what is padding.")

    row = st.selectbox("Prompt", range(len(prompts)), key="lm_mask_row", format_func=lambda b: f"{b}: {prompts[b]}")
    labels, length = _labels(batch, row), batch.ids.shape[1]
    specs = [("Causal mask", charts.mask_matrix(batch.masks["causal"], row, length, length)),
             ("Attention mask: padding keys", charts.mask_matrix(batch.attention_mask[:, None, None, :], row, length,
                                                                 length)),
             ("Causal AND padding: full-attention layers", charts.mask_matrix(batch.masks["full"], row, length,
                                                                              length))]
    if "sliding" in batch.masks:
        specs.append((f"Sliding window of {config.sliding_window}, AND padding",
                      charts.mask_matrix(batch.masks["sliding"], row, length, length)))
    show_chart(panels([panel(charts.mask_heatmap, m, labels, labels, title=t) for t, m in specs], cols=2),
               key="lm_mask_panels")
    if window:
        st.caption(f"The {window}; the other layers use the full causal mask. A padding query (a row of padding) "
                   "sees itself only, so no softmax row is empty; its output is never read.")
    csv_button(charts.masks_frame([(t, m, labels, labels) for t, m in specs]), f"masks_prompt{row}.csv",
               key="lm_mask_csv")

    st.subheader("What a mask does to the scores and the weights")
    layer_col, head_col = st.columns(2)
    layer = layer_col.selectbox("Layer", range(config.n_decoder_layers), key="lm_mask_layer",
                                format_func=lambda i: f"{i} ({config.layer_type(i)})")
    head = head_col.selectbox("Head", range(config.n_heads), key="lm_mask_head")
    scores = attention_charts.head_scores(batch.trace, "decoder", layer, head, batch=row)
    weights = attention_charts.head_weights(batch.trace, "decoder", layer, head, batch=row)
    show_chart(panels([
        panel(attention_charts.scores_heatmap, scores, labels, labels, title="Scores with the mask (-inf)"),
        panel(attention_charts.attention_heatmap, weights, labels, labels, title="Weights after softmax"),
    ]), key="lm_mask_scores_weights")
    kind = "sliding" if config.layer_type(layer) == "sliding" and "sliding" in batch.masks else "full"
    check = charts.masked_weight_check(weights, charts.mask_matrix(batch.masks[kind], row, length, length))
    a, b, c = st.columns(3)
    a.metric("masked cells", check["masked cells"])
    b.metric("largest weight on a masked cell", f"{check['max weight on masked cells']:g}")
    c.metric("largest |row sum - 1|", f"{check['max |row sum - 1|']:.1e}")
