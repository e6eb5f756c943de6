"""Page 9: decoding one token at a time: greedy, beam search and sampling side by side, step by step."""

import streamlit as st

from ui.charts.tokens import chips_html
from ui.compute.decoding import decoder_only
from ui.compute.model_size import is_large
from ui.sections import decoding as sections
from ui.sections.decoding import beam_tree_section, decoding_beside, output_box, output_text, step_charts
from ui.sections.input_analysis import require_analysis
from ui.sections.sidebar import sidebar
from ui.state import links, selection

METHODS = ("Greedy", "Beam search", "Sampling")
LINK_METHODS = {"greedy": "Greedy", "beam": "Beam search", "sampling": "Sampling"}  # ?method=beam
STEP = "dec_step"  # widget key of the step slider (the buttons move it)

app = sidebar(with_compare=True)
pipe = app.pipeline
lm = decoder_only(pipe)  # a language model continues its prompt: its tokens readable (byte-level pieces)
piece = (lambda i: pipe.tokenizer.display_pieces([i])[0]) if lm else pipe.tgt_tokenizer.id_to_piece

st.title("Decoding")
sections.intro(pipe)  # a translation's decoder, or a language model continuing its prompt
sections.show_beam_rule(pipe)  # the rule this model's beam search ranks by: GNMT's, or transformers' for a HF folder
sections.sampling_controls(pipe)  # T = 1, every token; or the folder's recommended sampling

analysis = require_analysis(app)
src_tokens = analysis.src_tokens


def _text(ids) -> str:  # output ids as text, by this model's tokenizer
    return output_text(ids, pipe.tgt_tokenizer)


# --- the three methods, side by side ------------------------------------------------------------
links.restore("method", "dec_method", METHODS, lambda raw: LINK_METHODS.get(raw, raw))
wanted = st.session_state.get("dec_method", METHODS[0])  # a link's or the step-by-step choice: it runs at once
greedy_col, beam_col, sample_col = st.columns(3)
with greedy_col:
    st.subheader("Greedy")
    st.caption("Always the most likely next token: fast, but one early mistake cannot be undone.")
    greedy = analysis.result.steps  # the shared translation every page has: not decoded again
    output_box("Output", analysis.output_text or "(empty)")
    st.caption(f"log P = {greedy.log_probs[0]:.3f} · {len(greedy.tokens[0])} tokens"
               + ("" if greedy.finished[0] else " · stopped at the length limit"))

with beam_col:  # on a large model beam search and sampling wait for their buttons (decoding.waits)
    st.subheader("Beam search")
    beam_size, length_penalty, early_stopping = sections.beam_controls(pipe)  # start at the model's own, or the link's
    beam = sections.beam_output(app, analysis, beam_size, length_penalty, early_stopping,
                                wanted=wanted == "Beam search")

with sample_col:
    st.subheader("Sampling")
    links.restore("temperature", "dec_temperature", lambda v: 0.1 <= v <= 2.0,
                  lambda raw: round(links.parse_float(raw), 1))
    temperature = st.slider("Temperature T", 0.1, 2.0, step=0.1, key="dec_temperature")
    top_k = st.slider("Top-k (0 = all tokens)", 0, max(20, st.session_state["dec_top_k"]), key="dec_top_k")
    top_p = st.slider("Top-p (1 = off)", 0.05, 1.0, step=0.05, key="dec_top_p")
    links.restore("seed", "dec_seed", range(1_000_001), links.parse_int)
    seed = st.number_input("Seed", 0, 1_000_000, key="dec_seed", help="the same seed gives the same sample")
    temperature, seed, top_k, top_p = float(temperature), int(seed), top_k or None, (None if top_p >= 1 else top_p)
    sampled = sections.sample_output(app, analysis, temperature, top_k, top_p, seed, beam_size,
                                     wanted=wanted == "Sampling")

# --- the sidebar's "Compare with" model, the same settings ---------------------------------------

decoding_beside(app, analysis, wanted, beam_size, length_penalty, early_stopping, temperature, top_k, top_p, seed)

# --- one output, step by step ---------------------------------------------------------------------

st.header("Step by step")
method = st.radio("Method", METHODS, horizontal=True, key="dec_method",
                  help="Beam search is shown along its best hypothesis.")
try:
    views = sections.step_views(pipe, analysis, method, greedy, beam, sampled)
except ValueError as error:
    st.error(f"Cannot step through this output: {error}")
    views = []
if not views:
    st.info("This method produced no steps to show.")
    st.stop()

n_steps = len(views)
if st.session_state.get(STEP, 1) > n_steps:  # another method or input may have fewer steps
    st.session_state[STEP] = n_steps


def _move(delta: int) -> None:
    st.session_state[STEP] = min(max(1, st.session_state.get(STEP, 1) + delta), n_steps)


links.restore("step", STEP, range(1, n_steps + 1), links.parse_int)
selection.apply_output(STEP, n_steps, offset=1)  # a token clicked on another page or chart: its step
if n_steps > 1:
    t = st.slider("Output step t", 1, n_steps, key=STEP)
else:
    t = 1
    st.caption("The output has a single step.")
prev_col, next_col, _ = st.columns([1, 1, 4])
prev_col.button("◀ Previous", key="dec_prev", on_click=_move, args=(-1,), disabled=t <= 1)
next_col.button("Next ▶", key="dec_next", on_click=_move, args=(1,), disabled=t >= n_steps)
view = views[t - 1]
selection.note_output(STEP, t - 1)
links.publish(method={v: k for k, v in LINK_METHODS.items()}[method], step=t, beam=beam_size,
              alpha=round(length_penalty, 2), early=sections.early_link(early_stopping),
              temperature=temperature, seed=int(seed))

prefix_pieces = [piece(i) for i in view.prefix_ids]
st.markdown(f"**{'Model' if lm else 'Decoder'} input at step {t}** (what the "
            f"{'model' if lm else 'decoder'} reads{f', {view.note}' if view.note else ''}):")
st.markdown(chips_html(prefix_pieces, view.prefix_ids), unsafe_allow_html=True)
st.markdown(f"→ chose `{piece(view.chosen)}` (id {view.chosen}) with probability {view.chosen_prob:.3f}")

large = is_large(pipe)  # opus-mt size: the costly charts on demand
step_charts(views, t, method, src_tokens, piece, large=large, lm=lm)
if beam is not None:
    beam_tree_section(beam, beam_size, piece, _text, large=large)
