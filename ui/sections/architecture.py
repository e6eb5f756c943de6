"""Figure 1 of the paper, drawn as SVG with this model's real sizes: the encoder on the left, the decoder
on the right, inputs at the bottom as the paper draws them. A decoder-only language model (GPT-2, Llama, Mistral,
Qwen, Gemma) is one stack (``decoder_only_stack``): no encoder, no cross-attention, its attention box saying how
many key/value heads the query heads share (GQA), how positions enter (RoPE on q and k, or GPT-2's learned table),
its norms and windows.

A static diagram, so plain SVG rather than a Plotly figure: it needs no JavaScript, so the Model page,
which every new session opens on, shows it as soon as the page's text is out, while the browser is still
fetching Plotly (4.7 MB) and the server still importing torch; and its text is real text, sharp on a
projector and in the downloaded file. Built from the config alone (no torch, no weights), so the page
draws it before the model is loaded (``first_config``, ``show``).
"""

from __future__ import annotations

import html
from typing import Any

import streamlit as st

from transformer.checkpoints.file_caps import read_config_json
from transformer.network.config import TransformerConfig
from ui.charts import formulas
from ui.figures.text_size import text_width
from ui.state.settings import models_dir

FONT_PX = 14  # no diagram text under 14 px: it must read from the back of a room
PRESENTATION_FONT_PX = 16
BOX_WIDTH = 200
BOX_PAD = 8  # text to box edge
COLUMN_X = (150, 390)  # centres of the encoder and decoder columns
WIDTH = 540  # drawn at this size (the Model page's column is about 556 px): text at its true size
ROW_GAP = 22  # between boxes, where the arrows are
TOP = 40  # the title's room
ATTENTION, FEED_FORWARD, PLAIN = "#fdd0a2", "#c6dbef", "#f7f7f7"  # light fills, near-black text: contrast > 12:1
FRAME = "#888"
NBSP = "\u00a0"  # keeps a number with its unit on one line
TITLE = "Architecture (figure 1 of the paper) with this model's sizes"


def wrap(text: str, font_px: float, width: float = BOX_WIDTH - 2 * BOX_PAD) -> list[str]:
    """``text`` broken at spaces into lines no wider than ``width`` px (a word longer than that stays whole)."""
    lines: list[str] = []
    for word in text.split(" "):
        if lines and text_width(html.escape(lines[-1] + " " + word), font_px) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


POSITIONS = {"interleaved": "PE", "marian": "PE", "fairseq": "PE (fairseq)", "learned": "learned positions",
             "rotary": "rotary positions (in attention)"}
NORMS = {"layer": "LayerNorm", "rms": "RMSNorm", "rms_float32": "RMSNorm", "rms_unit_offset": "RMSNorm (1 + w)"}
DECODER_ONLY_TITLE = "Decoder-only Transformer with this model's sizes"
DECODER_ONLY_NOTE = "One stack: no encoder, no cross-attention"


