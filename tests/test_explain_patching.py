"""Activation patching: the cases whose effect is known exactly, single patches redone by hand
with one hook each, chunking, the model left as it was, and bad inputs."""

from __future__ import annotations

import pytest
import torch
from explain_helpers import tiny_model

from transformer.explain import activation_patching
from transformer.explain.patching import _wrong_token
from transformer.network.interventions import check_site

CLEAN = torch.tensor([[5, 6, 7, 8, 3]])
CORRUPT = torch.tensor([[9, 6, 4, 8, 3]])
TGT = torch.tensor([[2, 8, 7, 6, 5, 3]])  # decoder reads 5 positions
POSITION = 2
# The batched forward puts every copy in one matrix product; a row may be summed in another
# order than its neighbours (last-bit differences), so "exact" means within float64 rounding.
EXACT = 1e-12


@pytest.fixture(scope="module")
def result():
    return activation_patching(tiny_model(), CLEAN, CORRUPT, TGT, POSITION)


def test_sites_and_columns(result):
    assert list(result.columns) == ["site", "index", "position", "effect", "component", "kind", "layer", "head"]
    # 2 layers x (5 source + 5 target positions) outputs; 2 heads x 2 layers x 5 positions x 3 kinds
    assert len(result) == 2 * (5 + 5) + 2 * 2 * 5 * 3
    assert {"encoder.0.output", "decoder.1.output", "encoder.0.self_attn.heads", "decoder.1.cross_attn.heads",
            "decoder.0.self_attn.heads"} <= set(result.site)
    assert all(check_site(name, 0) for name in set(result.site))  # the network's own names, each indexable
    heads, outputs = result[result.component == "head"], result[result.component == "layer_output"]
    assert (heads["index"] == heads["head"]).all() and set(heads["index"]) == {0, 1}  # a head: the index on its site
    assert (outputs["index"] == outputs["position"]).all()  # an output's index is a position


def test_exact_cases(result):
    last = result[result.site == "decoder.1.output"].set_index("position").effect
    assert last[POSITION] == pytest.approx(1.0, abs=EXACT)  # the clean final state at the row: clean logits
    assert last.drop(POSITION).abs().max() <= EXACT  # the last layer elsewhere reaches no other row
    later = result[(result.kind != "encoder") & (result["position"] > POSITION)]
    assert len(later) and later.effect.abs().max() <= EXACT  # the causal mask: later positions cannot matter
    earlier = result[(result.site == "decoder.0.output") & (result["position"] < POSITION)]
    assert earlier.effect.abs().min() > 1e-6  # earlier positions do matter, through self-attention


def patched_by_hand(model, module, position, head=None, pre=False):
    """The effect of one patch, from three separate batch-1 forwards and one hook each."""
    d_k = model.config.d_model // model.config.n_heads
    part = slice(None) if head is None else slice(head * d_k, (head + 1) * d_k)
    saved = {}

    def save(_m, args, output=None):
        saved["x"] = (args[0] if pre else output).clone()

    def put(_m, args, output=None):
        x = (args[0] if pre else output).clone()
        x[0, position, part] = saved["x"][0, position, part]
        return (x,) if pre else x

    def run(src, hook=None):
        handle = None
        if hook is not None:
            handle = module.register_forward_pre_hook(hook) if pre else module.register_forward_hook(hook)
        try:
            with torch.no_grad():
                return model(src, TGT[:, :-1])[0, POSITION]
        finally:
            if handle is not None:
                handle.remove()

    clean, corrupt = run(CLEAN, save), run(CORRUPT)
    patched = run(CORRUPT, put)
    answer = int(TGT[0, POSITION + 1])
    # the wrong token, pinned without the module's helper: the corrupted run's most likely token that is
    # neither padding (id 0) nor the answer
    ranked = [int(i) for i in corrupt.argsort(descending=True) if int(i) not in (0, answer)]
    wrong = ranked[0]
    assert wrong == _wrong_token(corrupt, answer, 0)

    def difference(logits):
        return float(logits[answer] - logits[wrong])

    return (difference(patched) - difference(corrupt)) / (difference(clean) - difference(corrupt))


@pytest.mark.parametrize(("site", "head", "position"), [
    ("encoder.0.output", None, 1), ("encoder.1.self_attn.heads", 0, 3), ("decoder.0.output", None, 0),
    ("decoder.1.cross_attn.heads", 1, 2), ("decoder.0.self_attn.heads", 0, 1)])
def test_single_patches_against_separate_runs(result, site, head, position):
    model = tiny_model()
    parts = site.split(".")
    layer = getattr(model, parts[0]).layers[int(parts[1])]
    if parts[2] == "output":
        expected = patched_by_hand(model, layer, position)
    else:
        expected = patched_by_hand(model, getattr(layer, parts[2]).w_o, position, head=head, pre=True)
    index = position if head is None else head
    got = result[(result.site == site) & (result["index"] == index) & (result.position == position)].effect.item()
    assert got == pytest.approx(expected, abs=1e-9)


def test_chunks_give_the_same_effects(result):
    chunked = activation_patching(tiny_model(), CLEAN, CORRUPT, TGT, POSITION, chunk_size=7)
    torch.testing.assert_close(torch.tensor(chunked.effect.to_numpy()), torch.tensor(result.effect.to_numpy()),
                               atol=1e-10, rtol=0)


def test_wrong_token_skips_the_answer_and_padding():
    logits = torch.tensor([9.0, 1.0, 5.0, 4.0, 3.0])
    assert _wrong_token(logits, answer=4, pad_id=0) == 2  # PAD (id 0) never counts
    assert _wrong_token(logits, answer=2, pad_id=0) == 3  # the top token is the answer: take the second


def no_hooks(model):
    return all(not (m._forward_hooks or m._forward_pre_hooks) for m in model.modules())


def test_model_unchanged_even_after_an_exception(monkeypatch):
    model = tiny_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    activation_patching(model, CLEAN, CORRUPT, TGT, POSITION)
    assert no_hooks(model) and not model.training
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())

    def broken(_x):
        raise RuntimeError("boom")

    monkeypatch.setattr(model.generator, "forward", broken)  # fails after every hook is in place
    with pytest.raises(RuntimeError, match="boom"):
        activation_patching(model, CLEAN, CORRUPT, TGT, POSITION)
    assert no_hooks(model)


def test_bad_inputs():
    model = tiny_model()
    with pytest.raises(ValueError, match="equal length"):
        activation_patching(model, CLEAN, CORRUPT[:, 1:], TGT, POSITION)
    for position in (-1, TGT.size(1) - 1):
        with pytest.raises(ValueError, match="position must be"):
            activation_patching(model, CLEAN, CORRUPT, TGT, position)
    with pytest.raises(ValueError, match="identical"):
        activation_patching(model, CLEAN, CLEAN.clone(), TGT, POSITION)
    with pytest.raises(ValueError, match="B = 1"):
        activation_patching(model, CLEAN.repeat(2, 1), CORRUPT.repeat(2, 1), TGT.repeat(2, 1), POSITION)
