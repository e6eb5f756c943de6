"""One call for every attribution method: ``attribute(model, src_ids, tgt_ids, method)``.

Uniform as Captum and inseq make it (Kokhlikyan et al. 2020, "Captum"; Sarti et al. 2023,
"Inseq"): the same arguments for every method, a result whose axes mean the same thing.

    src_ids (B, S), tgt_ids (B, T) = <s> y_1 ... y_n </s> padded with the model's pad id (teacher forcing)
    Attribution.source (B, T-1, S): row t explains log P(tgt_ids[:, t+1] | tgt_ids[:, :t+1], source),
                                    one column per source token; 0 at padding and padding rows
    Attribution.target (B, T-1, T-1) or None: the same rows over the decoder input tgt_ids[:, :-1]
    Attribution.delta  (B, T-1) or None: integrated gradients' convergence delta per row

Each method is described once, in ``REGISTRY``: its function (a thin wrapper here around the
module that implements it, which names its paper and formula), its cost class, its texts and
what it accepts. ``attribute`` dispatches from the entry; ``METHODS``, ``GRADIENT_METHODS``,
``CONTRASTIVE_METHODS``, the app's costly methods, the Explain page's method texts
(``methods_markdown``) and the table in docs/explain.md (``methods_table``) are all read off it.

A decoder-only language model takes the same call: ``src_ids`` is the prompt (B, P), padded on the left, and
``tgt_ids`` a placeholder (not fed) then the continuation (``pairs.lm_pair``); row t explains the continuation's
token t + 1 by the prompt and the continuation before it, the model run once on prompt + continuation
(pairs.py; each method's module says what its derivation becomes on one stack).

``contrast_ids`` (B, T-1), for the methods whose entry says ``contrast``, explains
log P(y) - log P(y') instead (inputs.py). An entry's ``options`` are the keywords ``attribute``
passes on to its function (integrated gradients': gradients.py). ``layer`` (None: every
layer rolled out; an int: that decoder layer's own mixing) for value zeroing and ALTI+, whose undefined
rows are NaN. ``progress`` (progress.py) is told between a costly method's steps (its batched backwards,
integrated gradients' chunks of points, occlusion's forwards, value zeroing's layers): a server bounds a method
by time with ``progress.with_deadline``, which raises ``OutOfTime`` at the first step past it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from torch import Tensor

from ..network.model import Transformer
from . import attention_maps
from .alti import alti_plus
from .gradients import gradient_attribution
from .inputs import check_inputs, mask_padding, mask_target, real_rows
from .occlusion import occlusion
from .progress import Progress, tell
from .relevancy import relevancy
from .value_zeroing import value_zeroing

Maps = tuple[Tensor, Tensor | None, Tensor | None]  # source (B, T-1, S), target (B, T-1, T-1) or None, delta (B, T-1)


class AttributionFunction(Protocol):
    """What every entry's ``function`` is: the inputs ``attribute`` checked -> (source, target, delta) unmasked.

    ``contrast_ids`` is None for a method that takes none; ``progress`` is told between its steps (a method of one
    forward has none); ``options`` are the entry's ``options`` as given."""

    def __call__(self, model: Transformer, src_ids: Tensor, tgt_ids: Tensor, contrast_ids: Tensor | None,
                 progress: Progress | None, **options: Any) -> Maps: ...


# What a method costs, in the passes it runs; the app defers every class but "forward" on a large model.
Cost = Literal["forward", "forward per token", "backward per token"]
COSTS: dict[str, str] = {
    "forward": "one forward",
    "forward per token": "forwards per input token, batched",
    "backward per token": "forward and backward passes per output token",
}


def _source_and_target(function: Any, stepped: bool = False) -> AttributionFunction:
    """A method of (model, src_ids, tgt_ids, **options) -> (source, target): no contrast, no delta; ``stepped``:
    it also takes ``progress``."""
    def run(model: Transformer, src_ids: Tensor, tgt_ids: Tensor, contrast_ids: Tensor | None,
            progress: Progress | None, **options: Any) -> Maps:
        source, target = function(model, src_ids, tgt_ids, **options, **({"progress": progress} if stepped else {}))
        return source, target, None
    return run


def _norm(model: Transformer, src_ids: Tensor, tgt_ids: Tensor, contrast_ids: Tensor | None,
          progress: Progress | None, **options: Any) -> Maps:
    return attention_maps.norm(model, src_ids, tgt_ids, **options), None, None


def _relevancy(model: Transformer, src_ids: Tensor, tgt_ids: Tensor, contrast_ids: Tensor | None,
               progress: Progress | None, **options: Any) -> Maps:
    source, target = relevancy(model, src_ids, tgt_ids, real_rows(tgt_ids, contrast_ids, model.config.pad_id),
                               progress, **options)
    return source, target, None