def stacks(config: TransformerConfig) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The encoder's and the decoder's boxes, bottom to top: (text, fill). The texts follow the config's switches:
    its norm (LayerNorm or T5's RMSNorm), the positions (a sinusoid, learned tables, or T5's relative bias, which
    is added to the self-attention scores instead of the embeddings), the embedding norm, the gated feed-forward,
    the heads' own width."""
    c = config
    d = c.d_model
    norm = NORMS[c.norm]
    add_norm = f"Add & {norm}" if not c.norm_first else f"{norm} before, Add after"
    scale = f" * sqrt({d})" if c.scale_embedding else ""
    # a Marian or T5 decoder starts with the pad id, a BART / mBART / NLLB one with </s>
    start = "<pad>" if c.bos_id == c.pad_id else "</s>" if c.bos_id == c.eos_id else "<s>"
    relative = c.positional == "relative"
    positions = "" if relative else f"{NBSP}+{NBSP}{POSITIONS[c.positional]}"
    embed_norm = f", then {norm}" if c.embedding_norm else ""
    bias = f" +{NBSP}relative position bias" if relative else ""
    width = f" (h{NBSP}x{NBSP}d_k{NBSP}={NBSP}{c.d_inner})" if c.d_inner != d else ""
    inner = f"2{NBSP}x{NBSP}{c.d_ff}, gated" if c.gated_ff else str(c.d_ff)
    feed_forward = (f"Feed-forward {d} -> {inner} -> {d} ({c.activation}"
                    + (", no biases)" if not c.bias else ")"), FEED_FORWARD)
    encoder = [
        ("source ids (S)", PLAIN),
        (f"Embedding {c.src_vocab_size}x{d}{scale}{positions}{embed_norm}", PLAIN),
        (f"Self-attention: {c.n_heads}{NBSP}heads, d_k{NBSP}{c.d_k}{width}{bias}", ATTENTION),
        (add_norm, PLAIN),
        feed_forward,
        (add_norm, PLAIN),
        (f"{norm + ' -> ' if c.final_norm else ''}memory (S{NBSP}x{NBSP}{d})", PLAIN),
    ]
    decoder = [
        (f"decoder input ids: {start} y1 y2 ... (T)", PLAIN),
        (f"Embedding {c.tgt_vocab_size}x{d}{scale}{positions}{embed_norm}", PLAIN),
        (f"Masked self-attention: {c.n_heads}{NBSP}heads{bias}", ATTENTION),
        (add_norm, PLAIN),
        (f"Cross-attention: {c.n_heads} heads", ATTENTION),
        (add_norm, PLAIN),
        feed_forward,
        (add_norm, PLAIN),
        (norm if c.final_norm else f"(no final {norm})", PLAIN),
        (f"Linear {d} -> {c.tgt_vocab_size} (logits)", PLAIN),
        ("softmax -> next-token probabilities", PLAIN),
    ]
    return encoder, decoder


def key_value_text(config: TransformerConfig) -> str:
    """How the query heads share key/value heads: "4 heads" (the paper's one each), "8 query heads share 2
    key/value heads (GQA, 4 per group)", or one key/value head for all (MQA)."""
    h, kv = config.n_heads, config.kv_heads
    if kv == h:
        return f"{h}{NBSP}heads"
    kind = "MQA" if kv == 1 else f"GQA, {h // kv} per group"
    return f"{h}{NBSP}query heads share {kv}{NBSP}key/value {'head' if kv == 1 else 'heads'} ({kind})"


def decoder_only_stack(config: TransformerConfig) -> list[tuple[str, str]]:
    """A decoder-only model's one stack, bottom to top: (text, fill). Positions are GPT-2's learned table added to
    the embeddings or RoPE inside attention (its base, and Gemma-3's second base for the window layers); the
    attention box says GQA, q/k norms, windows and soft-caps; the norm boxes pre-norm or Gemma's sandwich."""
    c = config
    d, norm = c.d_model, NORMS[c.norm]
    scale = f" * sqrt({d})" if c.scale_embedding else ""
    positions = f"{NBSP}+{NBSP}learned positions" if c.positional == "learned" else ""
    if c.positional == "rotary":
        local = c.rope_local_theta
        bases = f"θ{NBSP}{formulas.number(c.rope_theta)}" + (
            f", {formulas.number(local)} on window layers" if local is not None else "")
        scaled = f", {c.rope_scaling} scaling x{c.rope_factor:g}" if c.rope_scaling != "default" else ""
        rope = f"; RoPE turns q and k by position ({bases}{scaled})"
    else:
        rope = ""
    extras = [f"q/k {norm}" if c.qk_norm else "", formulas.window_text(c),
              f"scores soft-capped at {c.attn_softcap:g}" if c.attn_softcap else ""]
    attention = (f"Masked self-attention: {key_value_text(c)}, d_k{NBSP}{c.d_k}{rope}"
                 + "".join(f"; {e}" for e in extras if e))
    add_norm = (f"{norm} before and after, Add" if c.sandwich_norm else f"{norm} before, Add after"
                if c.norm_first else f"Add & {norm}")
    inner = f"2{NBSP}x{NBSP}{c.d_ff}, gated" if c.gated_ff else str(c.d_ff)
    feed_forward = f"Feed-forward {d} -> {inner} -> {d} ({c.activation}" + (", no biases)" if not c.bias else ")")
    head = f"Linear {d} -> {c.tgt_vocab_size} (logits" + (", the embedding's matrix" if c.generator_tied else "") \
        + (f", soft-capped at {c.logit_softcap:g})" if c.logit_softcap else ")")
    return [
        ("token ids: the prompt, then the continuation (L)", PLAIN),
        (f"Embedding {c.tgt_vocab_size}x{d}{scale}{positions}", PLAIN),
        (attention, ATTENTION),
        (add_norm, PLAIN),
        (feed_forward, FEED_FORWARD),
        (add_norm, PLAIN),
        (norm if c.final_norm else f"(no final {norm})", PLAIN),
        (head, PLAIN),
        ("softmax -> next-token probabilities", PLAIN),
    ]


