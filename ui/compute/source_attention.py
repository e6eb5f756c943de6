"""Where a model reads the source while it writes the answer, for one analysed input: an encoder-decoder's
cross-attention, or a decoder-only model's self-attention from the answer's positions to the source's (the same
information, read off its one stack). The Training page draws the two of a pair of twins side by side."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ui.compute.analysis import Analysis
from ui.models.training_compare import lm_source_attention


@dataclass(frozen=True)
class SourceAttention:
    """One layer's attention from the target's positions (rows) to the source's (columns), every head."""

    weights: np.ndarray  # (H, T, S): an encoder-decoder's rows sum to 1, a decoder-only model's to its source share
    src_tokens: list[str]  # S: the encoder's input (with </s>), or the source tokens before the separator
    tgt_tokens: list[str]  # T: the decoder input <s> y_1 .. y_n, or the separator and the answer's tokens
    decoder_only: bool


def source_attention(analysis: Analysis, layer: int) -> SourceAttention:
    """The attention of decoder layer ``layer`` that reads the source, from an ``Analysis`` of either architecture
    (its trace: a teacher-forced forward over the model's own greedy output)."""
    if not analysis.decoder_only:
        weights = analysis.trace.attention("cross", layer)[0].double().numpy()  # (H, T, S)
        return SourceAttention(weights, list(analysis.src_tokens), list(analysis.decoder_tokens), False)
    n_source = len(analysis.src_ids) - 1  # the prompt is the source tokens and the separator
    weights = lm_source_attention(analysis.trace.attention("decoder", layer)[0].double().numpy(), n_source)
    tokens = list(analysis.decoder_tokens)  # the whole sequence: source, separator, answer
    return SourceAttention(weights, tokens[:n_source], tokens[n_source:], True)
