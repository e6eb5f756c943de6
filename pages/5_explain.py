"""Page 5: why did this output token come out? Every attribution method side by side, and the logit lens."""

import streamlit as st

from ui import explain, links, selection
from ui.charts import explain as charts
from ui.charts.tokens import visible_piece
from ui.figure_cache import chart, panel, panels
from ui.presentation import show_chart
from ui.sidebar import sidebar
from ui.widgets import csv_button, guard

MORE = {"agreement": "Do the methods agree?", "lens": "The logit lens", "residual": "The residual stream"}

app = sidebar(with_compare=True)

st.title("Explain an output token")
st.markdown(
    "An attention heatmap shows where a head looked, not why a token came out. Each method below answers "
    "*which source tokens made this output token likely* in its own way, so read them side by side: where "
    "they agree, trust the answer more; where they disagree, the model spreads the work in ways one "
    "method cannot see."
)
with st.expander("The methods, and why they can disagree"):
    st.markdown(
        "- **Attention**: the last decoder layer's cross-attention, averaged over heads: what everyone shows.\n"
        "- **Attention rollout** (Abnar & Zuidema 2020, *Quantifying Attention Flow in Transformers*): "
        "attention multiplied through every layer, each with the residual as 0.5·I: the encoder's, then each "
        "decoder layer's self- and cross-attention (Chefer et al. 2021's rules for encoder-decoders), since a "
        "decoder state mixes earlier outputs and a source position's encoder output mixes other tokens.\n"
        "- **Relevancy** (Chefer et al. 2021, *Generic Attention-model Explainability for Interpreting Bi-Modal "
        "and Encoder-Decoder Transformers*): attention weighted by its gradient (positive part), propagated "
        "through every self- and cross-attention layer.\n"
        "- **Value-weighted attention** (Kobayashi et al. 2020, *Attention is Not Only a Weight*): "
        "‖Σ_h α_h f_h(x_j)‖, the size of what each source token actually sends, not just its weight.\n"
        "- **Saliency, input × gradient, integrated gradients** (Simonyan et al. 2014; Shrikumar et al. 2016; "
        "Sundararajan et al. 2017, *Axiomatic Attribution for Deep Networks*), computed with Captum on the "
        "source token embeddings (the positional encoding is not attributed). Integrated gradients sums to the "
        "change in log-probability from an all-zero-embedding source; its convergence delta says how exactly.\n"
        "- **Occlusion** (Zeiler & Fergus 2014): each source token in turn replaced by `<unk>`; how much the "
        "log-probability of the output token drops.\n"
        "- **Value zeroing** (Mohebbi et al. 2023, *Quantifying Context Mixing in Transformers*): in each layer, "
        "each token's value vectors set to zero, and how far every output moves (cosine distance), rolled out "
        "through the encoder and every decoder self- and cross-attention layer.\n\n"
        "Attention weights ignore how large the attended vectors are and what the layers below mixed in "
        "(Jain & Wallace 2019, *Attention is not Explanation*); gradients are local and can be noisy; "
        "occlusion asks a counterfactual the model never saw in training. Agreement is evidence, not proof."
    )