def _occlusion(model: Transformer, src_ids: Tensor, tgt_ids: Tensor, contrast_ids: Tensor | None,
               progress: Progress | None, **options: Any) -> Maps:
    return occlusion(model, src_ids, tgt_ids, contrast_ids, progress, **options), None, None


@dataclass(frozen=True)
class _EmbeddingGradients:
    """Saliency, input × gradient or integrated gradients at the source token embeddings (gradients.py)."""

    method: str

    def __call__(self, model: Transformer, src_ids: Tensor, tgt_ids: Tensor, contrast_ids: Tensor | None,
                 progress: Progress | None, **options: Any) -> Maps:
        rows = real_rows(tgt_ids, contrast_ids, model.config.pad_id)
        return gradient_attribution(model, src_ids, tgt_ids, rows, self.method, progress=progress, **options)


@dataclass(frozen=True)
class Method:
    """One attribution method, described once: ``attribute``, the app's pages and docs/explain.md read this entry.

    The texts are markdown, one line each (they fill a table cell): ``description`` says what the method computes
    and ``good_for`` what it is good for, both shown on the Explain page and in the docs table."""

    name: str  # what ``attribute`` takes
    label: str  # a short title for a chart
    summary: str  # a few words after the label in a list of methods (``title``)
    paper: str  # the paper it implements ("" for plain attention)
    cost: Cost  # the passes it runs (``COSTS``)
    function: AttributionFunction  # what ``attribute`` calls
    description: str  # what it computes
    good_for: str  # when to read it
    options: tuple[str, ...] = ()  # keyword options ``attribute`` passes on to ``function``
    contrast: bool = False  # accepts ``contrast_ids`` (log P(y) - log P(y'))
    target: bool = False  # also scores the target prefix (``Attribution.target``)
    # Facts the app and the other explanation code read here, never by the method's name:
    undefined: str = ""  # why a row can be NaN ("undefined" on the pages); "" where every row is a number
    removal: str = "unk"  # what a removed source token becomes in ERASER's measures (eraser.py): "unk", "pad",
    # "zero", or "baseline" (the method's own ``baseline`` option, integrated gradients')
    left_out_of_batches: str = ""  # why it is left out where many sentences are scored (word alignment)

    @property
    def layer_view(self) -> bool:
        """Whether one decoder layer's own map can be asked for (option ``layer``) beside the rolled-out one."""
        return "layer" in self.options

    @property
    def baseline(self) -> bool:
        """Whether it starts from a baseline source (option ``baseline``) and reports a convergence ``delta``."""
        return "baseline" in self.options

    @property
    def title(self) -> str:
        """The label and its summary, e.g. "occlusion (token → <unk>: drop in log-probability)"."""
        return f"{self.label} ({self.summary})"


