"""The Explain page's sections beyond one token, drawn one at a time: do the methods agree (and with the truth),
where each prediction comes from (ALTI+, Ferrando et al. 2022), word alignments scored by AER against gold (Och &
Ney 2003), the randomization check (Adebayo et al. 2018), the logit lens and the residual stream; and the page's
choices made before the methods run (integrated gradients' baseline, the costly methods on a large model)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from transformer.explain import methods_markdown
from transformer.explain.gradients import DELTA_FLOOR, DELTA_TOLERANCE, STEP_LADDER
from ui.charts import explain as charts
from ui.charts.tokens import visible_piece
from ui.compute import explain, explain_alignment
from ui.compute.analysis import Analysis
from ui.figures import chart, panel, panels, show_chart
from ui.sections import faithfulness, sentences_input
from ui.sections.app_context import AppContext
from ui.state import links
from ui.state.widgets import asked, csv_button

MORE = {"agreement": "Do the methods agree?", "source": "Source or prefix? (ALTI+)",
        "alignment": "Word alignments (AER)", "faithfulness": "Faithfulness (ERASER)", "sanity": "Randomization check",
        "lens": "The logit lens",
        "residual": "The residual stream"}
BASELINES = {"default": "this model's default", "zero": "zero embedding", "pad": "<pad> embedding",
             "unk": "<unk> embedding"}
# The methods, one bullet each from the registry (``transformer.explain.methods_markdown``), then
# why they can disagree.
METHODS_TEXT = methods_markdown() + (
    "\n\nAttention weights ignore how large the attended vectors are and what the layers below mixed in "
    "(Jain & Wallace 2019, *Attention is not Explanation*); gradients are local and can be noisy; "
    "occlusion asks a counterfactual the model never saw in training. Agreement is evidence, not proof."
)


def choose_baseline() -> str:
    """Integrated gradients' baseline (a select box, in the link as ``baseline`` when it is not the default)."""
    links.restore("baseline", "explain_ig_baseline", list(BASELINES))
    baseline = st.selectbox("Integrated gradients starts from", list(BASELINES), format_func=BASELINES.get,
                            key="explain_ig_baseline", help="The source that integrated gradients' path starts from, "
                            "at every position: the zero embedding (no token of the vocabulary), or the embedding of "
                            "<pad> or <unk>. The model's default is the first of these at which it is smooth: zero, "
                            "or <pad> where nothing is added to the embeddings before a norm (T5). A baseline on a "
                            "singularity is refused.")
    links.publish(baseline=None if baseline == "default" else baseline)
    return baseline


def methods_to_compute(app: AppContext, analysis: Analysis) -> tuple[str, ...]:
    """Every method on a small model; on a large one the costly methods (``explain.deferred``) only once the user
    pressed "Compute gradient methods" for this input, so that a first visit takes seconds, not a minute."""
    later = explain.deferred(app.pipeline)
    if later and not asked(("explain-costly", app.model_key, app.device, analysis.text), "Compute gradient methods",
                           button_key="explain_costly", help=f"{', '.join(explain.REGISTRY[m].label for m in later)}"
                           ": seconds each at this size."):
        st.info(f"This model has {app.pipeline.model.num_parameters():,} parameters: "
                f"{', '.join(explain.REGISTRY[m].label for m in later)} take seconds each here, so they wait for "
                "the button above. Below: the methods read off one forward.")
        return tuple(m for m in explain.METHODS if m not in later)
    return explain.METHODS


def compare_methods(app: AppContext, other: AppContext, methods: tuple[str, ...]) -> tuple[str, ...]:
    """The methods for the "Compare with" model: this model's, so that the two charts answer the same question,
    less the costly ones where only the other model is large (nobody pressed its button)."""
    if explain.deferred(app.pipeline):  # this model is large: its costly methods are in ``methods`` only if asked
        return methods
    later = explain.deferred(other.pipeline)
    return tuple(m for m in methods if m not in later)


