"""The Explain page for a decoder-only language model: each token of the prompt's greedy continuation explained by
the prompt's tokens (the source side) and by the tokens generated before it (the target side), with every method
of the registry, the logit lens, the residual stream and ERASER's faithfulness (``ui.compute.explain`` on the
prompt and continuation: ``ui.compute.lm_explain``; charts: ``ui.charts.lm_explain``).

The translation models' word alignments (AER) and accuracy against a true alignment are not drawn: they score maps
against which source words each output word renders, which a prompt and its continuation do not have. The
randomization check runs as for a translation (the cascade holds the one stack and its one embedding).
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from transformer.explain import REGISTRY
from ui.charts import explain as charts
from ui.charts import lm_explain as lm_charts
from ui.charts.tokens import visible_piece
from ui.compute import explain
from ui.compute.analysis import Analysis
from ui.figures import chart, show_chart
from ui.sections import explain as sections
from ui.sections import faithfulness
from ui.sections.app_context import AppContext
from ui.sections.input_analysis import analyse_input, require_analysis
from ui.state import links, selection
from ui.state.widgets import csv_button, guard

__all__ = ["lm_explain_page"]

TITLE = "Explain a generated token"
INTRO = (
    "The model continued your prompt greedily. Each method below answers *which tokens made this generated token "
    "likely* in its own way: the tokens of the **prompt**, and the tokens the model **generated before it**, "
    "which it reads as it reads the prompt. Read the methods side by side: where they agree, trust the answer "
    "more. The methods are the translation models' (docs/explain.md): the prompt plays the source, the "
    "continuation so far the target prefix."
)
METHODS_NOTE = ("**On a language model** read *source* as the prompt and *target prefix* as the tokens generated "
                "before the explained one; *cross-attention* is the one stack's self-attention at the explained "
                "position, read over the prompt. "
                + ", ".join(m.label[:1].upper() + m.label[1:] for m in REGISTRY.values() if not m.target)
                + " score the prompt only.")
MORE = {"agreement": "Do the methods agree?", "source": "Prompt or continuation? (ALTI+)",
        "faithfulness": "Faithfulness (ERASER)", "sanity": "Randomization check", "lens": "The logit lens",
        "residual": "The residual stream"}
NOT_SHOWN = ("Not shown for a language model: word alignments (AER) and the accuracy against a true alignment, "
             "which score maps against which source words a translation renders (a prompt and its continuation "
             "have no such links).")
BLANK = ("Blank cells hold no number, never 0: past the dotted line a prompt-only method's cells, and in every "
         "method the tokens generated after the explained one (it had not read them); a whole blank row is undefined.")


def prompt_only(result: explain.Explanation) -> list[str]:
    """The maps whose method scores the prompt only (its registry entry has no target side, ``Method.target``)."""
    return [key for key in result.source if not REGISTRY[explain.split_view(key)[0]].target]


def lm_explain_page(app: AppContext) -> None:
    """The whole page for a decoder-only model (``app.pipeline``); the page stops after it."""
    st.title(TITLE)
    st.markdown(INTRO)
    with st.expander("The methods, and why they can disagree"):
        st.markdown(f"{sections.METHODS_TEXT}\n\n{METHODS_NOTE}")
    baseline = sections.choose_baseline()
    analysis = require_analysis(app)
    with guard("Explaining this continuation"):
        methods = sections.methods_to_compute(app, analysis)
        try:
            with st.spinner("Explaining with every method..."):
                result = explain.explain(app.model_key, app.device, app.pipeline, analysis, methods, baseline)
        except ValueError as error:
            st.warning(f"Nothing to explain: {error}")
            st.stop()
        row = _chosen_row(result, analysis.output_text)
        rows = result.out_tokens
        for method, message in result.errors.items():
            st.info(f"{explain.title(method)} cannot run here: {message}")

        st.subheader(f"Which prompt tokens and earlier generated tokens made “{rows[row]}” likely?")
        show_chart(chart(lm_charts.lm_row_bars, result.source, result.target, result.src_tokens, rows, row),
                   key="explain_rowchart")
        csv_button(lm_charts.lm_row_frame(result.source, result.target, result.src_tokens, rows, row),
                   f"explain_row{row}.csv", key="explain_row_csv")
        for note in result.notes:
            st.caption(note)
        if row and prompt_only(result):
            st.caption(f"{', '.join(explain.label(k) for k in prompt_only(result))}: the prompt only (their registry "
                       "entries score no target side), so no bars past the dotted line.")
        sections.undefined_note(result, row)
        _compare(app, row, methods, baseline)
        sections.ig_convergence(result, row, baseline)

        st.subheader("Every generated token, every method")
        st.markdown("Each panel is generated tokens (rows) × the prompt's tokens, then the tokens generated before "
                    "(columns, past the dotted line). Rows are scaled per method so that each row's largest magnitude "
                    "is 1: the panels share one colour scale, and the prompt's part compares with the continuation's. "
                    "Value zeroing and ALTI+ appear twice: rolled out through every layer, and the last layer alone "
                    f"(`· layer N`). {BLANK}")
        show_chart(chart(lm_charts.lm_method_grid, result.source, result.target, result.src_tokens, rows),
                   key="explain_grid")
        sections.undefined_note(result)
        links.restore("method", "explain_csv_method", list(result.source))
        method = st.selectbox("Download one method's matrix", list(result.source), key="explain_csv_method",
                              format_func=explain.title)
        csv_button(lm_charts.lm_attribution_frame(result.source[method], result.target.get(method),
                                                  result.src_tokens, rows), f"explain_{method}.csv",
                   key="explain_matrix_csv")
        links.publish(token=row, method=method)

        st.subheader("Beyond one token")
        links.restore("more", "explain_more", list(MORE))
        more = st.segmented_control("Show", list(MORE), format_func=MORE.get,
                                    default=None if "explain_more" in st.session_state else "agreement",
                                    key="explain_more", help="One section at a time: each is a chart the browser "
                                    "has to draw.")
        st.caption(NOT_SHOWN)
        links.publish(more=more)
        _show(more, app, analysis, result, baseline)


def _chosen_row(result: explain.Explanation, continuation: str) -> int:
    """The generated token to explain (pills, in the link as ``token``), each labelled "reads → predicts"."""
    rows, reads = result.out_tokens, result.lens_positions
    st.markdown(f"**Continuation:** `{continuation or '(empty)'}` — choose a generated token to explain:")
    links.restore("token", "explain_row", range(len(rows)), links.parse_int)
    selection.apply_output("explain_row", len(rows))

    def label(i: int) -> str:
        return f"{visible_piece(reads[i])} → {visible_piece(rows[i])}" if i < len(reads) else visible_piece(rows[i])

    chosen = st.pills("Generated token", range(len(rows)), format_func=label, selection_mode="single",
                      default=None if "explain_row" in st.session_state else 0,  # a default beside a set value warns
                      key="explain_row", label_visibility="collapsed")
    row = int(chosen) if chosen is not None and int(chosen) < len(rows) else 0  # a shorter new continuation: 0
    selection.note_output("explain_row", row)
    return row


def _compare(app: AppContext, row: int, methods: tuple[str, ...], baseline: str) -> None:
    """The sidebar's "Compare with" model's answer for the same token, where it is a language model too."""
    other_app = app.second_app()
    if other_app is None:
        return
    if not other_app.decoder_only:
        st.caption(f"{app.second.name} is a translation model: it explains a translation, not this continuation.")
        return
    st.markdown(f"**Beside it: {app.second.name}** (its own continuation of the same prompt)")
    other = analyse_input(other_app)
    try:
        found = explain.explain(other_app.model_key, app.device, other_app.pipeline, other,
                                sections.compare_methods(app, other_app, methods), baseline) if other else None
    except ValueError as error:
        st.info(f"{app.second.name}: nothing to explain ({error})")
        return
    if found is not None:
        other_row = min(row, len(found.out_tokens) - 1)
        show_chart(chart(lm_charts.lm_row_bars, found.source, found.target, found.src_tokens, found.out_tokens,
                         other_row), key="explain_rowchart_2")


def _show(more: str | None, app: AppContext, analysis: Analysis, result: explain.Explanation,
          baseline: str) -> None:
    """Draw the section ``more`` (a key of ``MORE``)."""
    if more == "agreement":
        sections.agreement(result)
    elif more == "source":
        source_share(result)
    elif more == "faithfulness":
        faithfulness.faithfulness(app, analysis, result, baseline)
    elif more == "sanity":
        sections.sanity(app, analysis, baseline)
    elif more == "lens":
        lens(app, analysis, result)
    elif more == "residual":
        residual(app, analysis, result)


def source_share(result: explain.Explanation) -> None:
    """ALTI+'s share of each prediction that comes from the prompt, the continuation's shaded above it."""
    rows = result.out_tokens
    st.subheader("Prompt or continuation: where does each prediction come from?")
    st.markdown("ALTI+ (Ferrando et al. 2022, *Towards Opening the Black Box of Neural Machine Translation: Source "
                "and Target Contributions to the Predictions*) splits each prediction between the prompt's tokens "
                "and the tokens generated before it, shares that add up to 1. The line is the prompt's share; the "
                "shaded part above it, the continuation's. The first generated token reads the prompt alone (its "
                "share is 1); a low share later means the token was predicted from what the model had just written "
                "rather than from the prompt: a piece that completes a word, or a loop repeating itself.")
    share = result.source_share("alti")
    if share is None:
        st.info(f"ALTI+ cannot run here: {result.errors.get('alti', 'not computed')}")
        return
    reason = explain.UNDEFINED_REASONS["alti"]
    show_chart(chart(charts.source_share_chart, share, rows, reason, parts=("prompt", "continuation so far"),
                     rows="generated token"), key="explain_source_share")
    undefined = int(np.isnan(share).sum())
    if undefined:
        st.caption(f"Undefined for {undefined} of {len(share)} generated tokens: {reason}. An undefined share is no "
                   "share at all, not 0 and not 1.")


def lens(app: AppContext, analysis: Analysis, result: explain.Explanation) -> None:
    """The logit lens on the one stack: each layer's top next token at the positions that predict the rows."""
    st.subheader("The logit lens: where does the answer appear?")
    st.markdown("The model's final norm and unembedding (soft-capped where the model caps its logits) read each "
                "layer's output as if it were the last (nostalgebraist 2020). Each column is the position that "
                "predicts one generated token: the prompt's last token, then each generated token; each cell the "
                "token that layer would predict next, coloured by its probability. The last row is the model's "
                "real prediction.")
    with st.spinner("Reading every layer through the unembedding..."):
        pieces, log_probs = explain.lens(app.model_key, app.device, app.pipeline, analysis)
    show_chart(chart(charts.logit_lens_grid, log_probs, pieces, result.lens_positions,
                     x_title="position (reads this token)"), key="explain_lens")


def residual(app: AppContext, analysis: Analysis, result: explain.Explanation) -> None:
    """How much each sub-layer adds to the residual stream at every position of prompt + continuation."""
    st.subheader("The residual stream: which sub-layers change the representation?")
    st.markdown("Every sub-layer reads the stream and adds its output to it (Elhage et al. 2021, *A Mathematical "
                "Framework for Transformer Circuits*). Each cell: the norm of what a sub-layer adds at a position "
                "of the prompt and its continuation, divided by the norm of the stream it is added to. Near 0, the "
                "sub-layer barely changes that token's representation; above 1, it rewrites it.")
    stream = explain.residual(app.model_key, app.device, app.pipeline, analysis)
    show_chart(chart(charts.residual_heatmap, stream, "decoder", lm_charts.columns(result.src_tokens,
                                                                                 result.out_tokens)),
               key="explain_residual")
    csv_button(stream, "residual_stream.csv", key="explain_residual_csv")
