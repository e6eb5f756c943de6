"""The Explain page's computations: every attribution method, the logit lens, the true alignment, ALTI+'s source
share and the randomization check (cached). A decoder-only language model's input is its prompt and greedy
continuation (``ui.compute.lm_explain``): the same calls, the prompt as the source, the continuation as the target.

Each method's result is cached per model, device, input and method (``st.cache_resource``), so
switching the explained token or the chart redraws without recomputing, and a second browser
on the same input gets it at once. Results are numpy arrays, never modified after they are built.
A method that cannot run on this model or input returns its message instead of an array.
On a large model (opus-mt size) the costly methods (``costly``) wait for the page's button, and each runs under a
progress bar as shared work (``shared_work.shared_or_cut``): kept for every browser, in public mode in the
heavy-work pool (one per session, a few server-wide, the bar saying the place in line), and stopped at its time
budget (``settings.heavy_seconds()``) with a message instead of its map. Every other method is cached per input
(``st.cache_resource``) under the same budget.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import streamlit as st
import torch

from transformer.explain import (
    LAYER_VIEW_METHODS,
    METHODS,
    REGISTRY,
    UNDEFINED_REASONS,  # noqa: F401  (the sections read it from here)
    agreement,
    alignment_accuracy,
    attribute,
    logit_lens_top,
    randomization_check,
    residual_stream,
    source_share,
    true_alignment,
)
from transformer.explain.gradients import baseline_note, default_baseline, within_tolerance
from transformer.explain.progress import OutOfTime, Progress, with_deadline
from transformer.pipeline import Pipeline
from ui.compute.analysis import Analysis, builtin_task
from ui.compute.lm_explain import END_LEFT_OUT, end_left_out, is_lm_analysis, lm_ids, pieces
from ui.compute.model_size import is_large
from ui.compute.shared_work import Cut, shared, shared_or_cut
from ui.state import settings

# What each method answers, in one line for the page (the registry's label and summary).
METHOD_TITLES = {m.name: m.title for m in REGISTRY.values()}


LAYERED = LAYER_VIEW_METHODS  # each also shown for the last decoder layer alone, beside its roll-out
IG_BASELINES = ("default", "zero", "pad", "unk")  # integrated gradients' starting points (``baseline=``); "default":
# the model's own (``gradients.default_baseline``: one at which the model is smooth)
RANDOMIZATION_IG_STEPS = 32  # integrated gradients' points in the randomization check (one run per layer randomized)
CUT_ADVICE = "Try a shorter input, or a smaller model."  # after a method's "cut after 180 s" message
NO_LM_ALIGNMENT = ("a prompt and its continuation have no true word alignment (that is a translation's: which "
                   "source words each output word renders)")


def layer_view(method: str, layer: int) -> str:
    """The key of ``method``'s map of decoder layer ``layer`` alone (``attribute(..., layer=layer)``), beside the key
    ``method`` of its roll-out through every layer."""
    return f"{method} · layer {layer}"


def split_view(key: str) -> tuple[str, int | None]:
    """``layer_view``'s key -> (method, layer); a plain method's key -> (method, None)."""
    method, _, layer = key.partition(" · layer ")
    return method, int(layer) if layer else None


def title(key: str) -> str:
    """What a map answers, in one line (``METHOD_TITLES``), a layer's own view saying so."""
    method, layer = split_view(key)
    text = METHOD_TITLES.get(method, method)
    return text if layer is None else f"{text}: decoder layer {layer} alone, not rolled out"


def label(key: str) -> str:
    """A map's short name: the registry's label, "ALTI+, decoder layer 1 alone" for a layer's own view."""
    method, layer = split_view(key)
    text = REGISTRY[method].label if method in REGISTRY else method
    return text if layer is None else f"{text}, decoder layer {layer} alone"


