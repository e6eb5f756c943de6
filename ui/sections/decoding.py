"""The Decoding page's sections: an output in full, the second model decoding with the same settings, and
the beam search tree (each step keeps the k most likely prefixes; Freitag & Al-Onaizan 2017 on its pruning), and
the beam search's controls and formula, which follow the model: GNMT's length penalty (Wu et al. 2016) with alpha
0.6 for ours, ``transformers``' rule with the folder's own settings for a Hugging Face folder (``beam_defaults``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from ui.charts import decoding as charts
from ui.compute import decoding
from ui.figures import chart, show_chart
from ui.sections.app_context import AppContext
from ui.sections.input_analysis import analyse_input
from ui.state import links, selection
from ui.state.widgets import ASKED, asked, csv_button

BEAM_SIZE, ALPHA, EARLY = "dec_beam_size", "dec_alpha", "dec_early"  # the beam controls' widget keys
_STARTED = "dec_beam_started"  # session_state: the model defaults the beam controls were last given
EARLY_LINKS = {"true": True, "false": False, "never": "never"}  # ?early=never
RULES = {"gnmt": (r"\frac{\log P(Y \mid x)}{((5 + |Y|)/6)^{\alpha}}", "GNMT's length penalty (Wu et al. 2016)"),
         "hf": (r"\frac{\log P(Y \mid x)}{|Y|^{\alpha}}",
                "transformers' rule: what generate(num_beams=k) gives for this Hugging Face model")}


INTRO = (
    "The decoder writes the output one token at a time. At step $t$ it reads the source (through "
    "cross-attention) and its own output so far, $\\langle s\\rangle\\, y_1 \\dots y_{t-1}$, and gives a "
    "probability for every token of the vocabulary. ")
LM_INTRO = (
    "A language model continues its prompt one token at a time. At step $t$ it reads the prompt "
    "$x_1 \\dots x_P$ and the tokens it chose so far, $y_1 \\dots y_{t-1}$, as one sequence (causal "
    "self-attention: there is no source and no cross-attention), and gives a probability for every token of the "
    "vocabulary. ")
METHODS_TEXT = (
    "**Greedy** decoding takes the most likely token; **beam search** keeps the $k$ most likely prefixes and "
    "extends each; **sampling** draws the token at random, after reshaping the distribution with a temperature $T$ "
    "and cutting it to the top-$k$ tokens or to the smallest set whose probability reaches $p$ (nucleus). Every "
    "method stops at the end-of-sequence token.")


def intro(pipeline: Any) -> None:
    """What decoding is, for this model: a translation's decoder, or a language model's continuation."""
    lm = decoding.decoder_only(pipeline)
    st.markdown((LM_INTRO if lm else INTRO) + METHODS_TEXT)
    st.latex((r"P(y_t \mid x, y_{<t})" if lm else r"P(y_t \mid y_{<t}, x)")
             + r" = \mathrm{softmax}(W h_t), \qquad P_T(y_t) \propto P(y_t)^{1/T}")
    if lm and (given := pipeline.meta.get("generation") or {}):
        named = ", ".join(f"{k} = {v}" for k, v in given.items() if k in ("do_sample", "temperature", "top_k",
                                                                           "top_p", "num_beams", "length_penalty"))
        if named:
            st.caption(f"This folder's generation_config.json recommends {named}: the controls below start there.")


def sampling_controls(pipeline: Any) -> None:
    """Seed the sampling controls (keys ``dec_temperature``, ``dec_top_k``, ``dec_top_p``) with the folder's
    recommended sampling (``decoding.sampling_defaults``), once per session; a folder that samples by default
    starts the step-by-step view on Sampling."""
    given = decoding.sampling_defaults(pipeline)
    for key, value in (("dec_temperature", round(min(max(given["temperature"], 0.1), 2.0), 1)),
                       ("dec_top_k", given["top_k"]), ("dec_top_p", min(max(given["top_p"], 0.05), 1.0))):
        st.session_state.setdefault(key, value)  # seeded, not the widget's value: both would warn
    if given["do_sample"]:
        st.session_state.setdefault("dec_method", "Sampling")


def step_views(pipeline: Any, analysis: Any, method: str, greedy: Any, beam: Any, sampled: Any) -> list[Any]:
    """The steps of ``method``'s output (an empty list where it did not run); a language model's prefixes start
    with its prompt."""
    lm = decoding.decoder_only(pipeline)
    prompt = len(analysis.src_tokens) if lm else 1
    if method == "Greedy":
        return charts.decode_step_views(greedy, prompt_len=prompt)
    if method == "Beam search":
        eos = list(pipeline.eos_ids) if lm else pipeline.config.eos_id
        return (charts.beam_step_views(beam, bos_id=pipeline.config.bos_id, eos_id=eos,
                                       prompt=analysis.src_ids if lm else None) if beam is not None else [])
    return charts.decode_step_views(sampled, prompt_len=prompt) if sampled is not None else []


def show_beam_rule(pipeline: Any) -> None:
    """The formula that ranks ``pipeline``'s finished beam hypotheses: the rule its beam search uses."""
    formula, name = RULES[decoding.beam_defaults(pipeline)["length_norm"]]
    st.latex(r"\text{beam score}(Y) = " + formula)
    st.caption(f"Beam search ranks finished hypotheses by {name}; |Y| counts the generated tokens, `</s>` "
               "included.")


