"""Activation patching of a decoder-only model's prompt pairs (one token swapped): the exact cases, single patches
redone by hand with one hook each, the answer and wrong tokens, chunking, the model left as it was, bad inputs."""

from __future__ import annotations

import pytest
import torch
from decoder_models import build_pair
from explain_helpers import tiny_model

from transformer.explain import activation_patching, lm_activation_patching

CLEAN = torch.tensor([[1, 5, 6, 7, 8, 9, 10]])
CORRUPT = torch.tensor([[1, 5, 11, 7, 8, 9, 10]])  # the token at position 2 swapped, as a name in an IOI prompt
SWAPPED, LAST = 2, 6
# The batched forward may sum one row of a matrix product in another order than its neighbours: "exact" means
# within float64 rounding of logits of size ~10 (a few 1e-15), divided by a logit difference of order 1.
EXACT = 1e-12


@pytest.fixture(scope="module")
def pair():
    return build_pair("llama")  # grouped-query attention: 4 query heads on 2 key/value heads


@pytest.fixture(scope="module")
def result(pair):
    return lm_activation_patching(pair.ours, CLEAN, CORRUPT)


def test_sites_and_columns(pair, result):
    c = pair.ours.config
    assert list(result.columns) == ["site", "index", "position", "effect", "component", "kind", "layer", "head"]
    assert len(result) == c.n_decoder_layers * 7 + c.n_decoder_layers * c.n_heads * 7
    assert set(result.kind) == {"decoder"} and not result.site.str.contains("cross|encoder").any()


def test_exact_cases(pair, result):
    top = pair.ours.config.n_decoder_layers - 1
    last = result[result.site == f"decoder.{top}.output"].set_index("position").effect
    assert last[LAST] == pytest.approx(1.0, abs=EXACT)  # the clean final state at the last position: clean logits
    assert last.drop(LAST).abs().max() <= EXACT  # the last layer elsewhere reaches no other position's logits
    before = result[result.position < SWAPPED]
    assert len(before) and before.effect.abs().max() <= EXACT  # clean and corrupted agree before the swap
    at_swap = result[(result.site == "decoder.0.output") & (result.position == SWAPPED)].effect.item()
    assert abs(at_swap) > 1e-6  # the swapped token matters, through self-attention


def patched_by_hand(model, module, position, answer, wrong, head=None, pre=False):
    """The effect of one patch, from three separate batch-1 forwards and one hook each."""
    d_k = model.config.d_k
    part = slice(None) if head is None else slice(head * d_k, (head + 1) * d_k)
    saved = {}

    def save(_m, args, output=None):
        saved["x"] = (args[0] if pre else output).clone()

    def put(_m, args, output=None):
        x = (args[0] if pre else output).clone()
        x[0, position, part] = saved["x"][0, position, part]
        return (x,) if pre else x

    def run(ids, hook=None):
        handle = None
        if hook is not None:
            handle = module.register_forward_pre_hook(hook) if pre else module.register_forward_hook(hook)
        try:
            with torch.no_grad():
                logits = model.lm(ids)[0, -1]
            return float(logits[answer] - logits[wrong])
        finally:
            if handle is not None:
                handle.remove()

    clean, corrupt = run(CLEAN, save), run(CORRUPT)
    return (run(CORRUPT, put) - corrupt) / (clean - corrupt)


@pytest.mark.parametrize(("site", "head", "position"), [
    ("decoder.0.output", None, 4), ("decoder.1.output", None, SWAPPED), ("decoder.2.self_attn.heads", 3, LAST),
    ("decoder.1.self_attn.heads", 0, 5)])
def test_single_patches_against_separate_runs(pair, result, site, head, position):
    model = pair.ours
    layer = model.decoder.layers[int(site.split(".")[1])]
    answer, wrong = result.attrs["answer"], result.attrs["wrong"]
    if head is None:
        expected = patched_by_hand(model, layer, position, answer, wrong)
    else:
        expected = patched_by_hand(model, layer.self_attn.w_o, position, answer, wrong, head=head, pre=True)
    index = position if head is None else head
    got = result[(result.site == site) & (result["index"] == index) & (result.position == position)].effect.item()
    assert got == pytest.approx(expected, abs=1e-9)


def test_answer_and_wrong(pair, result):
    with torch.no_grad():
        clean, corrupt = pair.ours.lm(CLEAN)[0, -1], pair.ours.lm(CORRUPT)[0, -1]
    answer = int(clean.argmax())
    ranked = [int(i) for i in corrupt.argsort(descending=True) if int(i) != answer]
    assert result.attrs["answer"] == answer and result.attrs["wrong"] == ranked[0]
    assert result.attrs["clean_difference"] == pytest.approx(float(clean[answer] - clean[ranked[0]]), abs=EXACT)
    given = lm_activation_patching(pair.ours, CLEAN, CORRUPT, answer=7, wrong=11, chunk_size=40)
    assert (given.attrs["answer"], given.attrs["wrong"]) == (7, 11)
    top = pair.ours.config.n_decoder_layers - 1
    last = given[(given.site == f"decoder.{top}.output") & (given.position == LAST)].effect.item()
    assert last == pytest.approx(1.0, abs=EXACT)


def test_chunks_give_the_same_effects(pair, result):
    chunked = lm_activation_patching(pair.ours, CLEAN, CORRUPT, chunk_size=9)
    torch.testing.assert_close(torch.tensor(chunked.effect.to_numpy()), torch.tensor(result.effect.to_numpy()),
                               atol=1e-10, rtol=0)


def test_model_unchanged(pair):
    model = pair.ours
    before = {k: v.clone() for k, v in model.state_dict().items()}
    lm_activation_patching(model, CLEAN, CORRUPT, chunk_size=50)
    assert all(not (m._forward_hooks or m._forward_pre_hooks) for m in model.modules()) and not model.training
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_bad_inputs(pair):
    model = pair.ours
    with pytest.raises(ValueError, match="equal length"):
        lm_activation_patching(model, CLEAN, CORRUPT[:, 1:])
    with pytest.raises(ValueError, match="identical"):
        lm_activation_patching(model, CLEAN, CLEAN.clone())
    with pytest.raises(ValueError, match="B = 1"):
        lm_activation_patching(model, CLEAN.repeat(2, 1), CORRUPT.repeat(2, 1))
    with pytest.raises(ValueError, match="same token"):
        lm_activation_patching(model, CLEAN, CORRUPT, answer=3, wrong=3)
    with pytest.raises(ValueError, match="answer must be a token id"):
        lm_activation_patching(model, CLEAN, CORRUPT, answer=48)
    with pytest.raises(ValueError, match=r"clean_ids must hold at least one id in 0\.\.47, got \[99\]"):
        lm_activation_patching(model, torch.tensor([[1, 99]]), torch.tensor([[1, 5]]))
    with pytest.raises(ValueError, match="no source: patch its prompts with lm_activation_patching"):
        activation_patching(model, CLEAN, CORRUPT, CLEAN, 1)
    with pytest.raises(ValueError, match="takes a decoder-only model"):
        lm_activation_patching(tiny_model(), CLEAN, CORRUPT)
