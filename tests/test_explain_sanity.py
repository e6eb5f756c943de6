"""The model randomization test (Adebayo et al. 2018): cascading randomization of a copy of the model."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from explain_helpers import batch, tiny_model

from transformer.explain import RANDOM_LIKE_THRESHOLD, attribute, randomization_check
from transformer.explain.sanity import cascade


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
    assert labels == ["generator", "decoder layer 1", "decoder layer 0", "encoder layer 1", "encoder layer 0",
                      "embeddings"]
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
        for name in names:
            _randomize(randomized, name, generator)
    trained = attribute(model, src, tgt, "norm").source
    after = attribute(randomized, src, tgt, "norm").source
    real = trained.ne(0)
    expected = pd.Series(trained[real].numpy()).corr(pd.Series(after[real].numpy()), method="spearman")
    last = frame[frame.layers_randomized == frame.layers_randomized.max()].rank_correlation.item()
    assert abs(last - expected) < 1e-12
    assert frame.random_like.eq(last >= RANDOM_LIKE_THRESHOLD).all()
