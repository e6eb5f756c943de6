"""Decoder-only value zeroing (``lm_layer_mixing``: q, k and v once, then per copy j only the rows i >= j) against
its definition, the code it replaced: the whole layer run again on L copies of its traced input, copy j with v_j
zeroed through the ``.values`` site, with the traced mask and rotation. Every layer of every decoder family of
decoder_models.py (GPT-2; Llama with GQA and RoPE; Mistral's sliding window crossed; Qwen2's q/k/v biases; Qwen3's
q/k norms; Gemma-2's soft-caps, sandwich norms and alternating windows; Gemma-3's two rotations), a batch with a
left-padded prompt, longer than a block of copies (``COPIES_PER_BLOCK``)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from decoder_models import NAMES, WINDOW, build_pair

from transformer.explain import value_zeroing as vz
from transformer.explain.pairs import lm_pair, traced
from transformer.network.interventions import intervene

pytest.importorskip("transformers")
P, N = 12, 8  # the sequence: P + N - 1 = 19 tokens, past the window (5) and two blocks of copies (8)


def inputs() -> tuple[torch.Tensor, torch.Tensor]:
    """src (2, P) and tgt (2, N + 1): row 1's prompt left-padded by 3, its continuation right-padded by 1."""
    generator = torch.Generator().manual_seed(11)
    prompt = torch.randint(3, 48, (2, P), generator=generator)
    continuation = torch.randint(3, 48, (2, N), generator=generator)
    prompt[1, :3], continuation[1, -1] = 0, 0
    return lm_pair(prompt, continuation)


def by_copies(model, trace, layer: int, rotations) -> torch.Tensor:  # noqa: ANN001
    """C_l (B, L, L) by the definition: L copies of the layer's input through the whole layer, copy j with v_j
    zeroed (the ``.values`` site), the distances of every row of every copy."""
    x = trace["tgt.input"] if layer == 0 else trace[f"decoder.{layer - 1}.output"]  # (B, L, D)
    unit = model.decoder.layers[layer]
    batch, n = x.size(0), x.size(1)
    mask = trace["decoder.sliding_mask" if unit.layer_type == "sliding" else "decoder.mask"]
    rotation = rotations.get(unit.layer_type, rotations.get("full"))
    if rotation is not None:
        rotation = tuple(part.expand(batch, -1, -1).repeat_interleave(n, 0) for part in rotation)

    def zero_copy_j(values: torch.Tensor) -> torch.Tensor:  # (B*L, H_kv, L, d_k)
        keep = 1.0 - torch.eye(n, dtype=values.dtype).repeat(batch, 1)  # (B*L, L): copy j loses position j
        return values * keep[:, None, :, None]

    with torch.no_grad(), intervene({f"decoder.{layer}.self_attn.values": zero_copy_j}):
        moved = unit(x.repeat_interleave(n, 0), None, mask.expand(batch, -1, -1, -1).repeat_interleave(n, 0), None,
                     rotary=rotation).view(batch, n, n, -1)  # (B, copy j, position i, D)
    cosine = F.cosine_similarity(moved, trace[f"decoder.{layer}.output"][:, None], dim=-1)  # (B, j, i)
    return (1.0 - cosine).clamp(min=0.0).transpose(1, 2)  # (B, i, j)


@pytest.mark.parametrize("name", NAMES)
def test_lm_layer_mixing_is_the_whole_layer_run_on_every_copy(name):
    model = build_pair(name).ours
    assert model.config.decoder_only and P + N - 1 > max(WINDOW, vz.COPIES_PER_BLOCK)
    src, tgt = inputs()
    trace = traced(model, src, tgt)
    rotations = vz._lm_rotations(model, src, tgt, torch.float64)
    for layer in range(model.config.n_decoder_layers):
        with torch.no_grad():
            found = vz.lm_layer_mixing(model, trace, layer, rotations)
        expected = by_copies(model, trace, layer, rotations)
        assert bool((found.triu(1) == 0).all())  # position i < j never reads j: exactly nothing moved
        torch.testing.assert_close(found, expected, atol=tolerance(model), rtol=0, equal_nan=True)


def tolerance(model) -> float:  # noqa: ANN001
    """Both compute each output row with the same float64 operations on the same numbers; only the batch shapes
    differ, so a matmul may add its products in another order: a sum of n terms then moves by at most n ulps
    relatively (Higham's γ_n), and a row passes through sums of d_model (the projections, W^O, W_1), L (the mix)
    and d_ff (W_2) terms. 1 - cos moves by at most twice the relative move of its vector: 2 (d_model + L + d_ff)
    ulps of 1, 4e-14 here (an entry ranges over [0, 2]; found at most 2 ulps). The float32 steps of the rotary
    families (norms, softmax) get the same inputs to the ulp and round them the same way."""
    c = model.config
    return 2 * (c.d_model + P + N - 1 + c.d_ff) * torch.finfo(torch.float64).eps
