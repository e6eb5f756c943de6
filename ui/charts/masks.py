"""Charts for the masks page: which query may attend to which key, on a padded batch.

Convention of ``transformer.network.masks``: a boolean mask, **True = may attend**. A masked
score becomes -inf before the softmax, so its weight is exactly 0:

    softmax(s)_j = exp(s_j) / sum_k exp(s_k),   exp(-inf) = 0

- padding mask: keys that are real tokens (not <pad>); (B, 1, 1, S), the same for every query
- causal mask: query i sees keys 0..i, never the future; (1, 1, T, T)
- decoder mask: causal AND target padding; (B, 1, T, T)
- memory mask: cross-attention sees the source's real tokens; (B, 1, 1, S)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from torch import Tensor

from transformer.network import masks
from transformer.text.ids import PAD_PIECE

from . import MARGIN, MAX_HOVER_CELLS, labels, ticks, to_numpy

MASK_COLORS = [[0.0, "#d9d9d9"], [1.0, "#2b8cbe"]]  # False: grey, True: blue


def batch_masks(src_ids: Tensor, tgt_ids: Tensor, pad_id: int) -> dict[str, Tensor]:
    """Every mask the model builds for one batch, by name, in ``transformer.network.masks``' shapes."""
    t = tgt_ids.size(1)
    return {
        "source padding": masks.padding_mask(src_ids, pad_id),  # (B, 1, 1, S)
        # decoder_real: the first position is the decoder's start, real even when it is the pad id (Marian)
        "target padding": masks.decoder_real(tgt_ids, pad_id)[:, None, None, :],  # (B, 1, 1, T)
        "causal": masks.causal_mask(t, device=tgt_ids.device),  # (1, 1, T, T)
        "decoder (causal & padding)": masks.decoder_self_mask(tgt_ids, pad_id),  # (B, 1, T, T)
        "memory": masks.memory_mask(src_ids, pad_id),  # (B, 1, 1, S)
    }


def different_lengths(texts: Sequence[str], k: int, lengths: Sequence[int] | None = None) -> list[str]:
    """Up to ``k`` texts for a batch whose lengths differ as much as possible (the first text kept first):
    with equal lengths the padding mask would show nothing. ``lengths`` (default: the texts' own) may count
    more, e.g. source plus expected output (dates in ISO form all have 10 characters; their German
    outputs do not). Texts of one length are used when nothing else is."""
    if not texts:
        return []
    size = dict(zip(texts, lengths if lengths is not None else [len(t) for t in texts], strict=True))
    chosen = [texts[0]]
    by_length = {size[t]: t for t in sorted(texts[1:], key=size.get)}  # one text per length
    rest = [by_length[n] for n in sorted(by_length) if n != size[texts[0]]]
    while rest and len(chosen) < k:  # alternately the shortest and the longest left
        chosen.append(rest.pop(0 if len(chosen) % 2 else -1))
    for text in texts[1:]:
        if len(chosen) >= k:
            break
        if text not in chosen:
            chosen.append(text)
    return chosen


def has_padding(ids: Tensor, pad_id: int) -> bool:
    """Whether any sentence of a padded batch (B, L) is padded."""
    return bool((ids == pad_id).any())


def first_kind(src_ids: Tensor, pad_id: int) -> str:
    """The attention the page's "what a mask does" opens on: the encoder's, where the batch's sources have padding
    to mask; else the decoder's, whose causal mask always masks (dates-de: every input has 10 characters, so the
    source padding mask is empty and the encoder's view read "masked cells 0")."""
    return "encoder" if has_padding(src_ids, pad_id) else "decoder"


def mask_matrix(mask: Tensor, row: int, t_q: int, t_k: int) -> np.ndarray:
    """One sentence's mask broadcast to the (T_q, T_k) grid of its scores, as bools."""
    b = 0 if mask.size(0) == 1 else row
    return mask[b, 0].expand(t_q, t_k).to("cpu").numpy().astype(bool)


def pad_pieces(pieces: Sequence[str], length: int) -> list[str]:
    """A sentence's pieces padded with <pad> to the batch's length."""
    return [*pieces, *[PAD_PIECE] * (length - len(pieces))]


def batch_frame(batch_pieces: Sequence[Sequence[str]], ids: Tensor) -> pd.DataFrame:
    """The padded batch as a table: one row per sentence, one column per position, "piece (id)"."""
    ids_np = ids.to("cpu").numpy()
    length = ids_np.shape[1]
    rows = [[f"{p} ({i})" for p, i in zip(pad_pieces(pieces, length), ids_np[b], strict=True)]
            for b, pieces in enumerate(batch_pieces)]
    return pd.DataFrame(rows, index=[f"sentence {b}" for b in range(len(rows))], columns=list(range(length)))


