"""Page 8: padding, causal and memory masks on a small batch, and what they do to scores and weights."""

import streamlit as st

from ui.charts import attention as attention_charts
from ui.charts import formulas, matrix_frame
from ui.charts import masks as charts
from ui.compute import analysis
from ui.compute import masks as mask_compute
from ui.compute.analysis import BATCH_EXTRA
from ui.compute.model_size import is_large
from ui.figures import panel, panels, show_chart
from ui.sections import lm_masks
from ui.sections.sidebar import sidebar
from ui.state.settings import MAX_INPUT_CHARS
from ui.state.widgets import csv_button, guard

app = sidebar()
pipe = app.pipeline
pad_id = pipe.config.pad_id
MAX_SENTENCES = 6

st.title("Masks")
if app.decoder_only:  # causal, left padding and sliding windows (ui/sections/lm_masks.py)
    lm_masks.show(app)
    st.stop()
st.markdown(
    "Sentences of different lengths share one batch by padding the short ones with `<pad>`. Masks keep "
    "attention away from what it must not see: the padding (in every attention), and in the decoder the "
    "future tokens, which do not exist yet when the model generates. A masked score becomes $-\\infty$, "
    "so after the softmax its weight is exactly 0. Here True (blue) means *may attend*."
)
st.latex(formulas.attention_latex(pipe.config, mask=True) + r", \qquad "
         r"M_{ij} = \begin{cases} 0 & \text{query } i \text{ may attend to key } j \\ "
         r"-\infty & \text{otherwise} \end{cases}")

if not app.text.strip():
    st.warning("The input sentence is empty: the batch below starts with the examples instead.")
candidates = [*([app.text] if app.text.strip() else []), *[src for src, _ in app.examples if src != app.text]]
expected = dict(app.examples)
default = charts.different_lengths(candidates, 3, [len(c) + len(expected.get(c, c)) for c in candidates])
limit = MAX_SENTENCES * (MAX_INPUT_CHARS + 1)  # six inputs' worth; re-checked here (max_chars is the browser's)
text = st.text_area("The batch: one sentence per line (up to 6)", "\n".join(default), key="mask_batch",
                    height=110, max_chars=limit)
lines = [line.strip()[:MAX_INPUT_CHARS] for line in text[:limit].splitlines() if line.strip()]
if len(lines) > MAX_SENTENCES:
    st.info(f"The batch holds the first {MAX_SENTENCES} sentences; {len(lines) - MAX_SENTENCES} more lines were "
            "left out.")
sentences = lines[:MAX_SENTENCES]
if not sentences:
    st.warning("Type at least one sentence, one per line.")
    st.stop()

batch = None
with guard("Running the batch"):
    batch = analysis.batch(app.model_key, app.device, pipe, sentences)
if batch is None:
    st.stop()


def _lines(indices: tuple[int, ...]) -> str:  # 0-based sentences as the batch box numbers them: "Lines 1, 3"
    return f"Line{'s' if len(indices) > 1 else ''} {', '.join(str(i + 1) for i in indices)}"


if batch.truncated:
    st.info(f"{_lines(batch.truncated)} had more tokens than the model's {pipe.config.max_len} source positions "
            f"and {'were' if len(batch.truncated) > 1 else 'was'} shortened to its first tokens.")
if batch.unfinished:
    forced = " but the one the model's decoding rules force at that bound" if batch.forced_end else ""
    st.info(f"{_lines(batch.unfinished)} had no `</s>` within {batch.output_cap} output tokens{forced}: the decoder "
            "input stops there. The masks work the same at any length"
            + (f"; on a model this large a batch decodes at most its source length + {BATCH_EXTRA} tokens."
               if is_large(pipe) else "."))

st.subheader("The padded batch")
source_col, target_col = st.columns(2)
with source_col:
    st.markdown("**Source (encoder input)**")
    st.dataframe(charts.batch_frame(batch.src_pieces, batch.src_ids))
with target_col:
    st.markdown(f"**Decoder input** (`{pipe.tgt_tokenizer.id_to_piece(pipe.config.bos_id)}`, the decoder's "
                "start, + the greedy output)")
    st.dataframe(charts.batch_frame(batch.tgt_pieces, batch.tgt_ids))
st.caption(charts.start_and_padding(pipe) + ("" if mask_compute.has_padding(batch.src_ids, pad_id) else
           " Every source here has as many tokens as the others, so the source padding mask is empty: "
           "the decoder's masks show the padding."))
