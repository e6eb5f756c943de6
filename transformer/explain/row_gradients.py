"""Every explained row's gradient from one forward: the batched backward the gradient methods share.

Row t of a sentence explains f_t (inputs.py), a function of the decoder state h_t that predicts it. Saliency,
input × gradient, integrated gradients and relevancy each need ∂f_t/∂x for every real row t, x being the
embeddings or the attention weights. Reverse mode gives one gradient per backward; rather than one copy of the pair
per row (R forwards of the whole network, then one backward over the copies), one forward of the sentence serves
all its rows, and one batched backward (``torch.autograd.grad(..., is_grads_batched=True)``: a one-hot
``grad_outputs`` per row, vmapped) gives the R gradients. The generator is not in that backward: f_t depends on h_t
alone and its gradient there has a closed form (``scores_and_directions``), so the backward starts at the R
explained states, not at R × T × V logits. At NLLB size (d_model 1024, 12 + 12 layers, a 256k-word vocabulary; one
20 + 20-token pair) the copies took 8.1 s for saliency, most of it the 20-fold forward and the generator over every
copy's every position (docs/benchmarks.md).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..decoding.fast import few_rows_linear
from ..network.config import TransformerConfig
from ..network.interventions import Edit
from ..network.model import Transformer
from .pairs import decoder_states, source_embedding
from .progress import Progress, tell

# Bytes of activations one batched backward may hold (``rows_per_backward``, and integrated gradients' points per
# forward): at opus-mt size (d_model 512, 6+6 layers) and a 20-token pair this allows every row at once.
MEMORY_BUDGET = 2**30


def replacing(value: Tensor) -> Edit:
    """An edit of a ``src.tokens`` / ``tgt.tokens`` site that puts ``value`` in place of the looked-up embeddings."""
    return lambda _looked_up: value


def activation_floats(config: TransformerConfig, src_len: int, tgt_len: int) -> int:
    """A rough count of the floats one backward of one sentence holds: every layer's states, feed-forward hidden
    units and attention weights."""
    c = config
    per_token = 10 * c.d_model + 2 * c.d_ff
    if c.decoder_only:  # one sequence of both (pairs.py)
        length = src_len + tgt_len
        return c.n_decoder_layers * length * (per_token + 3 * c.n_heads * length)
    return (c.n_encoder_layers * src_len * (per_token + 3 * c.n_heads * src_len)
            + c.n_decoder_layers * tgt_len * (per_token + 3 * c.n_heads * (src_len + tgt_len)))


def attention_floats(config: TransformerConfig, src_len: int, tgt_len: int) -> int:
    """Every layer's attention weights, H · T_q · T_k floats each (relevancy takes a gradient of each per row)."""
    c = config
    if c.decoder_only:
        return c.n_decoder_layers * c.n_heads * (src_len + tgt_len) ** 2
    return c.n_heads * (c.n_encoder_layers * src_len ** 2 + c.n_decoder_layers * tgt_len * (tgt_len + src_len))