# Rows (0 = bottom) that the "N x" frame holds: the repeated layer of each stack.
ENCODER_LAYER_ROWS, DECODER_LAYER_ROWS = (2, 5), (2, 7)
CROSS_ATTENTION_ROW, MEMORY_ROW = 4, 6


def architecture_svg(config: TransformerConfig, *, font_px: float = FONT_PX) -> str:
    """The diagram as an SVG document (a string), ``font_px`` for all its text."""
    if config.decoder_only:
        return decoder_only_svg(config, font_px=font_px)
    encoder, decoder = stacks(config)
    line_px = font_px * 1.3
    # Every row is as tall as its tallest box, so both columns stay level; rows are counted from the bottom.
    n_rows = max(len(encoder), len(decoder))
    heights = []
    for row in range(n_rows):
        texts = [column[row][0] for column in (encoder, decoder) if row < len(column)]
        heights.append(max(len(wrap(t, font_px)) for t in texts) * line_px + 2 * BOX_PAD)
    height = TOP + sum(heights) + ROW_GAP * (n_rows + 1)
    tops = []  # y of each row's top edge, row 0 lowest
    y = height - ROW_GAP
    for h in heights:
        y -= h
        tops.append(y)
        y -= ROW_GAP

    parts = _opening(height, font_px, 'The Transformer of figure 1 of "Attention Is All You Need", with this '
                     "model's sizes", TITLE)
    for (first, last), column, x, n, side in ((ENCODER_LAYER_ROWS, encoder, COLUMN_X[0], config.n_encoder_layers, -1),
                                              (DECODER_LAYER_ROWS, decoder, COLUMN_X[1], config.n_decoder_layers, 1)):
        frame_top, frame_bottom = tops[last] - ROW_GAP / 2, tops[first] + heights[first] + ROW_GAP / 2
        left = x - BOX_WIDTH / 2 - 10
        parts.append(f'<rect x="{left}" y="{frame_top:.1f}" width="{BOX_WIDTH + 20}" '
                     f'height="{frame_bottom - frame_top:.1f}" fill="none" stroke="{FRAME}" stroke-dasharray="4 3"/>')
        label_x = left - 4 if side < 0 else left + BOX_WIDTH + 24
        parts.append(f'<text x="{label_x}" y="{(frame_top + frame_bottom) / 2:.1f}" dominant-baseline="middle" '
                     f'text-anchor="{"end" if side < 0 else "start"}" fill="#111">{n} x</text>')
        for row, (text, fill) in enumerate(column):
            parts.append(_box(x, tops[row], heights[row], text, fill, font_px, line_px))
            if row:  # the arrow from the box below
                parts.append(_arrow(x, tops[row - 1], x, tops[row] + heights[row]))
    # memory -> the keys and values of every decoder layer's cross-attention
    parts.append(_arrow(COLUMN_X[0] + BOX_WIDTH / 2, tops[MEMORY_ROW] + heights[MEMORY_ROW] / 2,
                        COLUMN_X[1] - BOX_WIDTH / 2, tops[CROSS_ATTENTION_ROW] + heights[CROSS_ATTENTION_ROW] / 2))
    parts.append("</svg>")
    return "\n".join(parts)


