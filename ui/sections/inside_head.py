"""The Attention page's "inside one head, step by step" section: the charts of
``ui.charts.inside_head`` for the selected head and query, each with the few lines of ``transformer/``
that computed it, read from the package with ``inspect`` so the code shown cannot drift from the code
that runs (the Annotated Transformer puts the code beside the figure the same way)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from functools import cache

import streamlit as st

from transformer.network import masks
from transformer.network.attention import MultiHeadAttention, attention_scores, scaled_dot_product_attention
from transformer.network.relative_position import RelativePositionBias, relative_bucket
from ui.charts import formulas, readable_frame
from ui.charts import inside_head as charts
from ui.figures import show_chart
from ui.sections.app_context import AppContext
from ui.state.widgets import csv_button


@cache
def source(obj: Callable) -> str:
    """The source code of a function or method of the package, as it is on disk."""
    return inspect.getsource(obj)


def code_expander(title: str, objects: Sequence[Callable]) -> None:
    with st.expander(f"The code: {title}"):
        for obj in objects:
            st.caption(f"`{obj.__module__}.{obj.__qualname__}`")
            st.code(source(obj), language="python")


def position_bias(trace, kind: str, head: int, query: int):  # noqa: ANN001, ANN201  (a Trace in, a tensor out)
    """The bias ``head`` adds to query ``query``'s scores over every key, (T_k,), from the trace's
    ``{stack}.position_bias`` (T5's relative positions, self-attention only); None where the model adds none."""
    name = f"{'encoder' if kind == 'encoder' else 'decoder'}.position_bias"
    if kind == "cross" or name not in trace:
        return None
    return trace[name][0, head, query]  # (1, H, T_q, T_k) -> (T_k,)


def show(app: AppContext, trace, kind: str, layer: int, head: int, query: int,
         queries: Sequence[str], keys: Sequence[str]) -> None:
    """The whole section for one head and query (the page has checked that both exist)."""
    # imported when drawn; cheap (no Captum: transformer.explain loads it only for the gradient methods)
    from transformer.explain.inside_head import inside_head

    steps = inside_head(app.pipeline.model, trace, kind, layer, head, query)
    scale, bias = formulas.score_switches(app.pipeline.config, kind)[0], position_bias(trace, kind, head, query)
    st.markdown(f"Query **{query}** (`{queries[query]}`), layer {layer}, head {head}, $d_k = {steps.d_k}$. "
                "1. The sub-layer's input is projected into this head's query, key and value vectors.")
    show_chart(charts.vectors_panels(steps, queries[query], keys), key="inside_vectors", cols=3)
    config = app.pipeline.config
    if steps.kv_head is not None:
        st.caption(f"Head {head} reads key/value head {steps.kv_head}: its K and V are shared with the other "
                   f"{config.n_heads // config.kv_heads - 1} query head(s) of its group (grouped-query attention).")
    if steps.q_unrotated is not None:
        st.markdown("Rotary positions (RoPE): before the product, each pair of dimensions of $q_i$ is turned by "
                    "the angle $i\\,\\theta_p$ and of $k_j$ by $j\\,\\theta_p$, so $q_i \\cdot k_j$ depends on "
                    "$j - i$ alone; the K above are turned already.")
        show_chart(charts.rotation_panel(steps, queries[query]), key="inside_rotation")
    code_expander("the projections", [MultiHeadAttention._project, MultiHeadAttention._split])

    formula = (formulas.lm_score(config, latex=True, per_key=True) if config.decoder_only
               else charts.score_latex(scale, bias is not None))
    st.markdown(f"2. Each key's score is ${formula}$"
                + ("" if scale else " (this model does not divide by $\\sqrt{d_k}$)")
                + (": $b_h$ is this head's learned bias for the distance from the query to the key (the "
                   "Embeddings page draws it against the distance)" if bias is not None else "")
                + "; the mask sets the keys this query may not see to $-\\infty$, and the softmax turns the "
                "scores into weights that sum to 1.")
    frame = charts.steps_frame(steps, keys, bias, scale)
    st.dataframe(readable_frame(frame), hide_index=True)
    csv_button(frame, f"head_{kind}_L{layer}_H{head}_q{query}_steps.csv", key="inside_csv")
    plain = formulas.lm_score(config, per_key=True) if config.decoder_only else None
    show_chart(charts.scores_to_weights_panels(steps, keys, bias, scale, plain), key="inside_scores",
               cols=2 if bias is None else 3)
    mask_code = ([masks.causal_mask, masks.lm_mask] if config.decoder_only else [masks.padding_mask]
                 if kind != "decoder" else [masks.padding_mask, masks.causal_mask, masks.decoder_self_mask])
    bias_code = [RelativePositionBias.forward, relative_bucket] if bias is not None else []
    code_expander("scores, mask and softmax", [attention_scores, scaled_dot_product_attention, *bias_code,
                                               *mask_code])

    st.markdown("3. The output is the weighted sum of the value vectors. The h heads' outputs are then "
                "concatenated and multiplied by $W^O$.")
    show_chart(charts.output_chart(steps, keys), key="inside_output")
    code_expander("the weighted sum, the heads concatenated and W^O", [MultiHeadAttention.forward])
