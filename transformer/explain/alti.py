"""ALTI+: Ferrando, Gállego, Alastruey, Escolano & Costa-jussà 2022, "Towards Opening the Black Box of Neural
Machine Translation: Source and Target Contributions to the Predictions" (ALTI: Ferrando, Gállego &
Costa-jussà 2022, "Measuring the Mixing of Contextual Information in the Transformer").

An attention block's output for token i is a sum of one vector per input token j, once the LayerNorm is
written as the linear map it is for a fixed row (σ_i its actual standard deviation):

    post-LN:  y_i = LN(z_i),  z_i = x_i + Σ_j Σ_h α^h_ij (x_j W^h_V + b^h_V) W^h_O + b_O
              T_i(x_j) = L_i(δ_ij x_i + Σ_h α^h_ij (x_j W^h_V + b^h_V) W^h_O),  L_i(v) = γ ⊙ (v - mean(v)) / σ_i
    pre-LN:   y_i = x_i + Σ_j Σ_h α^h_ij (v_j W^h_V + b^h_V) W^h_O + b_O,  T_i(x_j) = δ_ij x_i + Σ_h α^h_ij (…)
              v_j = LN(x_j) in a self-attention block; in the cross-attention block v_j = m_j, the encoder
              output as it is (a pre-LN layer normalises only the stream it updates, the query side)

so that y_i = Σ_j T_i(x_j) + (the biases b_O and β, which belong to no token). T5 (pre-RMSNorm, no biases,
relative positions) is the pre-LN case as it stands: RMSNorm, like LayerNorm, acts on each token's own vector
before the values are read (v_j = RMSNorm(x_j)), and the stream it updates is added to as it is, so the sum is
exact; b^V and b_O are 0; the position bias is added to the scores, so it lives in the weights α^h_ij (the traced
ones) and in no token's vector. A post-norm RMSNorm is read as its own linear map at the row (vectors.py).

Decoder-only (pairs.py: the prompt and the continuation as one sequence). Each layer's self-attention block gives
C_l over the whole sequence (L x L) as above, the layers compose by rollout, R = C_{L-1} ⋯ C_0, and row t is R's
row at position P - 1 + t, split into the prompt's columns (``source``) and the continuation's (``target``), the
two together summing to 1 (``layer=l``: C_l's row alone). What is new in these families changes nothing in the
derivation: rotary positions turn only the queries and keys, q/k norms, soft-capped scores and sliding windows
act before the softmax, so all of them live in the traced α; with grouped-query attention head h reads its
group's value vector through its own W^O_h (vectors.py); RMSNorm before the block is read per token (v_j =
RMSNorm(x_j)), as LayerNorm is. Gemma's sandwich norm normalises the block's update before the residual sum,
y_i = x_i + N'(Σ_j Σ_h α f_h(v_j)): at the row's own statistic N' is linear (vectors.py), the convention ALTI
takes for post-LN's LayerNorm, so T_i(x_j) = δ_ij x_i + N'_i(Σ_h α^h_ij f_h(v_j)) adds up to y_i exactly (there
are no biases); tests/test_explain_lm.py checks it against the network's own sub-layer.

Token j's contribution is how close its vector comes to the whole, in the L1 norm, normalised over j:

    c_ij = max(0, ‖y_i‖₁ - ‖y_i - T_i(x_j)‖₁) / Σ_k max(0, ‖y_i‖₁ - ‖y_i - T_i(x_k)‖₁)

The encoder's blocks are composed by rollout (the residual is inside T, so no identity is added): R_enc.
In the decoder, the self-attention block mixes the target prefix (C^tt), and the cross-attention block
mixes the residual stream (one contributor, c^res_i) with every encoder output (C^ts); the feed-forward
layers act on each token alone and are left out, as in the paper. A decoder state is a mix of target
inputs R^tt and source inputs R^ts, from R^tt = I, R^ts = 0; per decoder layer

    R^tt <- C^tt R^tt,  R^ts <- C^tt R^ts;    then    R^tt <- c^res ⊙ R^tt,  R^ts <- c^res ⊙ R^ts + C^ts R_enc

so every row of [R^ts | R^tt] is non-negative and sums to 1, and the row's source part (``source_share``) is
how much of that prediction comes from the source at all: low where the model translates from its own
prefix alone, the sign of a hallucination the paper reports. ``layer=l`` gives decoder layer l's own mixing
instead: its cross-attention block's C^ts over the encoder outputs and c^res ⊙ its self-attention block's C^tt
(the roll-out through the encoder can end on a sink such as </s> where the layer itself reads the right token).

Undefined rows. Where the update cancels the residual, no contributor comes closer to y_i than the zero vector
does: every c_ij is 0, and no shares exist. Just above that, Σ_j c_ij is a sliver of ‖y_i‖₁ and the
normalisation blows it up to a row that is one-hot or near it, decided by less of y_i than the token-less bias
b_O (4-10% of ‖y_i‖₁ on the shipped models) moves it: a row is undefined (NaN, in every composed row that takes
a positive weight from it) where Σ_j c_ij <= UNDEFINED_BELOW · ‖y_i‖₁, 1%. Why 1%: on the four shipped models
every block but one has Σ_j c_ij / ‖y_i‖₁ >= 0.04 in every row (median 0.5-0.9), so the floor never touches
them; the exception, the last cross-attention block of the pre-LN ``reverse`` model, has a median of 0.002,
and there measuring closeness against y_i - b_O instead of y_i (a convention: the bias belongs to no token)
moves a row's shares by a total variation of 0.09-0.21 on average below 1% (the top contributor changes in
6-26% of those rows), against 0.02-0.07 above it. Measured over 20 task sentences: ``docs/explain.md``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..network.attention import MultiHeadAttention
from ..network.model import Transformer
from ..network.trace import Trace
from .mixing import compose, decoder_layer, normalised, whole_rows
from .pairs import lm_rows, split, traced
from .vectors import frozen_norm, moved_vectors

# A block's row is undefined where its tokens' closeness adds up to at most this share of ‖y_i‖₁ (module docstring).
UNDEFINED_BELOW = 0.01


def alti_plus(model: Transformer, src_ids: Tensor, tgt_ids: Tensor, layer: int | None = None
              ) -> tuple[Tensor, Tensor]:
    """-> source R^ts (B, T-1, S) and target R^tt (B, T-1, T-1) of the decoder input ``tgt_ids[:, :-1]``; rows of
    [source | target] sum to 1 or are NaN (undefined, module docstring).

    ``layer=None`` composes every layer (the roll-out); ``layer=l`` (an int, negative from the last) is decoder
    layer l's own mixing: source = its cross-attention block's C^ts over the encoder outputs (memory position k is
    source position k, no encoder roll-out), target = c^res ⊙ its self-attention block's C^tt."""
    layer = decoder_layer(model, layer)
    trace = traced(model, src_ids, tgt_ids)
    if model.config.decoder_only:
        return _lm_alti(model, trace, src_ids.size(1), tgt_ids.size(1) - 1, layer)
    with torch.no_grad():
        if layer is not None:
            self_mixing, residual, cross_mixing = decoder_mixing(model, trace, layer)
            return whole_rows(cross_mixing, compose(torch.diag_embed(residual), self_mixing))
        r_enc = None
        for index in range(model.config.n_encoder_layers):
            mixing = encoder_mixing(model, trace, index)  # (B, S, S)
            r_enc = mixing if r_enc is None else compose(mixing, r_enc)
        target = source = None
        for index in range(model.config.n_decoder_layers):
            self_mixing, residual, cross_mixing = decoder_mixing(model, trace, index)
            if target is None:
                target, source = self_mixing, torch.zeros_like(cross_mixing)
            else:
                target, source = compose(self_mixing, target), compose(self_mixing, source)
            keep = torch.diag_embed(residual)  # (B, T, T): c^res ⊙ as a mixing, so that a 0 on a NaN row adds nothing
            target = compose(keep, target)
            source = compose(keep, source) + compose(cross_mixing, r_enc)
    return whole_rows(source, target)