def ig_convergence(result: explain.Explanation, row: int, baseline: str) -> None:
    """Integrated gradients' convergence delta (Sundararajan et al. 2017: the attributions add up to f(x) - f(x')
    up to delta): the chosen token's in a caption, every token's in a chart, each flagged where it is above the
    tolerance the adaptive rule refines to (``within_tolerance``: 5% of the row's own gap plus a small floor)."""
    table = result.ig_convergence()
    if table is None:
        return
    chosen = table.iloc[row]
    ratio = chosen["|delta| / |gap|"]
    share = "undefined share (the gap is 0)" if np.isnan(ratio) else f"{ratio:.1%}"
    verdict = ("within tolerance" if chosen["within tolerance"] else
               f"**above the tolerance** ({DELTA_TOLERANCE:.0%} of the gap + {DELTA_FLOOR:g}) even at "
               f"{STEP_LADDER[-1]} intervals: read its attributions with care")
    end = (" at every prompt position up to delta" if result.decoder_only else  # a prompt has no </s>
           " up to delta; its weight on `</s>` comes from that baseline: see the methods above")
    st.caption(f"Integrated gradients' convergence delta for this token: {chosen['delta']:+.4f}, {share} of "
               f"f(x) − f(x′) = {chosen['f(x) − f(x′)']:+.4f}, {verdict} (the attributions sum to the change in "
               f"log-probability from the {BASELINES[result.ig_baseline or baseline]} baseline{end}). "
               f"{result.ig_note}")
    off = table.index[~table["within tolerance"]].tolist()
    if off:
        st.warning(f"Integrated gradients has not converged on {len(off)} output token(s) even at "
                   f"{STEP_LADDER[-1]} intervals: " + ", ".join(visible_piece(result.out_tokens[i]) for i in off)
                   + ". Their delta says how far their attributions miss f(x) − f(x′).")
    with st.expander("Integrated gradients' convergence, every output token"):
        st.markdown(f"Each row is integrated by the trapezoid rule over {STEP_LADDER[0]} intervals, then refined "
                    f"({STEP_LADDER[1]}, {STEP_LADDER[2]}, ... {STEP_LADDER[-1]}) until its own |delta| is within "
                    f"{DELTA_TOLERANCE:.0%} of its own "
                    f"|f(x) − f(x′)| (+{DELTA_FLOOR:g} for tiny gaps); only the rows not there yet are refined.")
        show_chart(chart(charts.ig_convergence_chart, table, DELTA_TOLERANCE, DELTA_FLOOR), key="explain_ig_delta")
        csv_button(table, "explain_ig_convergence.csv", key="explain_ig_delta_csv")


def undefined_note(result: explain.Explanation, row: int | None = None) -> None:
    """A caption naming the maps with undefined rows (NaN, drawn blank and read "undefined") and why: for one output
    token's ``row``, or for every row."""
    counts = result.undefined()
    if row is not None:
        counts = {key: 1 for key, matrix in result.source.items() if np.isnan(matrix[row]).any()}
    if not counts:
        return
    said = []
    for key, n in counts.items():
        reason = explain.UNDEFINED_REASONS.get(explain.split_view(key)[0], "the method cannot define it")
        said.append(f"**{explain.label(key)}**" + ("" if row is not None else f" ({n} of {len(result.out_tokens)} "
                                                                             "rows)") + f": {reason}")
    where = "for this token" if row is not None else "where drawn blank"
    st.caption(f"Undefined {where}, not 0: " + "; ".join(said) + ".")


def agreement(result: explain.Explanation) -> None:
    """Spearman's ρ between every pair of methods, and which agree with the true alignment where it is known."""
    st.subheader("Do the methods agree?")
    cells = ("(generated, prompt) cells of this continuation: 1 means the same ranking of the prompt's tokens"
             if result.decoder_only else "(output, source) cells of this input: 1 means the same ranking of source "
             "tokens")
    st.markdown(f"Spearman's rank correlation of every pair of methods over all {cells}, 0 none in common.")
    table = result.agreement()
    show_chart(chart(charts.agreement_heatmap, table), key="explain_agreement")
    csv_button(table.reset_index(names="method"), "explain_agreement.csv", key="explain_agreement_csv")
    accuracy = result.accuracy()
    if accuracy is not None:
        st.markdown("**Against the truth.** This task is generated, so the true source token(s) of every output "
                    "token are known: the share of output tokens whose most attributed source token is a true one.")
        st.dataframe(accuracy, hide_index=True)
        csv_button(accuracy, "explain_alignment_accuracy.csv", key="explain_accuracy_csv")
        st.markdown(explain.agreeing_with_truth(accuracy))
    elif result.alignment_note:
        st.caption(f"No accuracy against a true alignment: {result.alignment_note}")


