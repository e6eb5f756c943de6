"""One call for every attribution method: ``attribute(model, src_ids, tgt_ids, method)``.

Uniform as Captum and inseq make it (Kokhlikyan et al. 2020, "Captum"; Sarti et al. 2023,
"Inseq"): the same arguments for every method, a result whose axes mean the same thing.

    src_ids (B, S), tgt_ids (B, T) = <s> y_1 ... y_n </s> padded with the model's pad id (teacher forcing)
    Attribution.source (B, T-1, S): row t explains log P(tgt_ids[:, t+1] | tgt_ids[:, :t+1], source),
                                    one column per source token; 0 at padding and padding rows
    Attribution.target (B, T-1, T-1) or None: the same rows over the decoder input tgt_ids[:, :-1]
    Attribution.delta  (B, T-1) or None: integrated gradients' convergence delta per row

Methods (each module's docstring names its paper and formula):
    attention, rollout, norm           attention_maps.py  (one traced forward)
    value_zeroing                      value_zeroing.py   (each token's values zeroed, layer by layer)
    alti                               alti.py            (ALTI+: each token's share of every attention block's output)
    relevancy                          relevancy.py       (gradients of the attention weights)
    saliency, input_x_gradient,
    integrated_gradients               gradients.py       (Captum, on the source token embeddings)
    occlusion                          occlusion.py       (each source token replaced by <unk>)

``contrast_ids`` (B, T-1), for the gradient methods, relevancy and occlusion, explains
log P(y) - log P(y') instead (inputs.py). Options: ``n_steps``, ``integration`` and
``internal_batch_size`` for integrated gradients (gradients.py); ``layer`` (None: every layer rolled out; an
int: that decoder layer's own mixing) for value zeroing and ALTI+. Rows those two cannot define are NaN.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import Tensor

from ..network.model import Transformer
from . import attention_maps
from .alti import alti_plus
from .gradients import gradient_attribution
from .inputs import check_inputs, mask_padding, mask_target, real_rows
from .occlusion import occlusion
from .relevancy import relevancy
from .value_zeroing import value_zeroing


@dataclass(frozen=True)
class Method:
    """One attribution method, described once: the pages, the docs and ``attribute`` read this registry."""

    name: str  # what ``attribute`` takes
    label: str  # a short title for a chart
    paper: str  # the paper it implements
    options: tuple[str, ...] = ()  # keyword options ``attribute`` passes on
    contrast: bool = False  # accepts ``contrast_ids`` (log P(y) - log P(y'))
    target: bool = False  # also scores the target prefix (``Attribution.target``)
    gradients: bool = False  # needs backward passes (costly at opus-mt size)


REGISTRY: dict[str, Method] = {m.name: m for m in (
    Method("attention", "attention", "the last decoder layer's cross-attention, mean over heads", target=True),
    Method("rollout", "attention rollout", "Abnar & Zuidema 2020; Chefer et al. 2021 for encoder-decoders",
           target=True),
    Method("relevancy", "relevancy", "Chefer et al. 2021, Generic Attention-model Explainability", contrast=True,
           target=True, gradients=True),
    Method("norm", "value-weighted attention", "Kobayashi et al. 2020, Attention is Not Only a Weight"),
    Method("saliency", "saliency", "Simonyan et al. 2014", contrast=True, target=True, gradients=True),
    Method("input_x_gradient", "input × gradient", "Shrikumar et al. 2016", contrast=True, target=True,
           gradients=True),
    Method("integrated_gradients", "integrated gradients", "Sundararajan et al. 2017",
           options=("n_steps", "internal_batch_size", "integration", "baseline"), contrast=True, gradients=True),
    Method("occlusion", "occlusion", "Zeiler & Fergus 2014; Li et al. 2016", contrast=True),
    Method("value_zeroing", "value zeroing", "Mohebbi et al. 2023, Quantifying Context Mixing in Transformers",
           options=("layer",), target=True),
    Method("alti", "ALTI+", "Ferrando et al. 2022, Source and Target Contributions to the Predictions",
           options=("layer",), target=True),
)}
METHODS: tuple[str, ...] = tuple(REGISTRY)
GRADIENT_METHODS = tuple(m.name for m in REGISTRY.values() if m.gradients and m.name != "relevancy")
CONTRASTIVE_METHODS = tuple(m.name for m in REGISTRY.values() if m.contrast)


@dataclass(frozen=True)
class Attribution:
    """What ``attribute`` returns; see the module docstring for the axes."""

    method: str
    source: Tensor  # (B, T-1, S)
    target: Tensor | None = None  # (B, T-1, T-1) over the decoder input, where the method scores it
    delta: Tensor | None = None  # (B, T-1): integrated gradients' convergence delta


def attribute(
    model: Transformer,
    src_ids: Tensor,
    tgt_ids: Tensor,
    method: str,
    *,
    contrast_ids: Tensor | None = None,
    **options: Any,
) -> Attribution:
    """Explain each target token of a teacher-forced forward by the source tokens (and the prefix).

    Never changes ``model``: no parameter, buffer, mode or hook outlives the call.
    Raises ValueError for an unknown method or option, an empty output (T < 2), shapes
    that do not match, ids outside the vocabulary, or a model in training mode.
    """
    if method not in METHODS:
        raise ValueError(f"unknown attribution method {method!r}; choose one of {', '.join(METHODS)}")
    unknown = set(options) - set(REGISTRY[method].options)
    if unknown:
        allowed = ", ".join(REGISTRY[method].options) or "none"
        raise ValueError(f"unknown option(s) for {method!r}: {', '.join(sorted(unknown))} (allowed: {allowed})")
    if contrast_ids is not None and method not in CONTRASTIVE_METHODS:
        raise ValueError(f"contrast_ids works with {', '.join(CONTRASTIVE_METHODS)}, not {method!r}")
    check_inputs(model, src_ids, tgt_ids, contrast_ids)

    target = delta = None
    if method == "attention":
        source, target = attention_maps.attention(model, src_ids, tgt_ids)
    elif method == "rollout":
        source, target = attention_maps.rollout(model, src_ids, tgt_ids)
    elif method == "norm":
        source = attention_maps.norm(model, src_ids, tgt_ids)
    elif method == "relevancy":
        source, target = relevancy(model, src_ids, tgt_ids, real_rows(tgt_ids, contrast_ids, model.config.pad_id))
    elif method == "occlusion":
        source = occlusion(model, src_ids, tgt_ids, contrast_ids)
    elif method == "value_zeroing":
        source, target = value_zeroing(model, src_ids, tgt_ids, **options)
    elif method == "alti":
        source, target = alti_plus(model, src_ids, tgt_ids, **options)
    else:
        rows = real_rows(tgt_ids, contrast_ids, model.config.pad_id)
        source, target, delta = gradient_attribution(model, src_ids, tgt_ids, rows, method, **options)
    return Attribution(
        method=method,
        source=mask_padding(source.detach(), src_ids, tgt_ids, model.config.pad_id),
        target=None if target is None else mask_target(target.detach(), tgt_ids, model.config.pad_id),
        delta=delta,
    )