analysis = app.require_analysis()
with guard("Explaining this translation"):
    try:
        result = explain.explain(app.model_key, app.device, app.pipeline, analysis)
    except ValueError as error:
        st.warning(f"Nothing to explain: {error}")
        st.stop()

    rows = result.out_tokens
    st.markdown(f"**Translation:** `{analysis.output_text or '(empty)'}` — choose an output token to explain:")
    links.restore("token", "explain_row", range(len(rows)), links.parse_int)
    selection.apply_output("explain_row", len(rows))
    chosen = st.pills("Output token", range(len(rows)), format_func=lambda i: f"{i}: {visible_piece(rows[i])}",
                      selection_mode="single", default=0, key="explain_row", label_visibility="collapsed")
    row = int(chosen) if chosen is not None and int(chosen) < len(rows) else 0  # a shorter new translation: 0
    selection.note_output("explain_row", row)
    for method, message in result.errors.items():
        st.info(f"{explain.METHOD_TITLES.get(method, method)} cannot run here: {message}")

    st.subheader(f"Which source tokens made “{rows[row]}” likely?")
    show_chart(chart(charts.token_row_bars, result.source, result.src_tokens, rows[row], row), key="explain_rowchart")
    csv_button(charts.row_frame(result.source, result.src_tokens, row), f"explain_row{row}.csv", key="explain_row_csv")
    other_app = app.second_app()
    if other_app is not None:  # the sidebar's "Compare with" model: the same question, rows scaled alike
        st.markdown(f"**Beside it: {app.second.label}**")
        other = other_app.analysis()
        try:
            other_result = explain.explain(other_app.model_key, app.device, other_app.pipeline, other) \
                if other is not None else None
        except ValueError as error:
            st.info(f"{app.second.label}: nothing to explain ({error})")
            other_result = None
        if other_result is not None:
            other_row = min(row, len(other_result.out_tokens) - 1)
            show_chart(chart(charts.token_row_bars, other_result.source, other_result.src_tokens,
                             other_result.out_tokens[other_row], other_row), key="explain_rowchart_2")
    if result.ig_delta is not None:
        st.caption(f"Integrated gradients' convergence delta for this token: {float(result.ig_delta[row]):+.4f} "
                   "(the attributions sum to the change in log-probability up to this amount).")

    st.subheader("Every output token, every method")
    st.markdown("Each panel is output tokens (rows) × source tokens (columns). Rows are scaled per method so "
                "that each row's largest magnitude is 1: the panels share one colour scale.")
    show_chart(chart(charts.method_grid, result.source, result.src_tokens, rows), key="explain_grid")
    links.restore("method", "explain_csv_method", list(result.source))
    method = st.selectbox("Download one method's matrix", list(result.source), key="explain_csv_method",
                          format_func=lambda m: explain.METHOD_TITLES.get(m, m))
    csv_button(charts.attribution_frame(result.source[method], result.src_tokens, rows), f"explain_{method}.csv",
               key="explain_matrix_csv")
    links.publish(token=row, method=method)

    st.subheader("Beyond one token")
    links.restore("more", "explain_more", list(MORE))
    more = st.segmented_control("Show", list(MORE), format_func=MORE.get, default="agreement", key="explain_more",
                                help="One section at a time: each is a chart the browser has to draw.")
    links.publish(more=more)
    if more == "agreement":
        st.subheader("Do the methods agree?")
        st.markdown("Spearman's rank correlation of every pair of methods over all (output, source) cells of this "
                    "input: 1 means the same ranking of source tokens, 0 none in common.")
        table = result.agreement()
        show_chart(chart(charts.agreement_heatmap, table), key="explain_agreement")
        csv_button(table.reset_index(names="method"), "explain_agreement.csv", key="explain_agreement_csv")
        accuracy = result.accuracy()
        if accuracy is not None:
            st.markdown("**Against the truth.** This task is generated, so the true source token(s) of every output "
                        "token are known: the share of output tokens whose most attributed source token is a true one.")
            st.dataframe(accuracy, hide_index=True)
            csv_button(accuracy, "explain_alignment_accuracy.csv", key="explain_accuracy_csv")
        elif result.alignment_note:
            st.caption(f"No accuracy against a true alignment: {result.alignment_note}")

    elif more == "lens":
        st.subheader("The logit lens: where does the answer appear?")
        st.markdown("The generator (after the decoder's final LayerNorm) reads each decoder layer's output as if it "
                    "were the last (nostalgebraist 2020). Each column is one output token; each cell the token that "
                    "layer would predict there, "
                    "coloured by its probability. The last row is the model's real prediction.")
        show_chart(chart(charts.logit_lens_grid, result.lens, result.lens_positions, result.vocab),
                   key="explain_lens")

    elif more == "residual":
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
