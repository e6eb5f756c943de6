"""Value zeroing (Mohebbi et al. 2023) against a brute-force computation: for every layer and every token, a
whole forward of one sentence with that token's values zeroed, the distances computed by hand, rows
normalised and composed by explicit loops."""

from __future__ import annotations

import pytest
import torch
from explain_helpers import batch, t5_model, tiny_model

from transformer.explain import attribute
from transformer.network.interventions import intervene
from transformer.network.trace import Trace


def zeroed(position: int):
    def edit(values):
        values = values.clone()
        values[:, :, position] = 0
        return values
    return edit


def run(model, src, dec, edits=None) -> Trace:
    trace = Trace()
    with intervene(edits or {}), torch.no_grad():
        model(src, dec, trace=trace)
    return trace


def distance(a, b):  # rows of (T, D) -> (T,): 1 - cos
    return 1 - (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))


def brute_force(model, src, dec, only=None):
    """Value zeroing of one sentence, every layer rolled out; ``only``: decoder layer ``only``'s own normalised
    [C^ts | C^tt], with no roll-out through the encoder."""
    c = model.config
    clean = run(model, src, dec)
    s, t = src.size(1), dec.size(1)
    r_enc = torch.eye(s, dtype=torch.float64)
    for layer in range(c.n_encoder_layers):
        site, name = f"encoder.{layer}.self_attn.values", f"encoder.{layer}.output"
        scores = torch.stack([distance(run(model, src, dec, {site: zeroed(j)})[name][0], clean[name][0])
                              for j in range(s)], dim=1)  # (S, S): column j from zeroing j
        r_enc = (scores / scores.sum(-1, keepdim=True)) @ r_enc
    target, source = torch.eye(t, dtype=torch.float64), torch.zeros(t, s, dtype=torch.float64)
    for layer in range(c.n_decoder_layers):
        name = f"decoder.{layer}.output"
        columns = []
        for sublayer, n in (("self_attn", t), ("cross_attn", s)):
            site = f"decoder.{layer}.{sublayer}.values"
            columns += [distance(run(model, src, dec, {site: zeroed(j)})[name][0], clean[name][0]) for j in range(n)]
        scores = torch.stack(columns, dim=1)  # (T, T + S)
        scores = scores / scores.sum(-1, keepdim=True)
        self_part, cross_part = scores[:, :t], scores[:, t:]
        if layer == only:
            return cross_part, self_part
        target, source = self_part @ target, self_part @ source + cross_part @ r_enc
    return source, target


@pytest.mark.parametrize("family", ["paper", "t5"])
def test_value_zeroing_against_brute_force_on_each_sentence_of_a_padded_batch(family):
    """T5: the relative position bias is in the scores, so zeroing v_j is defined as ever; each layer must run
    again with the bias the forward added, which the brute force's whole forwards do by construction."""
    model = tiny_model(n_encoder_layers=2, n_decoder_layers=3) if family == "paper" else t5_model()
    src, tgt = batch()
    result = attribute(model, src, tgt, "value_zeroing")
    for b, (s, t) in enumerate(((5, 5), (3, 3))):  # real lengths of source and target in batch()
        source, target = brute_force(model, src[b:b + 1, :s], tgt[b:b + 1, :t - 1])
        torch.testing.assert_close(result.source[b, : t - 1, :s], source)
        torch.testing.assert_close(result.target[b, : t - 1, : t - 1], target)
        sums = result.source[b, : t - 1].sum(-1) + result.target[b, : t - 1].sum(-1)
        torch.testing.assert_close(sums, torch.ones_like(sums))  # rows of source + target sum to 1
        assert (result.source[b] >= 0).all() and (result.target[b] >= 0).all()


@pytest.mark.parametrize("layer", [0, 2, -2])
def test_value_zeroing_of_one_decoder_layer_against_brute_force(layer):
    model = tiny_model(n_encoder_layers=2, n_decoder_layers=3)
    src, tgt = batch()
    result = attribute(model, src, tgt, "value_zeroing", layer=layer)
    for b, (s, t) in enumerate(((5, 5), (3, 3))):
        source, target = brute_force(model, src[b:b + 1, :s], tgt[b:b + 1, :t - 1], only=layer % 3)
        torch.testing.assert_close(result.source[b, : t - 1, :s], source)
        torch.testing.assert_close(result.target[b, : t - 1, : t - 1], target)