REGISTRY: dict[str, Method] = {m.name: m for m in (
    Method(
        "attention", "attention", "the last layer's cross-attention, mean of heads", "", "forward",
        _source_and_target(attention_maps.attention),
        "mean_h A^{ts}_h, the head mean of the last decoder layer's cross-attention (target side: the last "
        "decoder self-attention): what every attention heatmap shows",
        "the cheapest look at where the last layer reads; a map, not a proof of cause", target=True),
    Method(
        "rollout", "attention rollout", "through the encoder and every decoder layer",
        "Abnar & Zuidema 2020, *Quantifying Attention Flow in Transformers*; the propagation rules of Chefer et al. "
        "2021", "forward", _source_and_target(attention_maps.rollout),
        "attention multiplied through the whole encoder-decoder: every encoder layer, then every decoder self- and "
        "cross-attention layer, each mixed half and half with its residual (0.5·I), since a decoder state mixes "
        "earlier outputs and a source position's encoder output mixes other tokens",
        "seeing through the mixing of every layer, and how much of a prediction comes from the source at all (each "
        "row of source + target sums to 1)", target=True),
    Method(
        "relevancy", "relevancy", "Chefer et al.: gradient-weighted attention",
        "Chefer, Gur & Wolf 2021, *Generic Attention-model Explainability for Interpreting Bi-Modal and "
        "Encoder-Decoder Transformers*", "backward per token", _relevancy,
        "relevancy maps built from Ā = E_h[(∇A ⊙ A)^+] of every attention layer: each layer's attention weighted by "
        "its gradient (positive part, head mean), propagated through every self- and cross-attention layer",
        "attention weighted by how much the explained score depends on it; specific to one output token, "
        "contrastive if asked", contrast=True, target=True),
    Method(
        "norm", "value-weighted attention", "‖αf(x)‖: what each source token sends",
        "Kobayashi et al. 2020, *Attention is Not Only a Weight: Analyzing Transformers with Vector Norms*",
        "forward", _norm,
        "‖Σ_h α_{h,tj} f_h(x_j)‖, f_h(x) = (x W^V_h + b^V_h) W^O_h, through the last decoder layer's "
        "cross-attention: the size of what each source token actually sends, not just its weight",
        "attention that counts what a token adds: a large weight on a small vector adds little"),
    Method(
        "saliency", "saliency", "gradient norm per source embedding",
        "Simonyan et al. 2014, *Deep Inside Convolutional Networks*", "backward per token",
        _EmbeddingGradients("saliency"),
        "‖∂f_t/∂e_j‖₂ over d_model at source token j's embedding e_j (computed with Captum; the positional "
        "encoding is not attributed)",
        "sensitivity: which tokens' embeddings the score reacts to (never negative, so no direction)",
        contrast=True, target=True),
    Method(
        "input_x_gradient", "input × gradient", "embedding times gradient per source token",
        "Shrikumar et al. 2016, *Not Just a Black Box*", "backward per token",
        _EmbeddingGradients("input_x_gradient"),
        "Σ_d e_{j,d} · ∂f_t/∂e_{j,d} at source token j's embedding (computed with Captum)",
        "a signed first-order contribution of each token, at the cost of one backward", contrast=True, target=True,
        removal="zero"),
    Method(
        "integrated_gradients", "integrated gradients", "gradients along a path from a baseline source",
        "Sundararajan et al. 2017, *Axiomatic Attribution for Deep Networks*", "backward per token",
        _EmbeddingGradients("integrated_gradients"),
        "`Σ_d (e − e')_{j,d} ∫₀¹ ∂f_t/∂e_{j,d}(e' + α(e − e')) dα` from a baseline source e' (the zero, `<pad>` or "
        "`<unk>` embedding at every position; by default the first of these at which the model is smooth: zero, "
        "or `<pad>` where no positions are added and a norm reads the embeddings first, as in T5 and the rotary "
        "language models (Llama, Mistral, Qwen, Gemma), whose first norm is singular at zero; a baseline on such a "
        "singularity is refused). Much of its weight lands on `</s>`, and "
        "that comes from the baseline: the path changes every source embedding, `</s>` included, and these "
        "models' output depends strongly on the end-of-sentence embedding (it tells them where the source ends), "
        "so completeness puts much of the change there; another baseline moves that weight",
        "signed contributions that add up to f(e) − f(e') (completeness), with `delta` saying how far they miss",
        options=("n_steps", "internal_batch_size", "integration", "baseline"), contrast=True, removal="baseline",
        left_out_of_batches="16 to 1024 forward and backward passes per sentence"),
    Method(
        "occlusion", "occlusion", "token → <unk>: drop in log-probability",
        "Zeiler & Fergus 2014; Li, Monroe & Jurafsky 2016, *Understanding Neural Networks through Representation "
        "Erasure*", "forward per token", _occlusion,
        "f_t(source) − f_t(source with token j = `<unk>`): each source token in turn replaced by `<unk>`, and how "
        "much the explained log-probability drops",
        "the direct effect of removing one token, without gradients; misses tokens that matter only together",
        contrast=True),
    Method(
        "value_zeroing", "value zeroing", "Mohebbi et al.: how far outputs move without a token's values",
        "Mohebbi, Zuidema, Chrupała & Alishahi 2023, *Quantifying Context Mixing in Transformers*",
        "forward per token", _source_and_target(value_zeroing, stepped=True),
        "per layer, C_l[i, j] = 1 − cos(x̃_i^{¬j}, x̃_i) with token j's value vectors zeroed, rows normalised, "
        "layers composed by rollout through the encoder and every decoder self- and cross-attention layer (option "
        "`layer`: one decoder layer's own mixing, without the roll-out)",
        "context mixing measured on each layer's output, residual and feed-forward included, rather than read off "
        "the attention weights", options=("layer",), target=True,
        undefined="zeroing any single token's values moved no output of a layer: value zeroing has no shares to "
                  "give there"),
    Method(
        "alti", "ALTI+", "Ferrando et al.: each token's share of every attention block's output",
        "Ferrando et al. 2022, *Towards Opening the Black Box of Neural Machine Translation: Source and Target "
        "Contributions to the Predictions*", "forward", _source_and_target(alti_plus),
        "each attention block's output split into one vector per input token (the LayerNorm as the linear map it is "
        "for a row), each token's share measured by how close (L1) its vector comes to the output, normalised and "
        "composed through the encoder, decoder self- and cross-attention; each prediction's shares of the source "
        "and of the target prefix add up to 1 (NaN where no token's vector comes closer to the output than zero; "
        "option `layer`: one decoder layer's own mixing)",
        "how much of each prediction comes from the source at all (`source_share`) and from which tokens; a low "
        "source share is the hallucination signal the paper reports", options=("layer",), target=True,
        undefined="no token's vector comes closer to an attention block's output than the zero vector does "
                  "(together less than 1% of the output's L1 norm): the update cancels the residual, and ALTI+'s L1 "
                  "closeness cannot split that block's output between the tokens"),
)}
METHODS: tuple[str, ...] = tuple(REGISTRY)
GRADIENT_METHODS = tuple(m.name for m in REGISTRY.values() if isinstance(m.function, _EmbeddingGradients))
CONTRASTIVE_METHODS = tuple(m.name for m in REGISTRY.values() if m.contrast)
LAYER_VIEW_METHODS = tuple(m.name for m in REGISTRY.values() if m.layer_view)  # a decoder layer's own map too
# Why a row is NaN, per method, in the words the Explain page shows beside "undefined".
UNDEFINED_REASONS: dict[str, str] = {m.name: m.undefined for m in REGISTRY.values() if m.undefined}