def costly(method: str) -> bool:
    """Whether a method (or a layer's own view of it, ``layer_view``, which costs as its method does) takes seconds
    per sentence at opus-mt size: every cost class in the registry but one forward (``Method.cost``): backward
    passes per output token (the gradient methods, relevancy), a forward per source token (occlusion), or per token
    and layer (value zeroing). Measured: docs/benchmarks.md, "attribution methods at opus-mt size, 1 thread"."""
    return REGISTRY[split_view(method)[0]].cost != "forward"


def deferred(pipeline: Pipeline) -> tuple[str, ...]:
    """The methods the page computes only at a button: the costly ones on a large model, none on a small one."""
    return tuple(m for m in METHODS if costly(m)) if is_large(pipeline) else ()


@dataclass(frozen=True)
class Explanation:
    """Every method on one input: rows explain the output tokens, columns are the source tokens. A language
    model's: rows explain the generated tokens, ``source`` columns are the prompt's tokens, ``target`` columns the
    placeholder (always 0) then the tokens generated before (``lm_explain``)."""

    src_tokens: list[str]  # the source pieces the encoder read, </s> included (a language model's: the prompt's)
    out_tokens: list[str]  # the explained tokens: y_1 .. y_n (then </s> when decoding finished)
    source: dict[str, np.ndarray]  # method (or ``layer_view``) -> (rows, S); NaN rows where it is undefined
    errors: dict[str, str]  # method -> why it could not run here
    ig_delta: np.ndarray | None = None  # (rows,) integrated gradients' convergence delta
    alignment: np.ndarray | None = None  # (rows, S) bool: the task's true source tokens of each output token
    alignment_note: str = ""
    lens_positions: list[str] = field(default_factory=list)  # the decoder input tokens that predict the rows
    ig_baseline: str = ""  # the baseline integrated gradients started from ("zero", "pad", "unk")
    ig_note: str = ""  # which baseline that is and why, in a sentence (``gradients.baseline_note``)
    target: dict[str, np.ndarray] = field(default_factory=dict)  # method -> (rows, rows) over the decoder input,
    # for the methods whose registry entry scores it (``Method.target``)
    decoder_only: bool = False  # a language model's prompt (source) and continuation (target)
    notes: tuple[str, ...] = ()  # what the page says about the explained tokens (an end token left out)

    def agreement(self) -> pd.DataFrame:
        """Spearman rank correlation of every pair of methods over this input's (row, source) cells."""
        return agreement({m: torch.from_numpy(a) for m, a in self.source.items()})

    def source_share(self, key: str = "alti") -> np.ndarray | None:
        """ALTI+'s share of each row's prediction that comes from the source (the rest comes from the prefix), NaN
        where undefined; ``key`` the roll-out ("alti") or a layer's own view (``layer_view``)."""
        if key not in self.source:
            return None
        return source_share(torch.from_numpy(self.source[key])[None])[0].numpy()

    def undefined(self) -> dict[str, int]:
        """Per map with undefined rows (NaN: ALTI+, value zeroing), how many of its rows are."""
        counts = {key: int(np.isnan(a).any(axis=1).sum()) for key, a in self.source.items()}
        return {key: n for key, n in counts.items() if n}

    def ig_convergence(self) -> pd.DataFrame | None:
        """Integrated gradients' convergence per output token, or None where it was not computed: the gap
        f(x) - f(x') its attributions must add up to (their sum less delta, by completeness), delta, |delta| / |gap|
        (NaN where the gap is 0) and whether the row is ``within_tolerance`` (the adaptive rule refines every row
        until it is, up to 1024 intervals; a row still off keeps that result and is flagged)."""
        integrated = [m for m in self.source if m in REGISTRY and REGISTRY[m].baseline]  # integrated gradients
        if self.ig_delta is None or not integrated:
            return None
        delta = self.ig_delta.astype(float)
        gap = self.source[integrated[0]].sum(-1) - delta  # (rows,): f(x) - f(x')
        ratio = np.divide(np.abs(delta), np.abs(gap), out=np.full_like(delta, np.nan), where=gap != 0)
        return pd.DataFrame({"output token": self.out_tokens, "f(x) − f(x′)": gap, "delta": delta,
                             "|delta| / |gap|": ratio, "within tolerance": within_tolerance(delta, gap)})

    def accuracy(self) -> pd.DataFrame | None:
        """Per method: the share of output tokens whose most attributed source token is a true one."""
        if self.alignment is None:
            return None
        truth = torch.from_numpy(self.alignment)
        return pd.DataFrame({"method": list(self.source),
                             "top source token is a true one": [
                                 alignment_accuracy(torch.from_numpy(a), truth) for a in self.source.values()]})