def _stop_label(length_norm: str) -> Callable[[bool | str], str]:
    """How each ``early_stopping`` value ends the search under ``length_norm`` (``decoding.beam``)."""
    def label(value: bool | str) -> str:
        if value is True:
            return "when k hypotheses are finished"
        if value == "never":
            return "when no live prefix can win, even at the length limit"
        return ("when no live prefix can still win" if length_norm == "gnmt"
                else "when the best live prefix, scored at its length now, cannot win")
    return label


def beam_controls(pipeline: Any) -> tuple[int, float, bool | str]:
    """The beam size, length penalty alpha and early stopping, as the user set them. They start at the model's
    own (``decoding.beam_defaults``), again whenever the page shows a model with other defaults, and a link's
    ``beam``, ``alpha`` and ``early`` override them. Under GNMT's exact bound "never" is the same search as
    False, so only a Hugging Face model offers it."""
    defaults = decoding.beam_defaults(pipeline)
    norm = defaults["length_norm"]
    stops: tuple[bool | str, ...] = (False, True, "never") if norm == "hf" else (False, True)
    start = {BEAM_SIZE: defaults["beam_size"], ALPHA: float(defaults["length_penalty"]),
             EARLY: defaults["early_stopping"]}
    lowest, highest = min(0.0, start[ALPHA]), max(2.0, start[ALPHA])  # a folder's alpha may lie outside 0..2
    again = st.session_state.get(_STARTED) != start
    for key, value in start.items():  # seeded, not given as the widget's value: a widget with both gets a warning
        if again or key not in st.session_state or (key == EARLY and st.session_state[key] not in stops):
            st.session_state[key] = value
    st.session_state[_STARTED] = start
    links.restore("beam", BEAM_SIZE, decoding.BEAM_SIZES, links.parse_int)
    links.restore("alpha", ALPHA, lambda v: lowest <= v <= highest, lambda raw: round(links.parse_float(raw), 2))
    links.restore("early", EARLY, stops, lambda raw: EARLY_LINKS.get(raw.strip().lower(), raw))
    sizes = decoding.BEAM_SIZES
    beam_size = st.slider("Beam size k", sizes[0], sizes[-1], key=BEAM_SIZE,
                          help=f"This model's own: {defaults['beam_size']}")
    formula = "log P / ((5 + length) / 6)^α (GNMT)" if norm == "gnmt" else "log P / length^α (transformers)"
    alpha = st.slider("Length penalty α", lowest, highest, step=0.1, key=ALPHA,
                      help=f"{formula}; this model's own: {start[ALPHA]:g}")
    early = st.radio("Stop the search", stops, key=EARLY, format_func=_stop_label(norm),
                     help="k finished hypotheses: faster, but one that ended early may win. This model's own: "
                     f"{_stop_label(norm)(start[EARLY])}")
    return int(beam_size), float(alpha), early


def early_link(early: bool | str) -> str:
    """``early``'s value in a link (``EARLY_LINKS``)."""
    return "never" if early == "never" else str(bool(early)).lower()


def output_text(ids: Any, tokenizer: Any) -> str:
    """Output ids as text, "(empty)" for none."""
    return tokenizer.decode(list(ids)) or "(empty)"


def output_box(label: str, text: str) -> None:
    """An output sentence in full (st.metric would cut a long one)."""
    st.markdown(f"**{label}**")
    st.code(text, language=None, wrap_lines=True)


SEARCHES = {"Beam search": "beam", "Sampling": "sampling"}  # what waits for a button on a large model


