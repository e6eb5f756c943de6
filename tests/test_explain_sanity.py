"""The model randomization test (Adebayo et al. 2018): cascading randomization of a copy of the model."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from explain_helpers import batch, tiny_model
from family_models import NAMES, build_pair

from transformer.explain import RANDOM_LIKE_THRESHOLD, attribute, randomization_check
from transformer.explain.sanity import cascade, randomized_copies
from transformer.network.config import TransformerConfig
from transformer.network.model import Transformer, init_parameters


def test_cascade_runs_output_first_and_never_touches_the_model():
    model = tiny_model(n_encoder_layers=2, n_decoder_layers=2)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    src, tgt = batch()
    told: list = []
    frame = randomization_check(model, src, tgt, ["attention", "saliency"],
                                progress=lambda share, what: told.append((share, what)))
    labels = [label for label, _ in cascade(model)]
    assert told == [(0.0, "the trained model's maps"),  # progress: before each step, then done
                    *((step / 7, f"{label} randomized") for step, label in enumerate(labels, start=1)), (1.0, "done")]
    assert labels == ["generator", "decoder layer 1 + final norm", "decoder layer 0", "encoder layer 1 + final norm",
                      "encoder layer 0", "embeddings"]
    assert len(frame) == 2 * (1 + len(labels))
    assert list(frame.columns) == ["method", "layers_randomized", "randomized", "rank_correlation", "random_like"]
    assert (frame[frame.layers_randomized == 0].rank_correlation == 1.0).all()
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # the model passed in is intact
    # cross-attention does not read the generator: its map is the same after step 1, then changes
    attention = frame[frame.method == "attention"].set_index("layers_randomized").rank_correlation
    assert attention[1] == pytest.approx(1.0) and attention[len(labels)] < 0.9


def test_rank_correlation_is_spearman_of_the_real_cells():
    """Against pandas' own Spearman on the flattened real cells of the trained and the fully randomized maps,
    the latter recomputed on a copy randomized by hand with the same generator."""
    import copy

    from transformer.explain.sanity import _randomize

    model = tiny_model(seed=4)
    src, tgt = batch()
    frame = randomization_check(model, src, tgt, ["norm"], seed=7)
    randomized = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(7)
    for _, names in cascade(randomized):
        _randomize(randomized, names, generator)
    trained = attribute(model, src, tgt, "norm").source
    after = attribute(randomized, src, tgt, "norm").source
    real = trained.ne(0)
    expected = pd.Series(trained[real].numpy()).corr(pd.Series(after[real].numpy()), method="spearman")
    last = frame[frame.layers_randomized == frame.layers_randomized.max()].rank_correlation.item()
    assert abs(last - expected) < 1e-12
    assert frame.random_like.eq(last >= RANDOM_LIKE_THRESHOLD).all()


def _trained(model: Transformer) -> Transformer:
    """``model`` with every parameter moved off its initial value, as training leaves it (LayerNorms too,
    which start at the constants 1 and 0)."""
    generator = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 + torch.rand(p.shape, generator=generator, dtype=p.dtype))
    return model


@pytest.mark.parametrize("changes", [{}, {"final_norm": False, "tying": "generator"}, {"norm_first": True}])
def test_the_cascade_randomizes_every_parameter(changes: dict):
    """Every parameter, the stacks' final norms included, is in some step, and none keeps its trained value
    after the last step; the labels name the final norms where the model has them."""
    config = TransformerConfig(src_vocab_size=12, tgt_vocab_size=12, d_model=8, n_heads=2, n_layers=2,
                               n_decoder_layers=3, d_ff=16, dropout=0.0, max_len=32, **changes)
    model = _trained(Transformer(config).double().eval())
    steps = cascade(model)
    covered = {id(p) for _, names in steps for name in names for p in model.get_submodule(name).parameters()}
    assert covered == {id(p) for p in model.parameters()}
    assert sum("final norm" in label for label, _ in steps) == (2 if config.final_norm else 0)
    *_, (label, randomized) = randomized_copies(model, seed=3)
    assert label == "embeddings"
    trained = dict(model.named_parameters())
    for name, p in randomized.named_parameters():
        assert not p.eq(trained[name]).any(), name  # no value is left as trained


@pytest.mark.parametrize("name", [*NAMES, *(f"lm:{n}" for n in ("gpt2", "llama", "qwen3", "gemma2"))])
def test_the_cascade_re_initialises_every_named_parameter_of_every_family(name: str):
    """The family models' own parameters (T5's relative position bias tables, BART's and mBART's learned position
    tables and embedding norms) are in some step too, read off ``named_parameters`` so that a family added to
    ``family_models`` is covered by this test: no value keeps what the (random, norms away from 1 and 0) weights
    held."""
    if name.startswith("lm:"):  # the decoder-only families: one stack, one embedding
        import decoder_models

        model = decoder_models.build_pair(name[3:]).ours
    else:
        model = build_pair(name).ours
    steps = cascade(model)
    covered = {id(p) for _, names in steps for module in names for p in model.get_submodule(module).parameters()}
    missing = [n for n, p in model.named_parameters() if id(p) not in covered]
    assert not missing, f"{name}: no step randomizes {missing}"
    *_, (_, randomized) = randomized_copies(model, seed=3)
    trained = dict(model.named_parameters())
    kept = [n for n, p in randomized.named_parameters() if p.eq(trained[n]).any()]
    assert not kept, f"{name}: still as trained after every step: {kept}"


def test_randomized_norms_are_reset_to_their_initial_constants():
    model = _trained(tiny_model())
    *_, (_, randomized) = randomized_copies(model)
    for name in ("encoder.norm", "decoder.norm", "decoder.layers.0.feed_forward_residual.norm"):
        norm = randomized.get_submodule(name)
        assert norm.weight.eq(1).all() and norm.bias.eq(0).all(), name


def test_the_init_rule_is_pinned():
    """``init_parameters`` (the model's init and the randomization's) draws what ``reset_parameters`` always has:
    a fingerprint of the weights for seed 0, taken before the rule moved into one function."""
    config = TransformerConfig(src_vocab_size=12, tgt_vocab_size=10, d_model=8, n_heads=2, n_layers=1, d_ff=16,
                               tying="generator")
    model = Transformer(config)
    model.reset_parameters(torch.Generator().manual_seed(0))
    assert model.src_embed.weight.flatten()[:3].tolist() == pytest.approx(
        [-0.39804449677467346, -0.4074208438396454, -0.08859290927648544], abs=1e-7)
    assert model.generator.bias[:3].tolist() == pytest.approx(
        [-0.18515008687973022, 0.2912496030330658, 0.18703389167785645], abs=1e-7)
    assert sum(p.double().abs().sum() for p in model.parameters()).item() == pytest.approx(446.0850600381964,
                                                                                           abs=1e-9)


def test_init_parameters_draws_only_the_chosen_parameters_by_their_first_owners_rule():
    """With ``only``, the others keep their values; a tied matrix named through the generator is drawn by the
    embeddings' rule (its first owner), N(0, 1/d_model), not Xavier."""
    config = TransformerConfig(src_vocab_size=400, tgt_vocab_size=400, d_model=64, n_heads=2, n_layers=1, d_ff=16,
                               tying="all")
    model = _trained(Transformer(config))
    before = {k: v.clone() for k, v in model.named_parameters()}
    init_parameters(model, generator=torch.Generator().manual_seed(0), only=[model.generator.weight])
    changed = {k for k, v in model.named_parameters() if not torch.equal(v, before[k])}
    assert changed == {"src_embed.weight"}  # the tied matrix's one name
    assert model.generator.weight.std().item() == pytest.approx(64**-0.5, rel=0.05)  # Xavier: sqrt(2/464) ≈ 0.066


def test_the_randomization_check_runs_on_a_language_model():
    """A prompt and its continuation (``lm_pair``): the trained model's maps against the randomized copies'."""
    import decoder_models

    from transformer.explain import lm_pair

    model = decoder_models.build_pair("qwen3").ours
    ids, _ = decoder_models.batch(length=12)
    src, tgt = lm_pair(ids[:1, :8], ids[:1, 8:])
    frame = randomization_check(model, src, tgt, ["saliency", "attention"], seed=1)
    steps = len(cascade(model))
    assert len(frame) == 2 * (steps + 1) and frame.rank_correlation.between(-1, 1).all()