def backward_floats(config: TransformerConfig, src_len: int, tgt_len: int, rows: int) -> int:
    """A rough count of the floats one batched backward of ``rows`` rows over one sentence holds at its peak: the
    forward's saved activations once (``activation_floats``), and per row the gradients of about two layers'
    activations (autograd frees a layer's once it has passed it) and of every attention weight (kept where they are
    the inputs, as in relevancy). Measured at Qwen3-0.6B size (28 layers, a 20 + 20-token pair, saliency): +172 MB
    with 1 row per backward, +247 MB with all 20, about 1.5 layers' activations a row, where counting a whole
    backward's activations per row (this estimate before) allowed 13 rows at once."""
    c = config
    whole = activation_floats(config, src_len, tgt_len)
    layers = c.n_decoder_layers + (0 if c.decoder_only else c.n_encoder_layers)
    return whole + rows * (2 * whole // layers + attention_floats(config, src_len, tgt_len))


def rows_per_backward(config: TransformerConfig, src_len: int, tgt_len: int) -> int:
    """How many rows one batched backward of one sentence takes within ``MEMORY_BUDGET`` (at least one)."""
    whole, one = (backward_floats(config, src_len, tgt_len, rows) for rows in (0, 1))
    return int(max(1, (MEMORY_BUDGET // 4 - whole) // max(1, one - whole)))


def generator_logits(generator: nn.Linear, states: Tensor) -> Tensor:
    """The generator's logits of a few states, (..., D) -> (..., V): W h + b by ``few_rows_linear``, then the
    soft-cap where the model has one (Gemma-2: cap · tanh(z / cap), ``Generator``)."""
    logits = few_rows_linear(generator, states)  # W h^T when the rows are few (decoding/fast.py)
    cap = getattr(generator, "softcap", None)
    return logits if cap is None else torch.tanh(logits / cap) * cap


def scores_and_directions(generator: nn.Linear, states: Tensor, target: Tensor, contrast: Tensor | None
                          ) -> tuple[Tensor, Tensor]:
    """Decoder states (n, R, D) -> the scores f (n, R) and their gradients ∂f/∂h (n, R, D), in closed form.

    With logits z = W h + b: f = log softmax(z)[y], ∂f/∂h = W_y - Σ_v p_v W_v  (p = softmax(z));
    contrastive, f = log P(y) - log P(y') = z_y - z_y' (the normaliser cancels): ∂f/∂h = W_y - W_y'.
    A soft-capped generator (Gemma-2) gives logits ℓ = cap · tanh(z / cap), whose derivative is
    1 - tanh²(z / cap) = 1 - (ℓ / cap)²: every W_v above is then weighted by that of its own logit.
    """
    w = generator.weight
    z = few_rows_linear(generator, states)  # (n, R, V)
    cap = getattr(generator, "softcap", None)
    logits = z if cap is None else torch.tanh(z / cap) * cap
    slope = None if cap is None else 1 - torch.tanh(z / cap) ** 2  # (n, R, V): dℓ/dz

    def weighted(ids: Tensor) -> Tensor:  # (R,) -> dℓ_id/dh (n, R, D)
        rows = w[ids].expand(states.size(0), -1, -1)
        return rows if slope is None else rows * slope.gather(-1, ids[None, :, None].expand(states.size(0), -1, 1))

    chosen = logits.gather(-1, target[None, :, None].expand(states.size(0), -1, 1))[..., 0]  # (n, R)
    if contrast is not None:
        other = logits.gather(-1, contrast[None, :, None].expand(states.size(0), -1, 1))[..., 0]
        return chosen - other, weighted(target) - weighted(contrast)
    log_z = torch.logsumexp(logits, dim=-1)  # (n, R)
    p = torch.softmax(logits, dim=-1)  # (n, R, V)
    direction = weighted(target) - (p if slope is None else p * slope) @ w  # (n, R, D)
    return chosen - log_z, direction


def batched_row_gradients(states: Tensor, direction: Tensor, inputs: tuple[Tensor, ...],
                          rows_per_pass: int | None = None, progress: Progress | None = None) -> tuple[Tensor, ...]:
    """states (n, R, D) in the graph of ``inputs``, direction ∂f/∂h (n, R, D) -> per input, the gradient of each row's
    score summed over the n batch entries: (R, *input.shape).

    The surrogate Σ_d h_{r,d} · direction_{r,d} has row r's gradient wherever h_r's does (``direction`` is held
    fixed, as the closed form allows); ``rows_per_pass`` rows per batched backward (default all), the graph kept
    between passes. ``progress`` (progress.py) is told before each pass: a deadline stops the work there."""
    surrogate = (states * direction.detach()).sum(-1)  # (n, R)
    n_rows = surrogate.size(1)
    step = rows_per_pass or n_rows
    one_hot = torch.eye(n_rows, dtype=surrogate.dtype, device=surrogate.device)[:, None, :]  # (R, 1, R)
    parts: list[tuple[Tensor, ...]] = []
    for start in range(0, n_rows, step):
        tell(progress, start / n_rows, f"rows {start + 1}-{min(start + step, n_rows)} of {n_rows}")
        chosen = one_hot[start:start + step].expand(-1, surrogate.size(0), -1)  # (r, n, R)
        parts.append(torch.autograd.grad(surrogate, inputs, grad_outputs=chosen, is_grads_batched=True,
                                         retain_graph=start + step < n_rows))
    return tuple(torch.cat(grads) for grads in zip(*parts, strict=True))


def row_states(model: Transformer, src: Tensor, tgt_in: Tensor, row: Tensor, src_embed: Tensor,
               tgt_embed: Tensor | None = None) -> Tensor:
    """One sentence (1, S), (1, T-1) read with n source embeddings (n, S, D) (and target embeddings (n, T-1, D)) ->
    the decoder states that predict its explained rows, (n, R, D) (pairs.py: either shape of the model)."""
    return decoder_states(model, src, tgt_in, src_embed, tgt_embed)[:, row]


def embedding_gradients(model: Transformer, src: Tensor, tgt_in: Tensor, row: Tensor, target: Tensor,
                        contrast: Tensor | None, progress: Progress | None = None
                        ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """One sentence (1, S), (1, T-1) and its R explained rows -> its source and target embeddings (1, S, D),
    (1, T-1, D), and each row's gradient at them, ∂f_r/∂e: (R, S, D) and (R, T-1, D), from one forward
    (``progress`` told before each batched backward)."""
    with torch.no_grad():
        src_embed, tgt_embed = source_embedding(model)(src), model.tgt_embed(tgt_in)  # (1, S, D), (1, T-1, D)
    src_embed.requires_grad_(), tgt_embed.requires_grad_()  # fresh leaves of ours, not the model's weights
    with torch.enable_grad():
        states = row_states(model, src, tgt_in, row, src_embed, tgt_embed)  # (1, R, D)
        with torch.no_grad():
            direction = scores_and_directions(model.generator, states, target, contrast)[1]
        step = rows_per_backward(model.config, src.size(1), tgt_in.size(1))
        src_grad, tgt_grad = batched_row_gradients(states, direction, (src_embed, tgt_embed), step, progress)
    return src_embed.detach(), tgt_embed.detach(), src_grad[:, 0], tgt_grad[:, 0]