def own_options(method: str, options: dict[str, Any]) -> dict[str, Any]:
    """Those of ``options`` that ``method`` takes (its entry's ``options``): one set of options for many methods."""
    return {key: value for key, value in options.items() if key in REGISTRY[method].options}


def methods_table() -> str:
    """The registry as the markdown table of docs/explain.md (a test keeps the two equal)."""
    lines = ["| method | what it computes | paper | cost | good for |", "|---|---|---|---|---|"]
    lines += [f"| `{m.name}` | {m.description} | {m.paper or '—'} | {COSTS[m.cost]} | {m.good_for} |"
              for m in REGISTRY.values()]
    return "\n".join(lines)


def methods_markdown() -> str:
    """The registry as the Explain page's list of methods: one bullet per method, its paper, texts and cost."""
    def bullet(m: Method) -> str:
        paper = f" ({m.paper})" if m.paper else ""
        return (f"- **{m.label[:1].upper()}{m.label[1:]}**{paper}: {m.description}. Good for {m.good_for}. "
                f"Cost: {COSTS[m.cost]}.")
    return "\n".join(bullet(m) for m in REGISTRY.values())


@dataclass(frozen=True)
class Attribution:
    """What ``attribute`` returns; see the module docstring for the axes."""

    method: str
    source: Tensor  # (B, T-1, S)
    target: Tensor | None = None  # (B, T-1, T-1) over the decoder input, where the method scores it
    delta: Tensor | None = None  # (B, T-1): integrated gradients' convergence delta
    options: dict[str, Any] = field(default_factory=dict, hash=False)  # the options it ran with (baseline, layer)


def attribute(
    model: Transformer,
    src_ids: Tensor,
    tgt_ids: Tensor,
    method: str,
    *,
    contrast_ids: Tensor | None = None,
    progress: Progress | None = None,
    **options: Any,
) -> Attribution:
    """Explain each target token of a teacher-forced forward by the source tokens (and the prefix).

    Calls the method's ``REGISTRY`` entry's function with ``options`` as keywords, then sets padding to 0.
    ``progress`` (progress.py) is told before the method starts and between its steps; a ``with_deadline``
    progress stops it there with ``OutOfTime``.
    Never changes ``model``: no parameter, buffer, mode or hook outlives the call.
    Raises ValueError for an unknown method or option, an empty output (T < 2), shapes
    that do not match, ids outside the vocabulary, or a model in training mode.
    """
    if method not in REGISTRY:
        raise ValueError(f"unknown attribution method {method!r}; choose one of {', '.join(METHODS)}")
    entry = REGISTRY[method]
    unknown = set(options) - set(entry.options)
    if unknown:
        allowed = ", ".join(entry.options) or "none"
        raise ValueError(f"unknown option(s) for {method!r}: {', '.join(sorted(unknown))} (allowed: {allowed})")
    if contrast_ids is not None and not entry.contrast:
        raise ValueError(f"contrast_ids works with {', '.join(CONTRASTIVE_METHODS)}, not {method!r}")
    check_inputs(model, src_ids, tgt_ids, contrast_ids)

    tell(progress, 0.0, entry.label)
    source, target, delta = entry.function(model, src_ids, tgt_ids, contrast_ids, progress, **options)
    return Attribution(
        method=method,
        source=mask_padding(source.detach(), src_ids, tgt_ids, model.config.pad_id),
        target=None if target is None else mask_target(target.detach(), tgt_ids, model.config.pad_id,
                                                       model.config.decoder_only),
        delta=delta,
        options=dict(options),
    )
