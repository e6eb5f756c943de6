"""The head statistics create their tensors where their inputs live (issue 35: the gradient importance's gates
were made on the CPU, so ``head_summary`` failed on a CUDA model). There is no GPU here: the checks run on the
'meta' device, which computes shapes without values and refuses to mix with CPU tensors, as CUDA does."""

from __future__ import annotations

import torch
from explain_helpers import batch, tiny_model

from transformer.explain import heads
from transformer.explain.head_baselines import bootstrap_interval
from transformer.explain.head_patterns import (
    _alignment_counts,
    _arc_counts,
    _patterns,
    _ratio,
    config_special_tokens,
)
from transformer.network.config import SpecialIds
from transformer.text.ids import BOS_ID, EOS_ID, PAD_ID, UNK_ID

META = torch.device("meta")


def test_the_gates_of_gradient_importance_have_the_models_device_and_dtype():
    """Each gate's gradient has its gate's device and dtype: the model's, not the CPU's default float."""
    src, tgt = batch()
    grads = heads._gate_gradients(tiny_model().to(META), src.to(META), tgt.to(META))  # a float64 model
    assert len(grads) == 6 and all(g.device == META and g.dtype == torch.float64 and g.shape == (2, 2)
                                   for g in grads.values())
    single = heads._gate_gradients(tiny_model().float(), src, tgt)
    assert all(g.dtype == torch.float32 for g in single.values())


def test_the_pattern_statistics_follow_their_inputs_device():
    ids = SpecialIds(PAD_ID, UNK_ID, BOS_ID, EOS_ID)
    src = torch.tensor([[5, 6, EOS_ID], [5, EOS_ID, PAD_ID]], device=META)
    dec = torch.tensor([[BOS_ID, 7, 8], [BOS_ID, 7, EOS_ID]], device=META)
    weights = torch.empty(2, 2, 3, 3, dtype=torch.float64, device=META)  # (B, H, T, S)
    special = (config_special_tokens(ids), config_special_tokens(ids))
    for kind in ("encoder", "decoder", "cross"):
        for name, (hits, counts) in _patterns(kind, weights, src, dec, ids, special)[0].items():
            assert hits.device == counts.device == _ratio(hits, counts).device == META, (kind, name)
    alignment = torch.empty(2, 3, 3, dtype=torch.bool, device=META)
    counted = [_alignment_counts(weights, alignment), _arc_counts(weights, [[(0, 1, "det")], []], "det")]
    for hits, counts in counted:
        low, high = bootstrap_interval(hits, counts, n=10)
        assert hits.device == counts.device == low.device == high.device == META