show_chart(panels([  # one figure of two panels draws faster than two figures
    panel(charts.padding_overview, mask_compute.real_positions(batch.src_ids, pad_id), batch.src_pieces,
          title="Source padding mask (B x S)"),
    panel(charts.padding_overview, mask_compute.real_positions(batch.tgt_ids, pad_id, decoder=True), batch.tgt_pieces,
          title="Target padding mask (B x T)"),
]), key="mask_overviews")

row = st.selectbox("Sentence", range(len(sentences)), key="mask_row",
                   format_func=lambda b: f"{b}: {sentences[b]}")
masks = mask_compute.batch_masks(batch.src_ids, batch.tgt_ids, pad_id)
s, t = batch.src_ids.size(1), batch.tgt_ids.size(1)
src_labels = charts.pad_pieces(batch.src_pieces[row], s)
tgt_labels = charts.pad_pieces(batch.tgt_pieces[row], t)
mask_specs = [  # title, mask name, query labels, key labels, explanation
    ("Encoder self-attention: source padding", "source padding", src_labels, src_labels,
     "every query may read every real source token; no query reads <pad>"),
    ("Causal (look-ahead) mask", "causal", tgt_labels, tgt_labels,
     "query i reads keys 0..i: the same for every sentence"),
    ("Target padding", "target padding", tgt_labels, tgt_labels, "no query reads a padded decoder position"),
    ("Decoder self-attention: causal AND padding", "decoder (causal & padding)", tgt_labels, tgt_labels,
     "what the decoder's masked self-attention uses"),
    ("Cross-attention: memory mask", "memory", tgt_labels, src_labels,
     "decoder queries read the real source tokens only"),
]
matrices, figures = [], []
for title, name, q_labels, k_labels, _ in mask_specs:
    matrix = charts.mask_matrix(masks[name], row, len(q_labels), len(k_labels))
    matrices.append((name, matrix, q_labels, k_labels))
    figures.append(panel(charts.mask_heatmap, matrix, q_labels, k_labels, title=title))
show_chart(panels(figures, cols=3), key="mask_panels")
st.markdown("\n".join(f"- **{title}**: {note}" for title, _, _, _, note in mask_specs))
csv_button(charts.masks_frame(matrices), f"masks_sentence{row}.csv", key="mask_csv")

st.subheader("What a mask does to the scores and the weights")
kinds = list(attention_charts.KIND_TITLES)
kind = st.radio("Attention", kinds, format_func=attention_charts.KIND_TITLES.get, horizontal=True, key="mask_kind",
                index=kinds.index(mask_compute.first_kind(batch.src_ids, pad_id)))
n_layers = pipe.config.n_encoder_layers if kind == "encoder" else pipe.config.n_decoder_layers
layer_col, head_col = st.columns(2)
layer = layer_col.selectbox("Layer", range(n_layers), key="mask_layer")
head = head_col.selectbox("Head", range(pipe.config.n_heads), key="mask_head")
q_labels, k_labels, mask_name = {
    "encoder": (src_labels, src_labels, "source padding"),
    "decoder": (tgt_labels, tgt_labels, "decoder (causal & padding)"),
    "cross": (tgt_labels, src_labels, "memory"),
}[kind]
scores = attention_charts.head_scores(batch.trace, kind, layer, head, batch=row)
weights = attention_charts.head_weights(batch.trace, kind, layer, head, batch=row)
show_chart(panels([
    panel(attention_charts.scores_heatmap, scores, q_labels, k_labels, title="Scores with the mask (-inf)"),
    panel(attention_charts.attention_heatmap, weights, q_labels, k_labels, title="Weights after softmax"),
]), key="mask_scores_weights")
csv_button(matrix_frame(weights, q_labels, k_labels), f"{kind}_L{layer}_head{head}_weights.csv",
                 key="mask_weights_csv")
check = charts.masked_weight_check(weights, charts.mask_matrix(masks[mask_name], row, len(q_labels), len(k_labels)))
a, b, c = st.columns(3)
a.metric("masked cells", check["masked cells"])
b.metric("largest weight on a masked cell", f"{check['max weight on masked cells']:g}")
c.metric("largest |row sum - 1|", f"{check['max |row sum - 1|']:.1e}")