def source_share(result: explain.Explanation) -> None:
    """ALTI+'s share of each prediction that comes from the source, the target prefix's shaded above it."""
    rows = result.out_tokens
    st.subheader("Source or prefix: where does each prediction come from?")
    st.markdown("ALTI+ (Ferrando et al. 2022, *Towards Opening the Black Box of Neural Machine Translation: Source "
                "and Target Contributions to the Predictions*) splits each prediction between the source tokens "
                "and the target prefix, shares that add up to 1. The line is the source's share; the shaded part "
                "above it, the prefix's. A low source share means the token was predicted from the prefix the "
                "model already wrote rather than from the sentence it translates: the sign of a hallucination "
                "the paper reports (a piece that completes a word already begun, such as `ieht` after `▁s`, "
                "also comes mostly from the prefix).")
    views = [key for key in result.source if explain.split_view(key)[0] == "alti"]  # the roll-out, a layer alone
    key = st.radio("ALTI+ through", views, horizontal=True, key="explain_share_view",
                   format_func=lambda k: "every layer (roll-out)" if k == "alti" else
                   f"decoder layer {explain.split_view(k)[1]} alone") if len(views) > 1 else "alti"
    share = result.source_share(key)
    if share is None:
        st.info(f"ALTI+ cannot run here: {result.errors.get('alti', 'not computed')}")
        return
    reason = explain.UNDEFINED_REASONS["alti"]
    show_chart(chart(charts.source_share_chart, share, rows, reason), key="explain_source_share")
    defined = ~np.isnan(share)
    if defined.any():
        lowest = int(np.nanargmin(share))
        st.caption(f"Lowest source share: output {lowest} ({visible_piece(rows[lowest])}), {share[lowest]:.0%}.")
    if not defined.all():
        st.caption(f"Undefined for {int((~defined).sum())} of {len(share)} output tokens: {reason}. An undefined "
                   "share is no share at all, not 0 (\"the model ignored the source\") and not 1.")


def word_alignments(app: AppContext) -> None:
    """AER of every method and cross-attention head over many sentences, at a button
    (``ui.compute.explain_alignment``)."""
    st.subheader("Word alignments: which method links the words a human would?")
    st.markdown("Each map becomes word links the way the alignment literature reads attention: every output "
                "piece is linked to its most attributed source piece, and pieces are grouped into words. The "
                "alignment error rate (Och & Ney 2003) compares the links with gold ones: "
                "AER = 1 − (|A∩S| + |A∩P|) / (|A| + |S|), 0 is perfect. Every cross-attention head is scored "
                "too, optionally with Shift-Att (Chen et al. 2020: a word is read where it is the decoder's "
                "input). To keep it within seconds, the cheap methods and the heads run on every sentence, "
                "the costly ones (gradients, occlusion, value zeroing) on the first "
                f"{explain_alignment.COSTLY_SENTENCES}, and integrated gradients is left out (16 to 1024 forward and "
                "backward passes per sentence): its score on this input is under *Do the methods agree?*. On a "
                "model of opus-mt size the costly methods are left out too, and the others run on the first "
                f"{explain_alignment.COSTLY_SENTENCES} sentences.")
    gold = sentences_input.gold_input(app.model_key, app.pipeline, [s for s, _ in app.examples])
    if gold is not None and asked(("explain-aer", app.model_key, app.device, gold.key),
                                  f"Score every method and head on {len(gold.src_ids)} sentences",
                                  button_key="explain_aer_run"):
        scores = explain_alignment.alignment_scores(app.model_key, app.device, app.pipeline, gold)
        shift = st.toggle("Shift-Att for the heads", key="explain_aer_shift")
        table = explain_alignment.aer_table(scores, shift)
        st.markdown(f"**AER over {scores.n_sentences} sentences, best first** (the column *sentences* says "
                    "what each row rests on; ALTI+ and value zeroing are scored rolled out through every layer and "
                    "for the last decoder layer alone; *words undefined*: the share of target words a map leaves "
                    "undefined, left out of its AER rather than counted as misses):")
        st.dataframe(table, hide_index=True)
        csv_button(table, "explain_aer.csv", key="explain_aer_csv")
        if scores.left_out:
            st.caption("Not scored: " + "; ".join(f"{explain.REGISTRY[m].label} ({why})"
                                                  for m, why in scores.left_out.items()) + ".")