def decoder_only_svg(config: TransformerConfig, *, font_px: float = FONT_PX) -> str:
    """A decoder-only model's diagram: its one stack in the middle, the repeated layer framed ("N x")."""
    column = decoder_only_stack(config)
    line_px = font_px * 1.3
    heights = [len(wrap(text, font_px, SINGLE_BOX_WIDTH - 2 * BOX_PAD)) * line_px + 2 * BOX_PAD for text, _ in column]
    top = TOP + font_px * 1.5  # room for the note under the title
    height = top + sum(heights) + ROW_GAP * (len(column) + 1)
    tops, y = [], height - ROW_GAP
    for h in heights:  # row 0 lowest
        y -= h
        tops.append(y)
        y -= ROW_GAP
    x = WIDTH / 2
    parts = _opening(height, font_px, f"A decoder-only Transformer with this model's sizes: "
                     f"{DECODER_ONLY_NOTE.lower()}", DECODER_ONLY_TITLE)
    parts.append(f'<text x="{WIDTH / 2}" y="{font_px * 3.1:.0f}" text-anchor="middle" fill="#111">'
                 f"{DECODER_ONLY_NOTE}</text>")
    first, last = DECODER_ONLY_LAYER_ROWS
    frame_top, frame_bottom = tops[last] - ROW_GAP / 2, tops[first] + heights[first] + ROW_GAP / 2
    left = x - SINGLE_BOX_WIDTH / 2 - 10
    parts.append(f'<rect x="{left}" y="{frame_top:.1f}" width="{SINGLE_BOX_WIDTH + 20}" '
                 f'height="{frame_bottom - frame_top:.1f}" fill="none" stroke="{FRAME}" stroke-dasharray="4 3"/>')
    parts.append(f'<text x="{left + SINGLE_BOX_WIDTH + 24}" y="{(frame_top + frame_bottom) / 2:.1f}" '
                 f'dominant-baseline="middle" text-anchor="start" fill="#111">{config.n_decoder_layers} x</text>')
    for row, (text, fill) in enumerate(column):
        parts.append(_box(x, tops[row], heights[row], text, fill, font_px, line_px, SINGLE_BOX_WIDTH))
        if row:
            parts.append(_arrow(x, tops[row - 1], x, tops[row] + heights[row]))
    parts.append("</svg>")
    return "\n".join(parts)


DECODER_ONLY_LAYER_ROWS = (2, 5)  # attention, its norm, feed-forward, its norm
SINGLE_BOX_WIDTH = 320  # one column has the room of two: wider boxes, fewer lines


def _opening(height: float, font_px: float, description: str, title: str) -> list[str]:
    """The SVG's start: its element, accessible title, arrow marker and the visible title."""
    return [f'<svg xmlns="http://www.w3.org/2000/svg" class="architecture-diagram" viewBox="0 0 {WIDTH} {height:.0f}" '
            f'width="{WIDTH}" style="max-width: 100%; height: auto" role="img" '
            f'font-family="Source Sans, Source Sans Pro, sans-serif" font-size="{font_px}">',
            f"<title>{html.escape(description)}</title>",
            '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
            'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#555"/></marker></defs>',
            f'<text x="{WIDTH / 2}" y="{font_px * 1.5:.0f}" text-anchor="middle" font-weight="600" '
            f'font-size="{font_px + 2}" fill="#111">{title}</text>']


