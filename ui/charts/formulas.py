"""The attention formula as the loaded model computes it, written in one place for every page that shows it.

The paper (Vaswani et al. 2017, eq. 1) scores a query against a key as Q K^T / sqrt(d_k). A model may leave out
the 1/sqrt(d_k) (``TransformerConfig.scale_attention`` false: T5, whose initialisation absorbs it) and may add a
learned bias per head for the distance between query and key (``positional == "relative"``: T5's self-attention,
Raffel et al. 2020 section 2.1; cross-attention adds none). ``score_switches`` reads both switches from the
config; ``score_formula`` writes the score from them, in plain text or LaTeX, for the whole matrix or one key, so
the Attention page's equation, its scores heatmap, the Masks page, the Model page's table and the step-by-step
panel cannot disagree.

A decoder-only language model adds switches of its own (``config_score`` reads them): rotary positions turn each
query and key by its position before the product (RoPE: Su et al. 2021, written with a tilde, q̃ = R_i q), Gemma
divides by sqrt(query_pre_attn_scalar) instead of sqrt(d_k), Gemma-2 soft-caps the scores (c tanh(s / c)), and
grouped-query attention gives head i the keys and values of its group g(i) (``attention_latex``).
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
    $...$ in markdown ("+ B" for the bias matrix, "+ b_h(j - i)" for one key's). A decoder-only model's score
    (rotary positions, Gemma's scalar and soft-cap) is ``lm_score``."""
    if latex:
        dot = r"q \cdot k_j" if per_key else "QK^{T}"
        scaled = (rf"{dot} / \sqrt{{d_k}}" if per_key else rf"\frac{{{dot}}}{{\sqrt{{d_k}}}}") if scale else dot
        return scaled + ((r" + b_{h}(j - i)" if per_key else " + B") if bias else "") + (" + M" if mask else "")
    dot = "q·k" if per_key else "QKᵀ"
    scaled = f"{dot} / √d_k" if scale else dot
    return scaled + (" + bias" if bias else "") + (" + M" if mask else "")


def config_score(config: TransformerConfig, kind: str | None = None, *, latex: bool = False,
                 mask: bool = False) -> str:
    """``score_formula`` of the loaded model's switches for attention of ``kind`` (a decoder-only model's:
    ``lm_score``)."""
    if config.decoder_only:
        return lm_score(config, latex=latex, mask=mask)
    scale, bias = score_switches(config, kind)
    return score_formula(scale, bias, latex=latex, mask=mask)


def lm_score(config: TransformerConfig, *, latex: bool = False, per_key: bool = False, mask: bool = False) -> str:
    """A decoder-only model's score as network/attention.py computes it: the queries and keys turned by their
    positions first (rotary positions: RoPE(q_i, i) . RoPE(k_j, j), Su et al. 2021), scaled by 1/sqrt(d_k) or by
    query_pre_attn_scalar^-1/2 (Gemma), soft-capped as cap * tanh(score / cap) (Gemma-2); "+ M" with the mask."""
    rotary = config.positional == "rotary"
    if latex:
        q, k = (r"q_i", r"k_j") if per_key else ("Q", "K")
        if rotary:  # written short: a formula must fit a column (the note says what the tilde is)
            q, k = (r"\tilde{q}_i", r"\tilde{k}_j") if per_key else (r"\tilde{Q}", r"\tilde{K}")
        dot = rf"{q} \cdot {k}" if per_key else rf"{q}\,{k}^{{T}}"
        root = (rf"\sqrt{{{config.query_pre_attn_scalar:g}}}" if config.query_pre_attn_scalar is not None
                else r"\sqrt{d_k}")
        score = rf"\frac{{{dot}}}{{{root}}}" if config.scale_attention else dot
        if config.attn_softcap is not None:
            cap = f"{config.attn_softcap:g}"
            score = rf"{cap}\,\tanh\!\left({score} / {cap}\right)"
        return score + (" + M" if mask else "")
    q, k = ("q_i", "k_j") if per_key else ("Q", "K")
    if rotary:
        q, k = (f"RoPE({q}, i)", f"RoPE({k}, j)") if per_key else (f"RoPE({q})", f"RoPE({k})")
    dot = f"{q}·{k}" if per_key else f"{q}{k}ᵀ"
    root = f"√{config.query_pre_attn_scalar:g}" if config.query_pre_attn_scalar is not None else "√d_k"
    score = f"{dot} / {root}" if config.scale_attention else dot
    if config.attn_softcap is not None:
        score = f"{config.attn_softcap:g}·tanh({score} / {config.attn_softcap:g})"
    return score + (" + M" if mask else "")


