"""How an explained (source, target) pair is run, on either shape of the model: every method goes through here.

An encoder-decoder reads the source with its encoder and the decoder input ``tgt_ids[:, :-1]`` with its decoder;
row t of the decoder's output predicts ``tgt_ids[:, t+1]``.

A decoder-only language model (``config.decoder_only``) has one stack, and the prompt plays the source, the
continuation the target. ``src_ids`` (B, P) is the prompt; ``tgt_ids`` (B, T) is a placeholder at column 0, then
the continuation c_1 .. c_{T-1} (``lm_pair`` builds it: the placeholder is the prompt's last token, the one that
predicts c_1, and it is not fed again). The model reads one sequence,

    x = cat(prompt, c_1 .. c_{T-2})          (B, L),  L = P + T - 2          (``lm_sequence``)

and row t (predicting c_{t+1}) is the output at sequence position P - 1 + t (``lm_rows``): row 0 is the prompt's
last position, row t >= 1 the position of c_t. A map over the sequence, (B, T-1, L) at those rows, splits into
the source part over the prompt's P positions and the target part over the decoder input's T-1 columns
(``split``): column j >= 1 is c_j at position P - 1 + j, and column 0, the placeholder, is 0 (the token it stands
for, the prompt's last, is source column P - 1). So every axis means what it means for an encoder-decoder, and the
target part keeps its causal shape (row t reads columns <= t).

Prompts of a batch are padded on the left (as a tokenizer pads prompts for generation), so that every row's
prompt ends at P - 1; continuations are padded on the right, as targets are. Padding is the model's pad id, as for
an encoder-decoder; a sequence with padding runs with ``attention_mask`` (padding is never attended to, and
positions count from each row's first token: ``model.lm``).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..network.interventions import intervene
from ..network.model import Transformer
from ..network.trace import Trace


def source_embedding(model: Transformer) -> nn.Embedding:
    """The embedding that reads the source: the encoder's, or a decoder-only model's one embedding."""
    return model.tgt_embed if model.config.decoder_only else model.src_embed


def lm_pair(prompt_ids: Tensor, continuation_ids: Tensor) -> tuple[Tensor, Tensor]:
    """A decoder-only model's prompt (B, P) and continuation (B, n) -> ``src_ids`` (B, P) and ``tgt_ids``
    (B, n + 1) as every explanation takes them: the placeholder column 0 is the prompt's last token."""
    return prompt_ids, torch.cat([prompt_ids[:, -1:], continuation_ids], dim=1)


def lm_sequence(src_ids: Tensor, tgt_in: Tensor, pad_id: int) -> tuple[Tensor, Tensor | None]:
    """Prompt (B, P) and decoder input ``tgt_ids[:, :-1]`` (B, T-1) -> the sequence a decoder-only model reads
    (B, P + T - 2), its placeholder left out, and its ``attention_mask`` (None where nothing is padding)."""
    ids = torch.cat([src_ids, tgt_in[:, 1:]], dim=1)
    real = ids != pad_id
    return ids, None if bool(real.all()) else real


def lm_rows(src_len: int, n_rows: int, device: torch.device | None = None) -> Tensor:
    """The sequence positions of rows 0 .. n_rows - 1: P - 1 + t, (n_rows,)."""
    return torch.arange(src_len - 1, src_len - 1 + n_rows, device=device)


def split(maps: Tensor, src_len: int) -> tuple[Tensor, Tensor]:
    """maps (B, T-1, L) over a decoder-only model's sequence -> source (B, T-1, P) and target (B, T-1, T-1),
    the placeholder's column 0 set to 0."""
    source, rest = maps[..., :src_len], maps[..., src_len:]  # rest: (B, T-1, T-2), columns 1 .. T-2
    return source, torch.cat([torch.zeros_like(maps[..., :1]), rest], dim=-1)


def traced(model: Transformer, src_ids: Tensor, tgt_ids: Tensor, trace: Trace | None = None) -> Trace:
    """One teacher-forced forward, recorded up to the decoder's output (no generator: the maps never read the
    logits): the encoder and the decoder on ``tgt_ids[:, :-1]``, or a decoder-only model on ``lm_sequence``."""
    trace = Trace() if trace is None else trace
    with torch.no_grad():
        decoder_states(model, src_ids, tgt_ids[:, :-1], trace=trace)
    return trace


def rows_of(model: Transformer, states: Tensor, src_len: int, n_rows: int) -> Tensor:
    """(..., B, L, X) over the decoder's positions -> (..., B, T-1, X) at the explained rows (the identity for an
    encoder-decoder, whose decoder positions are the rows)."""
    if not model.config.decoder_only:
        return states
    return states.index_select(-2, lm_rows(src_len, n_rows, states.device))


def decoder_states(model: Transformer, src_ids: Tensor, tgt_in: Tensor, src_embed: Tensor | None = None,
                   tgt_embed: Tensor | None = None, trace: Trace | None = None) -> Tensor:
    """The states that predict each row, (n, T-1, D), for n copies of a pair: ``src_ids`` (n|1, S), ``tgt_in`` =
    ``tgt_ids[:, :-1]`` (n|1, T-1), read with the given token embeddings in place of the looked-up ones (the
    ``src.tokens`` / ``tgt.tokens`` sites, before any scale and position): source (n, S, D), target
    (n, T-1, D), either None for the looked-up ones. A decoder-only model never reads ``tgt_embed[:, 0]`` (the
    placeholder): its gradient there is 0."""
    n = max(x.size(0) for x in (src_ids, tgt_in, *(e for e in (src_embed, tgt_embed) if e is not None)))
    src_ids, tgt_in = src_ids.expand(n, -1), tgt_in.expand(n, -1)
    if not model.config.decoder_only:
        edits = {f"{side}.tokens": (lambda value: lambda _looked_up: value)(embed)
                 for side, embed in (("src", src_embed), ("tgt", tgt_embed)) if embed is not None}
        with intervene(edits):
            memory = model.encode(src_ids, trace=trace)
            return model.decode_states(tgt_in, memory, model.memory_mask(src_ids), trace=trace)
    p = src_ids.size(1)
    ids, mask = lm_sequence(src_ids, tgt_in, model.config.pad_id)

    def tokens(looked_up: Tensor) -> Tensor:  # (n, L, D): the prompt's, then the continuation's embeddings
        prompt = looked_up[:, :p] if src_embed is None else src_embed.expand(n, -1, -1)
        rest = looked_up[:, p:] if tgt_embed is None else tgt_embed[:, 1:].expand(n, -1, -1)
        return torch.cat([prompt, rest], dim=1)

    edits = {} if src_embed is None and tgt_embed is None else {"tgt.tokens": tokens}
    with intervene(edits):
        hidden = model.decode_states(ids, None, None, trace=trace, attention_mask=mask)  # (n, L, D)
    return rows_of(model, hidden, p, tgt_in.size(1))


def row_logits(model: Transformer, src_ids: Tensor, tgt_in: Tensor) -> Tensor:
    """The logits of every row, (B, T-1, V): ``model(src_ids, tgt_in)``, or a decoder-only model's at its rows."""
    if not model.config.decoder_only:
        return model(src_ids, tgt_in)
    return model.generator(decoder_states(model, src_ids, tgt_in))