def explained_ids(analysis: Analysis, pad_id: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(1, S) source and (1, T) target ids ``<s> y_1 .. y_n [</s>]`` of the analysed greedy translation; a language
    model's prompt (1, P) and ``lm_pair``'s placeholder then continuation (``lm_explain.lm_ids``: its end token left
    out where it is ``pad_id``, the model's)."""
    if is_lm_analysis(analysis):
        return lm_ids(analysis, pad_id)
    src = torch.tensor([analysis.src_ids])
    tgt = [*analysis.decoder_ids, *([analysis.eos_id] if analysis.result.finished else [])]
    return src, torch.tensor([tgt])


def explained_positions(pipeline: Pipeline, analysis: Analysis) -> list[str]:
    """The decoder input pieces ``<s> y_1 .. y_n`` whose positions predict the explained tokens (one per row); a
    language model's: the prompt's last token, then c_1 .. c_n."""
    _, tgt = explained_ids(analysis, pipeline.config.pad_id)
    return pieces(pipeline, tgt[0, :-1])


def agreeing_with_truth(accuracy: pd.DataFrame, threshold: float = 0.5) -> str:
    """In words, which methods find the true source token of most output tokens (share >= ``threshold``) and
    which do not, best first: what the page says where methods disagree and the truth is known."""
    scores = accuracy.set_index("method").iloc[:, 0].dropna().sort_values(ascending=False)
    if scores.empty:
        return ""

    def named(part: pd.Series) -> str:
        return ", ".join(f"{label(m)} ({v:.0%})" for m, v in part.items())

    agree, disagree = scores[scores >= threshold], scores[scores < threshold]
    said = [f"Agree with the true alignment on this input: {named(agree)}." if len(agree) else
            "No method finds the true source token of most output tokens on this input."]
    if len(disagree):
        said.append(f"Do not: {named(disagree)}.")
    return " ".join(said)


Maps = tuple[np.ndarray, np.ndarray | None, np.ndarray | None]  # one method's source map (rows, S), its target map
# (rows, rows) where it scores the target, and IG's delta (rows,) or None


def _attribute(pipeline: Pipeline, analysis: Analysis, method: str, baseline: str, layer: int | None,
               progress: Progress) -> Maps | str:
    """One method's map of the analysed input, or why it cannot run here; ``progress`` is told between its steps
    (a deadline raises ``OutOfTime`` there)."""
    src, tgt = explained_ids(analysis, pipeline.config.pad_id)
    device_ = pipeline.device
    options = {"baseline": baseline} if REGISTRY[method].baseline else {}
    if layer is not None:
        options["layer"] = layer
    try:
        result = attribute(pipeline.model, src.to(device_), tgt.to(device_), method, progress=progress, **options)
    except ValueError as error:
        return str(error)
    delta = None if result.delta is None else result.delta[0].cpu().numpy()
    target = None if result.target is None else result.target[0].cpu().numpy()
    return result.source[0].cpu().numpy(), target, delta


@st.cache_resource(max_entries=512, show_spinner=False)
def _method(model_key: str, device: str, text: str, method: str, baseline: str, _pipeline: Pipeline,
            _analysis: Analysis, layer: int | None = None) -> Maps | str:
    try:
        return _attribute(_pipeline, _analysis, method, baseline, layer, with_deadline(None, settings.heavy_seconds()))
    except OutOfTime as cut:  # kept like a result: the same input asked again is cut again
        return f"{cut}. {CUT_ADVICE}"


def method_maps(model_key: str, device: str, text: str, method: str, baseline: str, pipeline: Pipeline,
                analysis: Analysis, layer: int | None = None) -> Maps | str:
    """One method's map of the analysed input (``layer``: a layer's own view), or why it cannot run here: cut by
    the time budget, or not started because the heavy-work pool is full. A costly method on a large model runs as
    shared work (module docstring), every other in the cache."""
    if not (costly(method) and is_large(pipeline)):
        return _method(model_key, device, text, method, baseline, pipeline, analysis, layer)
    key = method if layer is None else layer_view(method, layer)
    found = shared_or_cut("explain_methods", (model_key, device, text, key, baseline),
                          lambda progress: _attribute(pipeline, analysis, method, baseline, layer, progress),
                          label=f"{label(key)[:1].upper()}{label(key)[1:]}:", max_entries=256)
    if isinstance(found, Cut):
        return f"{found.message}. {CUT_ADVICE}" if found.kept else f"{found.message}."
    return found


@st.cache_resource(max_entries=256, show_spinner=False)
def _lens(model_key: str, device: str, text: str, _pipeline: Pipeline, _analysis: Analysis
          ) -> tuple[np.ndarray, np.ndarray]:
    src, tgt = explained_ids(_analysis, _pipeline.config.pad_id)  # tgt (1, T) = <s> y_1 .. y_n [</s>]: the rows
    ids, log_probs = logit_lens_top(_pipeline.model, src.to(_pipeline.device), tgt.to(_pipeline.device))
    top = np.array([pieces(_pipeline, row) for row in ids[:, 0].tolist()], dtype=object)
    return top, log_probs[:, 0].cpu().numpy()  # (L, T-1) each


def lens(model_key: str, device: str, pipeline: Pipeline, analysis: Analysis) -> tuple[np.ndarray, np.ndarray]:
    """The logit lens (nostalgebraist 2020) on the analysed input, cached: each decoder layer's top next token
    (its piece) and that token's log-probability, both (layers, rows), the rows those of ``explain``.

    Computed only when its section is shown, and only the top token kept (``logit_lens_top``): at NLLB-600M size
    the whole lens of one sentence was 455 MB, kept per input, and its generator passes took seconds of
    every first visit to the page (measured: docs/benchmarks.md, "first visit per page at NLLB size")."""
    return _lens(model_key, device, analysis.text, pipeline, analysis)


@st.cache_resource(max_entries=256, show_spinner=False)
def _residual(model_key: str, device: str, text: str, _pipeline: Pipeline, _analysis: Analysis) -> pd.DataFrame:
    src, tgt = explained_ids(_analysis, _pipeline.config.pad_id)
    return residual_stream(_pipeline.model, src.to(_pipeline.device), tgt.to(_pipeline.device))


def residual(model_key: str, device: str, pipeline: Pipeline, analysis: Analysis) -> pd.DataFrame:
    """``transformer.explain.residual_stream`` on the analysed input, cached: the source, and the decoder input
    ``<s> y_1 .. y_n`` of ``explained_ids``' target (a language model's one stack: prompt, then c_1 .. c_n)."""
    return _residual(model_key, device, analysis.text, pipeline, analysis)


def _alignment(pipeline: Pipeline, analysis: Analysis, out_tokens: list[str]) -> tuple[np.ndarray | None, str]:
    if is_lm_analysis(analysis):
        return None, NO_LM_ALIGNMENT
    task = builtin_task(pipeline)
    if task is None:
        return None, "This model was trained on a user's file: no true alignment is known."
    try:
        truth = true_alignment(task, analysis.text, analysis.output_text, analysis.src_tokens, out_tokens)
    except ValueError as error:
        return None, str(error)
    return truth.numpy(), ""


def explain(model_key: str, device: str, pipeline: Pipeline, analysis: Analysis,
            methods: tuple[str, ...] = METHODS, baseline: str = "default") -> Explanation:
    """Every method in ``methods`` on the analysed input (each cached; value zeroing and ALTI+ also for the last
    decoder layer alone, ``layer_view``) and the true alignment (the logit lens: ``lens``); ``baseline`` is integrated
    gradients' (``IG_BASELINES``; "default": the model's own, ``used_baseline``). A language model's: its prompt's
    continuation, each map's target part kept too (``Explanation.target``)."""
    src, tgt = explained_ids(analysis, pipeline.config.pad_id)
    chosen = None if baseline == "default" else baseline
    baseline = used_baseline(pipeline, baseline)
    lm = is_lm_analysis(analysis)
    if tgt.size(1) < 2:
        raise ValueError(f"the {'continuation' if lm else 'translation'} has no tokens to explain (decoding stopped "
                         "before producing any)")
    out_tokens = pieces(pipeline, tgt[0, 1:])
    source: dict[str, np.ndarray] = {}
    target: dict[str, np.ndarray] = {}
    errors: dict[str, str] = {}
    delta = None
    for method in methods:
        result = method_maps(model_key, device, analysis.text, method, baseline if REGISTRY[method].baseline
                             else "", pipeline, analysis)
        if isinstance(result, str):
            errors[method] = result
            continue
        source[method], method_target, method_delta = result
        if method_target is not None:
            target[method] = method_target
        if REGISTRY[method].baseline:  # integrated gradients: its convergence delta
            delta = method_delta
        if method in LAYERED:  # beside the roll-out, the last decoder layer's own mixing
            last = pipeline.config.n_decoder_layers - 1
            view = method_maps(model_key, device, analysis.text, method, "", pipeline, analysis, layer=last)
            if not isinstance(view, str):
                source[layer_view(method, last)] = view[0]
                if view[1] is not None:
                    target[layer_view(method, last)] = view[1]
    truth, note = _alignment(pipeline, analysis, out_tokens)
    positions = explained_positions(pipeline, analysis)
    notes = ()
    if lm and end_left_out(analysis, pipeline.config.pad_id):
        notes = (END_LEFT_OUT.format(piece=pieces(pipeline, [pipeline.config.pad_id])[0]),)
    return Explanation(pieces(pipeline, src[0]) if lm else analysis.src_tokens, out_tokens, source, errors, delta,
                       truth, note, positions, ig_baseline=baseline, ig_note=baseline_note(pipeline.config, chosen),
                       target=target, decoder_only=lm, notes=notes)


def used_baseline(pipeline: Pipeline, baseline: str) -> str:
    """The baseline integrated gradients starts from: ``baseline``, or for "default" the model's own (the first of
    zero, <pad>, <unk> at which the model is smooth by its structure: ``gradients.default_baseline``)."""
    return default_baseline(pipeline.config) if baseline == "default" else baseline


def _randomization(pipeline: Pipeline, analysis: Analysis, methods: tuple[str, ...], baseline: str,
                   progress: Progress) -> pd.DataFrame:
    src, tgt = explained_ids(analysis, pipeline.config.pad_id)
    return randomization_check(pipeline.model, src.to(pipeline.device), tgt.to(pipeline.device), methods,
                               n_steps=RANDOMIZATION_IG_STEPS, baseline=baseline, progress=progress)


def randomization_methods(pipeline: Pipeline) -> tuple[str, ...]:
    """The methods the randomization check runs: every one on a small model (integrated gradients with
    ``RANDOMIZATION_IG_STEPS`` points), the cheap ones on a large model (each step recomputes every map)."""
    return tuple(m for m in METHODS if not (is_large(pipeline) and costly(m)))


def randomization(model_key: str, device: str, pipeline: Pipeline, analysis: Analysis, baseline: str = "default"
                  ) -> pd.DataFrame:
    """``transformer.explain.randomization_check`` (Adebayo et al. 2018) of ``randomization_methods`` on the
    analysed input, under a progress bar, kept for every browser (``shared_work``): method, layers_randomized,
    randomized, rank_correlation, random_like."""
    methods = randomization_methods(pipeline)
    baseline = used_baseline(pipeline, baseline)
    return shared("randomization", (model_key, device, analysis.text, methods, baseline),
                  lambda progress: _randomization(pipeline, analysis, methods, baseline, progress),
                  label="Randomizing the model layer by layer:", max_entries=64)