def _lm_alti(model: Transformer, trace: Trace, src_len: int, n_rows: int, layer: int | None) -> tuple[Tensor, Tensor]:
    """A decoder-only model's ALTI+ (module docstring): R = C_{L-1} ⋯ C_0 (or C_layer) at the explained rows, split
    into the prompt's and the continuation's columns."""
    with torch.no_grad():
        rolled = None
        for index in range(model.config.n_decoder_layers) if layer is None else (layer,):
            mixing = _contributions(*decomposition(model, trace, "decoder", index))  # (B, L, L)
            rolled = mixing if rolled is None else compose(mixing, rolled)
        return split(rolled[:, lm_rows(src_len, n_rows, rolled.device)], src_len)


def source_share(source: Tensor) -> Tensor:
    """The share of each prediction that comes from the source: the rows of ALTI+'s source part summed, (B, T-1)."""
    return source.sum(dim=-1)


def encoder_mixing(model: Transformer, trace: Trace, layer: int) -> Tensor:
    """C_l of encoder layer ``layer``'s self-attention block: (B, S, S), rows summing to 1."""
    return _contributions(*decomposition(model, trace, "encoder", layer))


def decoder_mixing(model: Transformer, trace: Trace, layer: int) -> tuple[Tensor, Tensor, Tensor]:
    """Decoder layer ``layer``: C^tt (B, T, T) of its self-attention block; of its cross-attention block the
    residual's contribution c^res (B, T) and the encoder outputs' C^ts (B, T, S), c^res + C^ts rows summing to 1."""
    self_mixing = _contributions(*decomposition(model, trace, "decoder", layer))
    cross = _contributions(*decomposition(model, trace, "cross", layer))  # (B, T, 1 + S): the residual first
    return self_mixing, cross[..., 0], cross[..., 1:]