def _asked_key(app: AppContext, analysis: Any, method: str) -> tuple:
    """What a press of ``method``'s button is remembered by: the model, device and input (not the settings: once
    asked, a change of k or T searches again at once, as on a small model)."""
    return ("decoding-" + SEARCHES[method], app.model_key, app.device, analysis.text)


def _cost(app: AppContext, analysis: Any, method: str, beam_size: int) -> str:
    """Why ``method`` waits on this model, and roughly what it costs against the greedy translation (the shared
    one, whose steps the page shows at once)."""
    steps = len(analysis.result.steps.tokens[0])
    work = (f"it extends k = {beam_size} prefixes at every step, up to {beam_size} × the work of the greedy "
            "translation" if method == "Beam search" else "it decodes once more, about the time of the greedy "
            "translation")  # k rows a step share one pass: k = 4 took ~2 × sampling's time at NLLB size
    return (f"This model has {app.pipeline.model.num_parameters() / 1e6:,.0f} M parameters, so "
            f"{method.lower()} waits for the button: {work} ({steps} steps here). Choosing it under Step by "
            "step runs it too.")


def runs(app: AppContext, analysis: Any, method: str, beam_size: int, *, wanted: bool = False,
         button_key: str = "") -> bool:
    """Whether ``method`` ("Beam search" or "Sampling") runs on ``app``'s model now: at once on a small model; on a
    large one (``decoding.waits``) once its button was pressed for this input, or when ``wanted`` (a link's
    ``method``, or the step-by-step choice, names it: as if pressed). Before that, the button and why it waits."""
    if not decoding.waits(app.pipeline):
        return True
    if asked(_asked_key(app, analysis, method), f"Run {method.lower()}",
             button_key=button_key or f"dec_run_{SEARCHES[method]}", pressed=wanted):
        return True
    st.caption(_cost(app, analysis, method, beam_size))
    return False


def beam_output(app: AppContext, analysis: Any, beam_size: int, length_penalty: float,
                early_stopping: bool | str, *, wanted: bool) -> Any:
    """The model's beam search on the input, with its best hypothesis drawn (``runs``: on a large model once
    asked); None before that, or when it failed (said)."""
    if not runs(app, analysis, "Beam search", beam_size, wanted=wanted):
        return None
    long_input = len(analysis.src_tokens) * beam_size > 200
    try:
        with st.spinner("Running beam search..." if long_input else "Searching..."):
            beam = decoding.beam(app.model_key, app.device, app.pipeline, analysis, beam_size, length_penalty,
                                 early_stopping)
    except (ValueError, RuntimeError) as error:
        st.error(f"Beam search failed: {error}")
        return None
    output_box("Best hypothesis", output_text(beam.best.tokens, app.pipeline.tgt_tokenizer))
    st.caption(f"score = {beam.best.score:.3f} · log P = {beam.best.log_prob:.3f} · "
               f"{len(beam.hypotheses)} hypotheses · {len(beam.history)} steps")
    return beam


def sample_output(app: AppContext, analysis: Any, temperature: float, top_k: int | None, top_p: float | None,
                  seed: int, beam_size: int, *, wanted: bool) -> Any:
    """One seeded sample of the input, drawn (``runs``: on a large model once asked); None before that, or when
    it failed (said)."""
    if not runs(app, analysis, "Sampling", beam_size, wanted=wanted):
        return None
    try:
        sampled = decoding.sampled(app.model_key, app.device, app.pipeline, analysis, temperature, top_k, top_p, seed)
    except (ValueError, RuntimeError) as error:
        st.error(f"Sampling failed: {error}")
        return None
    output_box("Sample", output_text(sampled.tokens[0], app.pipeline.tgt_tokenizer))
    st.caption(f"log P = {sampled.log_probs[0]:.3f} (under the model, T = 1) · {len(sampled.tokens[0])} tokens")
    return sampled


def _beside_runs(app: AppContext, analysis: Any, other_app: AppContext, other: Any, method: str, beam_size: int,
                 wanted: bool) -> bool:
    """Whether the "Compare with" model runs ``method``: by the rule for its own size (``runs``). Where both are
    large it follows the first model's button (one press compares the two); where only it is large, its own."""
    if not decoding.waits(other_app.pipeline):
        return True
    if decoding.waits(app.pipeline):
        if _asked_key(app, analysis, method) in st.session_state.get(ASKED, []):
            return True
        st.caption(f"Waits for the button above ({other_app.pipeline.model.num_parameters() / 1e6:,.0f} M "
                   "parameters).")
        return False
    return runs(other_app, other, method, beam_size, wanted=wanted,
                button_key=f"dec_run_{SEARCHES[method]}_2")