def sanity(app: AppContext, analysis: Analysis, baseline: str) -> None:
    """The model randomization test (Adebayo et al. 2018) at a button: ρ with the trained map per layer randomized."""
    st.subheader("Sanity check: does each map depend on what the model learned?")
    st.markdown("Adebayo et al. 2018 (*Sanity Checks for Saliency Maps*): re-draw the model's weights layer by "
                "layer, from the output down, and recompute each map. A map that explains the model must change; "
                "Spearman's ρ with the trained model's map should fall towards 0. A method that stays above 0.5 "
                "with every layer randomized shows the input's structure, not what the model learned.")
    methods_checked = explain.randomization_methods(app.pipeline)
    if asked(("explain-sanity", app.model_key, app.device, analysis.text, baseline),
             f"Run the randomization check ({len(methods_checked)} methods)", button_key="explain_sanity_run"):
        frame = explain.randomization(app.model_key, app.device, app.pipeline, analysis, baseline)
        show_chart(chart(charts.randomization_chart, frame), key="explain_sanity")
        csv_button(frame, "explain_randomization.csv", key="explain_sanity_csv")
        random_like = [explain.REGISTRY[m].label for m in dict.fromkeys(frame.method[frame.random_like])]
        st.markdown("**Does not depend on what the model learned:** " + ", ".join(random_like) if random_like
                    else "Every method's map changes once the model is random: each depends on what it learned.")
        if len(methods_checked) < len(explain.METHODS):
            st.caption("The costly methods are left out at this model's size (each step recomputes every map).")


def lens(app: AppContext, analysis: Analysis, result: explain.Explanation) -> None:
    """The logit lens: each decoder layer's top next token (computed here, when the section is shown)."""
    st.subheader("The logit lens: where does the answer appear?")
    st.markdown("The generator (after the decoder's final LayerNorm) reads each decoder layer's output as if it "
                "were the last (nostalgebraist 2020). Each column is one output token; each cell the token that "
                "layer would predict there, "
                "coloured by its probability. The last row is the model's real prediction.")
    with st.spinner("Reading every decoder layer through the generator..."):
        pieces, log_probs = explain.lens(app.model_key, app.device, app.pipeline, analysis)
    show_chart(chart(charts.logit_lens_grid, log_probs, pieces, result.lens_positions), key="explain_lens")


def residual(app: AppContext, analysis: Analysis, result: explain.Explanation) -> None:
    """How much each sub-layer adds to the residual stream, relative to the stream."""
    st.subheader("The residual stream: which sub-layers change the representation?")
    st.markdown("Every sub-layer reads the stream and adds its output to it (Elhage et al. 2021, *A Mathematical "
                "Framework for Transformer Circuits*). Each cell: the norm of what a sub-layer adds at a position, "
                "divided by the norm of the stream it is added to. Near 0, the sub-layer barely changes that "
                "token's representation; above 1, it rewrites it.")
    stream = explain.residual(app.model_key, app.device, app.pipeline, analysis)
    show_chart(panels([panel(charts.residual_heatmap, stream, "encoder", result.src_tokens),
                       panel(charts.residual_heatmap, stream, "decoder", result.lens_positions)]),
               key="explain_residual")
    csv_button(stream, "residual_stream.csv", key="explain_residual_csv")


def show(more: str, app: AppContext, analysis: Analysis, result: explain.Explanation, baseline: str) -> None:
    """Draw the section ``more`` (a key of ``MORE``)."""
    if more == "agreement":
        agreement(result)
    elif more == "source":
        source_share(result)
    elif more == "alignment":
        word_alignments(app)
    elif more == "faithfulness":
        faithfulness.faithfulness(app, analysis, result, baseline)
    elif more == "sanity":
        sanity(app, analysis, baseline)
    elif more == "lens":
        lens(app, analysis, result)
    elif more == "residual":
        residual(app, analysis, result)
