"""Value zeroing: Mohebbi, Zuidema, Chrupała & Alishahi 2023, "Quantifying Context Mixing in Transformers".

How much does token j's representation feed token i's in layer l? Zero j's value vectors in every head of
the layer's attention (v_j = 0, so no head can move anything from j), run the layer again on its original
input, and measure how far i's output moved:

    C_l[i, j] = 1 - cos(x̃_i^{¬j}, x̃_i)        (x̃: the layer's output; ¬j: with v_j zeroed)

Each row is then normalised to sum to 1, and the layers are composed by rollout without an added
identity (the residual is already inside the measured output): R = C_{L-1} ⋯ C_0, as the paper's code does.

For an encoder-decoder every kind of attention is zeroed (this package's extension of the paper, which
studied encoders): the encoder's self-attention gives R_enc (S x S); in decoder layer l, zeroing target
position j's values in the self-attention gives C^tt_l (T x T) and zeroing memory position k's values in
the cross-attention gives C^ts_l (T x S), normalised together, row by row, over [C^tt_l | C^ts_l]. A decoder
state is a mix of target inputs R^tt and source inputs R^ts, from R^tt = I, R^ts = 0:

    R^tt <- C^tt_l R^tt,        R^ts <- C^tt_l R^ts + C^ts_l R_enc

so every row of [R^ts | R^tt] sums to 1, like the encoder-decoder rollout (rollout.py). A row of zeros (zeroing
no single token moved that output) has no shares: it is NaN, as is every composed row that takes a positive
weight from it (mixing.py). "Zeros" up to rounding: the zeroed copies run in another batch than the original, so
an output that does not move still reads 1 - cos of a few ulps, which normalising would blow up into shares.
A row is undefined where its distances add up to at most ROUNDING_ULPS · n · eps of the dtype (16 ulps a
token on average). Measured: with the last decoder layer's W_O set to 0, rows read at most 3 ulps an entry and
1.0e-5 a row in float32 (reverse, dates-de), while the smallest real row on the shipped models adds up to
9.5e-4 (dates-de, encoder layer 1), 11 times the floor at 45 tokens.

Relative positions (T5): the position bias is added to the scores, so it moves the weights α, never the values;
zeroing v_j is as defined as with absolute positions (j still gets its weight, now moving nothing), and each
layer runs again with the bias the forward added (``{stack}.position_bias``), or it would measure the bias's
absence rather than j's.

``layer=l`` gives decoder layer l's own [C^ts_l | C^tt_l] instead of the roll-out: on the shipped ``reverse``
model the last layer finds the mirrored character where the roll-out through the encoder ends on </s>, the
encoder's sink. The zeroing is an edit of the network's ``.values`` sites (network.interventions); each layer
runs once with a copy of its input per zeroed token, all copies in one batch.

Decoder-only (pairs.py: the prompt and the continuation as one sequence): C_l over the whole sequence per layer,
normalised row by row, rolled out R = C_{L-1} ⋯ C_0 (``layer=l``: C_l alone), row t at position P - 1 + t,
split into the prompt's and the continuation's columns (summing to 1 together). Each layer runs again with the
mask and the rotation the forward gave it. Rotary positions turn the queries and keys, never the values, so
zeroing v_j is what it is with absolute positions; with grouped-query attention a key/value head serves a group
of query heads, and zeroing token j's value in every key/value head zeroes it for every query head, as the
method asks; Gemma's sandwich norm and soft-caps are part of the layer that runs again, whose output is measured.

What the decoder-only path computes (``lm_layer_mixing``) is that definition, running the layer again on L copies
of its input with copy j's v_j zeroed, less the part that cannot change. (1) Causality: position i < j never reads
j (the causal mask, sliding or full, gives α_ij = 0), so its output in copy j is the original's: C_l[i, j] = 0
exactly, and copy j needs the rows i >= j only. (2) Zeroing v_j edits an input of the attention's mix, not of the
projections: the copies' queries, keys and values (normed, turned, grouped) are the original run's. So q, k and v
are computed once (``DecoderLayer.self_projections``), and per copy j only the rows i >= j run on: the attention
mix with the ``.values`` site zeroing v_j and the traced mask (``MultiHeadAttention.attend``), then the rest of the
layer, its residuals, norms and feed-forward (``DecoderLayer.run``). Every step a row takes is the layer's own code
on the same numbers, so C_l is the same to float rounding (tests/test_explain_lm_value_zeroing.py holds it against
the L copies run through the whole layer, every family). The mix of the copies of ``COPIES_PER_BLOCK`` positions
runs in one batch, from the block's first row (the few rows above a copy's own start go through the mix and W^O
only); every copy's rows then go through the rest of the layer in one batch. That is about L(L + 1)/2 rows through
W^O and the feed-forward instead of L^2 rows through the whole layer: at Qwen3-0.6B size, a 20-token prompt and its
20-token continuation, 563 GFLOP in place of 1374 (torch's FlopCounterMode).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..network.interventions import intervene
from ..network.model import Transformer
from ..network.trace import Trace
from .mixing import compose, decoder_layer, normalised, whole_rows
from .pairs import lm_rows, lm_sequence, split, traced
from .progress import Progress, tell


def value_zeroing(model: Transformer, src_ids: Tensor, tgt_ids: Tensor, layer: int | None = None,
                  progress: Progress | None = None) -> tuple[Tensor, Tensor]:
    """-> source R^ts (B, T-1, S) and target R^tt (B, T-1, T-1) of the decoder input ``tgt_ids[:, :-1]``; rows of
    [source | target] sum to 1 or are NaN (a row of zeros has no shares: module docstring).

    ``layer=None`` composes every layer (the roll-out); ``layer=l`` (an int, negative from the last) is decoder
    layer l's own mixing, [C^ts_l | C^tt_l] normalised together: memory position k is source position k, with no
    roll-out through the encoder. ``progress`` (progress.py) is told before each layer, where a deadline stops the
    work."""
    layer = decoder_layer(model, layer)
    n_layers = model.config.n_encoder_layers + model.config.n_decoder_layers
    trace = traced(model, src_ids, tgt_ids)
    if model.config.decoder_only:
        return _lm_value_zeroing(model, trace, src_ids, tgt_ids, layer, progress)
    with torch.no_grad():
        if layer is not None:
            self_part, cross_part = _decoder_shares(model, trace, layer)
            return whole_rows(cross_part, self_part)
        r_enc = None
        for index in range(model.config.n_encoder_layers):
            tell(progress, index / n_layers, f"encoder layer {index}")
            mixing = _shares(encoder_layer_mixing(model, trace, index))  # (B, S, S)
            r_enc = mixing if r_enc is None else compose(mixing, r_enc)
        target = source = None
        for index in range(model.config.n_decoder_layers):
            tell(progress, (model.config.n_encoder_layers + index) / n_layers, f"decoder layer {index}")
            self_part, cross_part = _decoder_shares(model, trace, index)  # (B, T, T), (B, T, S)
            if target is None:
                target, source = self_part, compose(cross_part, r_enc)
            else:
                target, source = compose(self_part, target), compose(self_part, source) + compose(cross_part, r_enc)
    return whole_rows(source, target)


ROUNDING_ULPS = 16  # a row of distances below this many ulps a token is a row of zeros (module docstring)


def _shares(scores: Tensor) -> Tensor:
    """Rows of distances (..., n) normalised to sum to 1; NaN where they add up to rounding only."""
    floor = ROUNDING_ULPS * scores.size(-1) * torch.finfo(scores.dtype).eps
    return normalised(scores, floor)


def _decoder_shares(model: Transformer, trace: Trace, layer: int) -> tuple[Tensor, Tensor]:
    """C^tt_l (B, T, T) and C^ts_l (B, T, S), normalised together row by row over [C^tt_l | C^ts_l]."""
    self_part, cross_part = decoder_layer_mixing(model, trace, layer)
    both = _shares(torch.cat([self_part, cross_part], dim=-1))  # (B, T, T + S)
    return both[..., :self_part.size(-1)], both[..., self_part.size(-1):]


def encoder_layer_mixing(model: Transformer, trace: Trace, layer: int) -> Tensor:
    """C_l[i, j] of encoder layer ``layer`` before normalisation: (B, S, S)."""
    x = trace["src.input"] if layer == 0 else trace[f"encoder.{layer - 1}.output"]  # (B, S, D)
    mask = trace["encoder.mask"]  # (B, 1, 1, S)
    n = x.size(1)
    with intervene({f"encoder.{layer}.self_attn.values": _zeroing_one_per_copy(n)}):
        moved = model.encoder.layers[layer](_copies(x, n), _copies(mask, n),  # (B*S, S, D): copy j zeroes j
                                            position_bias=_position_bias(trace, "encoder"))
    return _distance(moved, trace[f"encoder.{layer}.output"], n)


def decoder_layer_mixing(model: Transformer, trace: Trace, layer: int) -> tuple[Tensor, Tensor]:
    """C^tt_l (B, T, T) and C^ts_l (B, T, S) of decoder layer ``layer`` before normalisation."""
    x = trace["tgt.input"] if layer == 0 else trace[f"decoder.{layer - 1}.output"]  # (B, T, D)
    memory, self_mask, memory_mask = trace["encoder.output"], trace["decoder.mask"], trace["cross.mask"]
    original = trace[f"decoder.{layer}.output"]
    parts = []
    for sublayer, n in (("self_attn", x.size(1)), ("cross_attn", memory.size(1))):
        with intervene({f"decoder.{layer}.{sublayer}.values": _zeroing_one_per_copy(n)}):
            moved = model.decoder.layers[layer](_copies(x, n), _copies(memory, n), _copies(self_mask, n),
                                                _copies(memory_mask, n),
                                                position_bias=_position_bias(trace, "decoder"))  # (B*n, T, D)
        parts.append(_distance(moved, original, n))
    return parts[0], parts[1]


def _lm_value_zeroing(model: Transformer, trace: Trace, src_ids: Tensor, tgt_ids: Tensor, layer: int | None,
                      progress: Progress | None) -> tuple[Tensor, Tensor]:
    """A decoder-only model (module docstring): C_l over its one sequence per layer, rolled out (or layer ``layer``
    alone), at the explained rows, split into the prompt's and the continuation's columns."""
    rotations = _lm_rotations(model, src_ids, tgt_ids, trace["tgt.input"].dtype)
    with torch.no_grad():
        rolled = None
        layers = range(model.config.n_decoder_layers) if layer is None else (layer,)
        for index in layers:
            tell(progress, index / model.config.n_decoder_layers, f"decoder layer {index}")
            mixing = _shares(lm_layer_mixing(model, trace, index, rotations))  # (B, L, L)
            rolled = mixing if rolled is None else compose(mixing, rolled)
        return split(rolled[:, lm_rows(src_ids.size(1), tgt_ids.size(1) - 1, rolled.device)], src_ids.size(1))


def _lm_rotations(model: Transformer, src_ids: Tensor, tgt_ids: Tensor, dtype: torch.dtype
                  ) -> dict[str, tuple[Tensor, Tensor]]:
    """The rotary cos and sin per layer type, (B|1, L, d_k) each, at the positions the forward gave the sequence
    (``model.lm``: each row counts from its first token); {} without rotary positions."""
    rotary = model.decoder.rotary
    if rotary is None:
        return {}
    ids, real = lm_sequence(src_ids, tgt_ids[:, :-1], model.config.pad_id)
    positions = (torch.arange(ids.size(1), device=ids.device)[None] if real is None
                 else (real.long().cumsum(-1) - 1).clamp(min=0))  # (B|1, L)
    return {kind: turn(positions, dtype) for kind, turn in rotary.items()}


COPIES_PER_BLOCK = 8  # zeroed positions whose attention mix runs together: a block bounds the copies' scores in
# memory and the rows above a copy's start that go through the mix and W^O


def lm_layer_mixing(model: Transformer, trace: Trace, layer: int, rotations: dict[str, tuple[Tensor, Tensor]]
                    ) -> Tensor:
    """C_l[i, j] of a decoder-only model's layer ``layer`` before normalisation, (B, L, L), 0 above the diagonal.

    What running the whole layer on L copies of its traced input (copy j with v_j zeroed, the traced mask and
    rotation) gives, computed as only the changed part (module docstring): q, k and v once from the input, then per
    copy j the attention at the rows i >= j with v_j zeroed (the ``.values`` site; the copies of ``COPIES_PER_BLOCK``
    positions in one batch), then the rest of the layer at those rows of every copy in one (``DecoderLayer.run``)."""
    x = trace["tgt.input"] if layer == 0 else trace[f"decoder.{layer - 1}.output"]  # (B, L, D)
    original = trace[f"decoder.{layer}.output"]  # (B, L, D)
    unit = model.decoder.layers[layer]
    batch, n = x.size(0), x.size(1)
    mask = trace["decoder.sliding_mask" if unit.layer_type == "sliding" else "decoder.mask"]  # (B|1, 1, L, L)
    mask = mask.expand(batch, -1, -1, -1)
    q, k, v = unit.self_projections(x, rotations.get(unit.layer_type, rotations.get("full")))  # (B, H|H_kv, L, d_k)
    mixed, rows, columns = [], [], []  # per block: the attention's output at each (row i, copy j), i and j
    for first in range(0, n, COPIES_PER_BLOCK):
        zeroed = range(first, min(first + COPIES_PER_BLOCK, n))  # copy c of the block zeroes position zeroed[c]
        m = len(zeroed)
        moves = torch.arange(first, n, device=x.device)[None] >= torch.tensor(zeroed, device=x.device)[:, None]
        with intervene({f"decoder.{layer}.self_attn.values": _zeroing_one_per_copy(n, zeroed)}):
            block = unit.self_attn.attend(_copies(q[:, :, first:], m), _copies(k, m), _copies(v, m),
                                          _copies(mask[..., first:, :], m))  # (B*m, L - first, D): rows first..
        mixed.append(block.view(batch, m, n - first, -1)[:, moves])  # (B, pairs, D): copy c's rows i >= zeroed[c]
        copy, row = moves.nonzero(as_tuple=True)
        rows.append(row + first)
        columns.append(copy + first)
    i, j, mixed = torch.cat(rows), torch.cat(columns), torch.cat(mixed, dim=1)  # (pairs,), (pairs,), (B, pairs, D)
    moved = unit.run(x[:, i], lambda _reads: mixed)  # (B, pairs, D): the rest of the layer, all copies' rows at once
    mixing = x.new_zeros(batch, n, n)  # C_l[i, j] = 0 for i < j: position i never reads j (causal mask)
    mixing[:, i, j] = (1.0 - F.cosine_similarity(moved, original[:, i], dim=-1)).clamp(min=0.0)
    return mixing


def _position_bias(trace: Trace, stack: str) -> Tensor | None:
    """The stack's relative position bias (1, H, L, L) as the forward added it (T5); None where positions are
    absolute. It broadcasts over the copies: every copy sees the same positions."""
    site = f"{stack}.position_bias"
    return trace[site] if site in trace else None


def _copies(x: Tensor, n: int) -> Tensor:
    """n copies of each sentence, next to each other: (B, ...) -> (B*n, ...)."""
    return x.repeat_interleave(n, dim=0)


def _zeroing_one_per_copy(n: int, zeroed: range | None = None):  # noqa: ANN202  (an edit)
    """An edit of a ``.values`` site (B*m, H, n, d_k), m = len(zeroed): copy c of each sentence has position
    zeroed[c]'s values zeroed (default: every position, copy j zeroing j)."""
    zeroed = range(n) if zeroed is None else zeroed

    def edit(values: Tensor) -> Tensor:
        keep = torch.ones(len(zeroed), n, dtype=values.dtype, device=values.device)
        copy = torch.arange(len(zeroed), device=keep.device)
        keep[copy, copy + zeroed.start] = 0.0  # (copy c, position k): 0 where k == zeroed[c]
        keep = keep.repeat(values.size(0) // len(zeroed), 1)  # (B*m, n)
        return values * keep[:, None, :, None]

    return edit


def _distance(moved: Tensor, original: Tensor, n: int) -> Tensor:
    """1 - cos between each copy's outputs and the original's: moved (B*n, T, D), original (B, T, D) -> (B, T, n),
    column j from the copy that zeroed j."""
    batch, length, _ = original.shape
    moved = moved.view(batch, n, length, -1)  # (B, n copies, T, D)
    cosine = F.cosine_similarity(moved, original[:, None], dim=-1)  # (B, n, T)
    return (1.0 - cosine).clamp(min=0.0).transpose(1, 2)  # (B, T, n)