def mask_heatmap(
    mask: Any, query_labels: Sequence[str], key_labels: Sequence[str], *, title: str
) -> go.Figure:
    """A boolean (T_q, T_k) mask: blue = may attend (True), grey = masked (False).

    The colour says it; "True"/"False" in every cell did not fit cells of a 12-token sentence. Hover names
    the cell's tokens up to MAX_HOVER_CELLS cells, as ``heatmap_trace`` does, and their positions beyond:
    a text per cell is what made serialising the Masks page's five panels slow at opus-mt's lengths (per-cell
    strings cost 0.1-0.3 s a figure on every rerun; the numbers alone, nothing).
    """
    m = np.asarray(to_numpy(mask) > 0.5)
    rows, cols = m.shape
    if (len(query_labels), len(key_labels)) != (rows, cols):
        raise ValueError(f"{rows}x{cols} mask for {len(query_labels)} query and {len(key_labels)} key labels")
    extra: dict[str, Any] = {}
    if rows * cols <= MAX_HOVER_CELLS:
        hover = np.empty((rows, cols, 2), dtype=object)
        hover[:, :, 0] = np.asarray(labels(query_labels), dtype=object)[:, None]
        hover[:, :, 1] = np.asarray(labels(key_labels), dtype=object)[None, :]
        extra = dict(text=np.where(m, "True", "False"), customdata=hover, hovertemplate=(
            "query %{customdata[0]}<br>key %{customdata[1]}<br>may attend: %{text}<extra></extra>"))
    else:
        extra = dict(hovertemplate="query position %{y}<br>key position %{x}<br>may attend (1 = True): %{z}"
                                   "<extra></extra>")
    fig = go.Figure(go.Heatmap(
        z=m.astype(int), x=list(range(cols)), y=list(range(rows)), colorscale=MASK_COLORS, zmin=0, zmax=1,
        showscale=False, xgap=1 if cols <= 40 else 0, ygap=1 if rows <= 40 else 0, **extra,
    ))
    fig.update_xaxes(**ticks(key_labels), title_text="key")
    fig.update_yaxes(**ticks(query_labels), title_text="query", autorange="reversed")
    fig.update_layout(title=title, margin=MARGIN, height=min(700, 220 + 28 * rows))
    return fig


def padding_overview(ids: Tensor, pad_id: int, batch_pieces: Sequence[Sequence[str]], *, title: str,
                     decoder: bool = False) -> go.Figure:
    """The whole batch's padding mask (B, S): which positions of each sentence are real tokens. ``decoder``:
    ``ids`` are decoder inputs, whose first position is real even when it holds the pad id (Marian's start)."""
    real = (masks.decoder_real(ids, pad_id) if decoder else ids != pad_id).to("cpu").numpy()
    length = real.shape[1]
    rows = [f"sentence {b}" for b in range(real.shape[0])]
    fig = mask_heatmap(real, rows, [str(i) for i in range(length)], title=title)
    fig.data[0].text = np.asarray([labels(pad_pieces(p, length)) for p in batch_pieces], dtype=object)
    fig.data[0].hovertemplate = "%{customdata[0]}, position %{customdata[1]}: %{text}<extra></extra>"
    fig.update_xaxes(title_text="position")
    fig.layout.yaxis.title = None  # no room kept for a title
    return fig


def masks_frame(panels: Sequence[tuple[str, Any, Sequence[str], Sequence[str]]]) -> pd.DataFrame:
    """The numbers behind the mask heatmaps: (name, mask (T_q, T_k), query labels, key labels) ->
    one row per cell with whether the query may attend to the key."""
    frames = []
    for name, mask, query_labels, key_labels in panels:
        m = np.asarray(to_numpy(mask) > 0.5)
        query, key = np.meshgrid(np.arange(m.shape[0]), np.arange(m.shape[1]), indexing="ij")
        frames.append(pd.DataFrame({
            "mask": name, "query": query.ravel(),
            "query token": np.asarray(list(query_labels), dtype=object)[query.ravel()],
            "key": key.ravel(), "key token": np.asarray(list(key_labels), dtype=object)[key.ravel()],
            "may attend": m.ravel(),
        }))
    return pd.concat(frames, ignore_index=True)


def masked_weight_check(weights: Any, mask: Any) -> dict[str, float]:
    """The facts the page states: the largest weight on a masked cell (exactly 0) and how far
    the rows with any allowed key are from summing to 1."""
    w, m = to_numpy(weights), np.asarray(to_numpy(mask) > 0.5)
    live_rows = m.any(axis=-1)
    return {
        "max weight on masked cells": float(w[~m].max()) if (~m).any() else 0.0,
        "masked cells": int((~m).sum()),
        "max |row sum - 1|": float(np.abs(w[live_rows].sum(axis=-1) - 1).max()) if live_rows.any() else 0.0,
    }


def start_and_padding(pipeline: Any) -> str:
    """The model's own decoder start, padding and forced first token, in words (a Markdown line): "The decoder
    starts with `</s>` (id 2), then the forced first token `deu_Latn` (id 256042); padding is `<pad>` (id 1)".
    ``pipeline``: a ``Pipeline`` (its ``target_prefix`` is what every output starts with)."""
    piece = pipeline.tgt_tokenizer.id_to_piece
    start, *forced = pipeline.target_prefix
    pad_id = pipeline.config.pad_id
    text = f"The decoder starts with `{piece(start)}` (id {start})"
    if forced:
        what = "the target language's code" if pipeline.tgt_lang else "the forced first token"
        text += f", then {what} `{piece(forced[0])}` (id {forced[0]}), forced as the first generated token"
    same = " (the decoder's start is the padding id, yet a real position: it is never masked)" if start == pad_id \
        else ""
    return f"{text}; padding is `{piece(pad_id)}` (id {pad_id}){same}."
