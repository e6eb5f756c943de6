"""The attention formula as the loaded model computes it, written in one place for every page that shows it.

The paper (Vaswani et al. 2017, eq. 1) scores a query against a key as Q K^T / sqrt(d_k). A model may leave out
the 1/sqrt(d_k) (``TransformerConfig.scale_attention`` false: T5, whose initialisation absorbs it) and may add a
learned bias per head for the distance between query and key (``positional == "relative"``: T5's self-attention,
Raffel et al. 2020 section 2.1; cross-attention adds none). ``score_switches`` reads both switches from the
config; ``score_formula`` writes the score from them, in plain text or LaTeX, for the whole matrix or one key, so
the Attention page's equation, its scores heatmap, the Masks page, the Model page's table and the step-by-step
panel cannot disagree.
"""

from __future__ import annotations

from transformer.network.config import TransformerConfig

KINDS = ("encoder", "decoder", "cross")


def score_switches(config: TransformerConfig, kind: str | None = None) -> tuple[bool, bool]:
    """(whether the scores are divided by sqrt(d_k), whether a head adds a position bias) for attention of
    ``kind`` ("encoder", "decoder", "cross"; None: the model's self-attention, where a bias would be)."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS} or None, got {kind!r}")
    return config.scale_attention, config.positional == "relative" and kind != "cross"


def score_formula(scale: bool = True, bias: bool = False, *, latex: bool = False, per_key: bool = False,
                  mask: bool = False) -> str:
    """The score before the softmax: "QKᵀ / √d_k" (the paper), "QKᵀ" (unscaled), "+ bias" where a head adds a
    position bias, "+ M" with the mask. ``per_key``: one query against key j ("q·k"); ``latex``: for st.latex or
    $...$ in markdown ("+ B" for the bias matrix, "+ b_h(j - i)" for one key's)."""
    if latex:
        dot = r"q \cdot k_j" if per_key else r"QK^{T}"
        scaled = (rf"{dot} / \sqrt{{d_k}}" if per_key else rf"\frac{{{dot}}}{{\sqrt{{d_k}}}}") if scale else dot
        return scaled + ((r" + b_{h}(j - i)" if per_key else " + B") if bias else "") + (" + M" if mask else "")
    dot = "q·k" if per_key else "QKᵀ"
    return (f"{dot} / √d_k" if scale else dot) + (" + bias" if bias else "") + (" + M" if mask else "")


def config_score(config: TransformerConfig, kind: str | None = None, *, latex: bool = False,
                 mask: bool = False) -> str:
    """``score_formula`` of the loaded model's switches for attention of ``kind``."""
    scale, bias = score_switches(config, kind)
    return score_formula(scale, bias, latex=latex, mask=mask)


def attention_latex(config: TransformerConfig, *, mask: bool = False) -> str:
    """The model's attention equation in LaTeX; with ``mask``, only the softmax of its score plus the mask M."""
    softmax = rf"\mathrm{{softmax}}\!\left({config_score(config, latex=True, mask=mask)}\right)"
    if mask:
        return softmax
    return (rf"\mathrm{{Attention}}(Q, K, V) = {softmax} V, \qquad "
            r"\mathrm{head}_i = \mathrm{Attention}(QW_i^Q, KW_i^K, VW_i^V)")


def formula_note(config: TransformerConfig) -> str:
    """One markdown sentence on where the model departs from the paper's equation; "" where it does not."""
    scale, bias = score_switches(config)
    parts = [] if scale else [r"this model does not divide the scores by $\sqrt{d_k}$"]
    if bias:
        parts.append("$B$ is each head's learned bias for the distance from query to key, added in "
                     "self-attention (cross-attention adds none)")
    return ("Unlike the paper, " + "; ".join(parts) + ".") if parts else ""


def head_width_latex(config: TransformerConfig) -> str:
    """The width of one head in LaTeX: $d_k = d_{model}/h$ (the paper), or the model's own setting (T5's d_kv)."""
    if config.d_head is None:
        return rf"$d_k = d_{{model}}/h = {config.d_k}$"
    return rf"$d_k = {config.d_k}$ (its own setting; $h \cdot d_k = {config.d_inner}$)"