def _box(x: float, top: float, height: float, text: str, fill: str, font_px: float, line_px: float,
         width: float = BOX_WIDTH) -> str:
    lines = wrap(text, font_px, width - 2 * BOX_PAD)
    first = top + height / 2 - (len(lines) - 1) * line_px / 2
    spans = "".join(f'<tspan x="{x}" y="{first + i * line_px:.1f}">{html.escape(line)}</tspan>'
                    for i, line in enumerate(lines))
    return (f'<rect x="{x - width / 2}" y="{top:.1f}" width="{width}" height="{height:.1f}" rx="4" '
            f'fill="{fill}" stroke="#333"/>'
            f'<text text-anchor="middle" dominant-baseline="middle" fill="#111">{spans}</text>')


def _arrow(x0: float, y0: float, x1: float, y1: float) -> str:
    return (f'<line x1="{x0}" y1="{y0:.1f}" x2="{x1}" y2="{y1:.1f}" stroke="#555" stroke-width="1.2" '
            'marker-end="url(#arrow)"/>')


def first_config() -> TransformerConfig | None:
    """The config of the model a new session opens on (the link's, else the first shipped folder, as the
    sidebar chooses), read from its config.json without torch; None when it cannot be told cheaply: a config.json
    over ``MAX_CONFIG_BYTES`` is not read (``read_capped_text``, as the hub readers read it), so that a huge one in
    the models folder cannot hold up the page's first run."""
    try:
        folders = sorted(p for p in models_dir().iterdir() if (p / "config.json").is_file())
        name = st.query_params.get("model")
        chosen = next((p for p in folders if p.name == name), None) if name else (folders[0] if folders else None)
        if chosen is None:
            return None
        document = read_config_json(chosen / "config.json")
        if "model_type" in document:  # a Hugging Face folder of any family: its reader imports no torch
            from transformer.hub.families import config_of

            return config_of(document)
        return TransformerConfig.from_dict(document["model"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


PAPER_INTRO = (
    "An encoder reads the source sentence; a decoder writes the translation one token at a time, "
    "looking at its own earlier tokens (masked self-attention) and at the encoder's output "
    "(cross-attention). Both stacks repeat the same layer N times; every sub-layer is wrapped in a "
    "residual connection and a normalisation (the paper's, below; this model's, under its sizes):")
PAPER_LATEX = (r"\mathrm{LayerNorm}(x + \mathrm{Sublayer}(x)), \qquad "
               r"\mathrm{FFN}(x) = \max(0,\, xW_1 + b_1)\,W_2 + b_2")
DECODER_ONLY_INTRO = (
    "A decoder-only language model is the paper's decoder without its cross-attention: there is no encoder and no "
    "source sentence. One stack reads the prompt and writes the continuation one token at a time; every position "
    "attends only to itself and the positions before it (masked self-attention), and the last position's output "
    "gives the probabilities of the next token. The stack repeats the same layer N times; every sub-layer is "
    "wrapped in a residual connection, with the norm before it (pre-norm; the paper put it after the sum):")
DECODER_ONLY_LATEX = (r"x + \mathrm{Sublayer}(\mathrm{Norm}(x)), \qquad "
                      r"p(x_{t+1} \mid x_1, \dots, x_t) = \mathrm{softmax}(\mathrm{Norm}(h_t)\, W_{out})")


def show_intro(container: Any, config: TransformerConfig | None) -> None:
    """The page's opening text and equation, in ``container`` (a placeholder): the paper's encoder-decoder, or a
    decoder-only model's one stack (``config.decoder_only``); the paper's while no config is known yet."""
    decoder_only = config is not None and config.decoder_only
    with container.container():
        st.markdown(DECODER_ONLY_INTRO if decoder_only else PAPER_INTRO)
        st.latex(DECODER_ONLY_LATEX if decoder_only else PAPER_LATEX)


def show(container: Any, config: TransformerConfig, *, presenting: bool = False) -> str:
    """Draw the diagram into ``container`` (a placeholder); returns the SVG, for its download button."""
    svg = architecture_svg(config, font_px=PRESENTATION_FONT_PX if presenting else FONT_PX)
    container.markdown(svg, unsafe_allow_html=True)
    return svg