def decoding_beside(app: AppContext, analysis: Any, wanted: str, beam_size: int, length_penalty: float,
                    early_stopping: bool | str, temperature: float, top_k: int | None, top_p: float | None,
                    seed: int) -> None:
    """The sidebar's "Compare with" model decoding the same input with the same settings. Its beam search ranks
    by its own rule; an alpha belongs to a rule, so under another rule than the first model's it takes its own
    defaults (``decoding.beam_defaults``) and says so. On a large model its searches wait (``_beside_runs``);
    ``wanted`` is the method a link or the step-by-step choice asks for (as if its button were pressed)."""
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
    key, pipe = other_app.model_key, other_app.pipeline
    own = decoding.beam_defaults(pipe)
    same_rule = own["length_norm"] == decoding.beam_defaults(app.pipeline)["length_norm"]
    if not same_rule:
        length_penalty, early_stopping = own["length_penalty"], own["early_stopping"]
    try:
        with cols[1]:
            if _beside_runs(app, analysis, other_app, other, "Beam search", beam_size, wanted == "Beam search"):
                other_beam = decoding.beam(key, app.device, pipe, other, beam_size, length_penalty, early_stopping)
                output_box("Beam search", output_text(other_beam.best.tokens, tokenizer))
                st.caption(f"k = {beam_size}, α = {length_penalty:g}, stops "
                           f"{_stop_label(own['length_norm'])(early_stopping)}: "
                           + ("the same rule and settings" if same_rule else
                              f"its own rule, {RULES[own['length_norm']][1]}, and its own α and stop"))
        with cols[2]:
            if _beside_runs(app, analysis, other_app, other, "Sampling", beam_size, wanted == "Sampling"):
                other_sample = decoding.sampled(key, app.device, pipe, other, temperature, top_k, top_p, seed)
                output_box("Sampling", output_text(other_sample.tokens[0], tokenizer))
    except (ValueError, RuntimeError) as error:
        st.info(f"{app.second.name} cannot decode this input: {error}")
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
                large: bool = False, lm: bool = False) -> None:
    """Step ``t`` (1-based) of an output: the next-token distribution and the cross-attention that step, then
    (folded, or on a ``large`` model behind a toggle) every step's cross-attention and each choice's probability.
    ``lm``: a decoder-only model, whose step records the newest token's self-attention over the prompt."""
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
        title = f"Attention over the prompt: {'every layer' if rows is None else f'layer {rows}'}" if lm else None
        show_chart(chart(charts.step_attention_heatmap, view.cross_attention, src_tokens, layer=rows, title=title,
                         key_title="prompt token" if lm else "source token"), half=True, key="dec_step_attention")
        if lm:
            st.caption("The new token's query over the prompt's keys, each layer's heads averaged: the weights on "
                       "the tokens generated before it are not drawn, so a row sums to at most 1.")
        csv_button(charts.step_attention_frame(view.cross_attention, src_tokens, layer=rows),
                         f"step{t}_cross_attention.csv", key="dec_attn_csv")

    whole = (f"The whole output: {'attention over the prompt' if lm else 'cross-attention'} of every step, and "
             "each choice's probability")
    if large:  # a folded expander still draws its charts: on a large model they wait for the toggle
        if st.toggle(whole, key="dec_whole_on"):
            _whole_output(views, t, method, src_tokens, piece, lm)
    else:
        with st.expander(whole):
            _whole_output(views, t, method, src_tokens, piece, lm)


def _whole_output(views: list[Any], t: int, method: str, src_tokens: list[str], piece: Callable[[int], str],
                  lm: bool = False) -> None:
    """Every step's cross-attention, and each choice's probability (a click on a bar goes to its step)."""
    out_tokens = [piece(v.chosen) for v in views]
    show_chart(chart(charts.output_attention_heatmap, [v.cross_attention for v in views], src_tokens, out_tokens,
                     title="Attention over the prompt per generated token" if lm else None,
                     key_title="prompt token" if lm else "source token"), key="dec_output_attention")
    confidence = charts.steps_frame(views, piece)
    show_chart(chart(charts.confidence_chart, confidence, current=t), key="dec_confidence",
               on_select=selection.on_output_click("dec_confidence"), selection_mode="points")
    st.caption("Click a bar to go to its step.")
    csv_button(confidence, f"{method.lower().replace(' ', '_')}_steps.csv", key="dec_steps_csv")