def decomposition(model: Transformer, trace: Trace, kind: str, layer: int) -> tuple[Tensor, Tensor]:
    """One attention block's vectors T_i(x_j) (B, Tq, n, D) and output y (B, Tq, D) (``block_vectors``): ``kind``
    "encoder" or "decoder" (a self-attention block, n = Tq) or "cross" (n = 1 + S, the residual first).

    The values are read as the attention module reads them: post-LN from the block's input x; pre-LN from LN(x) in
    a self-attention block, but in the cross-attention block from the encoder output as it is, since a pre-LN
    layer normalises only the stream it updates (the queries), never the memory it reads."""
    norm_first = model.config.norm_first
    if kind == "encoder":
        x = trace["src.input"] if layer == 0 else trace[f"encoder.{layer - 1}.output"]  # (B, S, D)
        block = model.encoder.layers[layer]
    else:
        x = trace["tgt.input"] if layer == 0 else trace[f"decoder.{layer - 1}.output"]  # (B, T, D)
        block = model.decoder.layers[layer]
    if kind != "cross":
        residual = block.self_attn_residual
        values_in = residual.norm(x) if norm_first else x
        return block_vectors(block.self_attn, residual.norm, x, values_in, trace.attention(kind, layer), norm_first,
                             residual_at="diagonal", post_norm=residual.post_norm)
    bias = trace["decoder.position_bias"] if "decoder.position_bias" in trace else None  # T5's, (1, H, T, T)
    after_self = block.self_attn_residual(x, lambda h: block.self_attn(h, h, trace["decoder.mask"], position_bias=bias))
    return block_vectors(block.cross_attn, block.cross_attn_residual.norm, after_self, trace["encoder.output"],
                         trace.attention("cross", layer), norm_first, residual_at="extra")


def block_vectors(attention: MultiHeadAttention, norm: nn.Module, x_q: Tensor, x_kv: Tensor, weights: Tensor,
                  norm_first: bool, residual_at: str, post_norm: nn.Module | None = None) -> tuple[Tensor, Tensor]:
    """The block's output y (B, Tq, D) and one vector per contributor T_i(x_j) (B, Tq, n, D) (module docstring).

    x_q (B, Tq, D) is the residual stream the block adds to (its input, before any LayerNorm); x_kv (B, Tk, D) is
    what the attention module reads its values from, as it reads them: LN(x) for a pre-LN self-attention, the
    encoder output as it is for a cross-attention, x itself post-LN. The caller decides, since only it knows.
    ``residual_at="diagonal"`` (self-attention): the residual x_i is part of token i's own vector, n = Tk;
    ``"extra"`` (cross-attention): the residual is a contributor of its own, first, n = 1 + Tk.
    ``post_norm``: the norm of the sub-layer's output before the residual sum (Gemma's sandwich), read as its
    linear map at the row (vectors.py), as post-LN's LayerNorm is.
    """
    moved = moved_vectors(attention, x_kv, weights)  # (B, Tq, Tk, D): Σ_h α^h_ij f_h(x_j)
    update = moved.sum(dim=2) + attention.output_bias()  # (B, Tq, D): the sub-layer's output
    if post_norm is not None:
        moved, update = frozen_norm(post_norm, update)(moved), post_norm(update)
    if residual_at == "diagonal":
        moved = moved + torch.diag_embed(x_q.transpose(1, 2), dim1=1, dim2=2)  # + δ_ij x_i
    else:
        moved = torch.cat([x_q[:, :, None], moved], dim=2)  # the residual stream as contributor 0
    z = x_q + update  # (B, Tq, D): post-LN, the sum LayerNorm reads; pre-LN, the output
    if norm_first:
        return moved, z
    return frozen_norm(norm, z)(moved), norm(z)  # L_i(each vector), and y = LN(z)


def _contributions(vectors: Tensor, output: Tensor) -> Tensor:
    """c_ij = max(0, ‖y_i‖₁ - ‖y_i - T_i(x_j)‖₁), normalised over j; NaN rows where Σ_j c_ij <= UNDEFINED_BELOW ·
    ‖y_i‖₁ (module docstring).

    vectors (B, Tq, n, D), output y (B, Tq, D) -> (B, Tq, n)."""
    size = output.abs().sum(-1)[..., None]  # (B, Tq, 1): ‖y_i‖₁
    closeness = (size - (output[:, :, None] - vectors).abs().sum(-1)).clamp(min=0.0)
    return normalised(closeness, UNDEFINED_BELOW * size)