def lm_notes(config: TransformerConfig) -> list[str]:
    """Where a decoder-only model's attention departs from the paper's, one markdown phrase each."""
    c = config
    notes = []
    if c.positional == "rotary":
        notes.append(r"$\tilde{Q}, \tilde{K}$ are the queries and keys turned by their positions before the product "
                     "(RoPE, rotary positions: a score depends on the offset j − i alone), and no position is added "
                     "to the embeddings")
    if c.kv_heads != c.n_heads:
        notes.append(f"the {c.n_heads} query heads share {c.kv_heads} key/value "
                     f"head{'s' if c.kv_heads > 1 else ''} ({c.n_heads // c.kv_heads} query heads each: "
                     f"{'multi-query' if c.kv_heads == 1 else 'grouped-query'} attention: head $i$ reads group "
                     "$g(i)$'s keys and values)")
    if c.query_pre_attn_scalar is not None:
        notes.append(f"the scores are divided by $\\sqrt{{{c.query_pre_attn_scalar:g}}}$ (query_pre_attn_scalar), "
                     f"not $\\sqrt{{d_k}} = \\sqrt{{{c.d_k}}}$")
    if c.attn_softcap is not None:
        notes.append(f"the scores are soft-capped to ±{c.attn_softcap:g} (tanh) before the mask")
    if c.sliding_window is not None:
        which = ("every layer" if c.layer_types is None else
                 f"layers {', '.join(str(i) for i in range(c.n_decoder_layers) if c.layer_type(i) == 'sliding')}")
        notes.append(f"on {which} a query sees only its last {c.sliding_window} tokens (a sliding window)")
    return notes


def attention_latex(config: TransformerConfig, *, mask: bool = False) -> str:
    """The model's attention equation in LaTeX; with ``mask``, only the softmax of its score plus the mask M."""
    softmax = rf"\mathrm{{softmax}}\!\left({config_score(config, latex=True, mask=mask)}\right)"
    if mask:
        return softmax
    if config.kv_heads != config.n_heads:  # grouped-query attention: head i reads its group's keys and values
        group = config.n_heads // config.kv_heads  # on two lines: one does not fit a page's column
        return (rf"\begin{{gathered}}\mathrm{{Attention}}(Q, K, V) = {softmax} V \\ "
                rf"\mathrm{{head}}_i = \mathrm{{Attention}}(QW_i^Q, KW_{{g(i)}}^K, VW_{{g(i)}}^V),\;"
                rf" g(i) = \lfloor i / {group} \rfloor\end{{gathered}}")
    return (rf"\mathrm{{Attention}}(Q, K, V) = {softmax} V, \qquad "
            r"\mathrm{head}_i = \mathrm{Attention}(QW_i^Q, KW_i^K, VW_i^V)")


def formula_note(config: TransformerConfig) -> str:
    """One markdown sentence on where the model departs from the paper's equation; "" where it does not."""
    if config.decoder_only:
        notes = lm_notes(config)
        return ("Unlike the paper, " + "; ".join(notes) + ".") if notes else ""
    scale, bias = score_switches(config)
    parts = [] if scale else [r"this model does not divide the scores by $\sqrt{d_k}$"]
    if bias:
        parts.append("$B$ is each head's learned bias for the distance from query to key, added in "
                     "self-attention (cross-attention adds none)")
    return ("Unlike the paper, " + "; ".join(parts) + ".") if parts else ""


def number(x: float) -> str:
    """A setting as people write it: 1,000,000 (a RoPE base), 8 (a factor), 0.5."""
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:g}"


def layer_ranges(layers: list[int]) -> str:
    """Layer indices as short text: [0, 1, 2, 4] -> "0-2, 4"."""
    runs: list[list[int]] = []
    for i in layers:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def sliding_layers(config: TransformerConfig) -> list[int]:
    """The decoder layers whose self-attention sees only the last ``sliding_window`` keys (none without a window)."""
    if config.sliding_window is None:
        return []
    return [i for i in range(config.n_decoder_layers) if config.layer_type(i) == "sliding"]


def window_text(config: TransformerConfig) -> str:
    """"" without a window, else "sliding window of W keys on every layer" / "on layers 0-4, 6"."""
    sliding = sliding_layers(config)
    if not sliding:
        return ""
    which = "every layer" if len(sliding) == config.n_decoder_layers else \
        f"layer{'s' if len(sliding) > 1 else ''} {layer_ranges(sliding)}"
    return f"sliding window of {config.sliding_window} keys on {which}"


def head_width_latex(config: TransformerConfig) -> str:
    """The width of one head in LaTeX: $d_k = d_{model}/h$ (the paper), or the model's own setting (T5's d_kv)."""
    if config.d_head is None:
        return rf"$d_k = d_{{model}}/h = {config.d_k}$"
    return rf"$d_k = {config.d_k}$ (its own setting; $h \cdot d_k = {config.d_inner}$)"
