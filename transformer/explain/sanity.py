"""The model randomization test: Adebayo, Gilmer, Muelly, Goodfellow, Hardt & Kim 2018, "Sanity Checks for
Saliency Maps".

An explanation of a model should depend on what the model learned. Randomize the model's layers one at a
time, cascading from the output down (the generator first, then the decoder's layers from the last, then
the encoder's from the last, then the embeddings), recompute each method's map after every step, and rank
-correlate it with the trained model's map (Spearman's ρ over the real cells, as the paper does). A method
whose map stays similar once every layer holds random weights explains the input's structure, not the
model: ``randomization_check`` marks it (``RANDOM_LIKE_THRESHOLD``).

Randomized weights are drawn as the model is initialised (``Transformer.reset_parameters`` rules per
parameter), from a private generator seeded by ``seed``; the layers are randomized in a copy of the model,
never in the model passed in. In a model whose generator is tied to the embeddings (``generator_tied``), the
first step re-draws that shared matrix, embeddings included.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import pandas as pd
import torch
from torch import Tensor, nn

from ..network.model import Transformer
from .agreement import agreement
from .attribution import attribute
from .progress import Progress, tell

RANDOM_LIKE_THRESHOLD = 0.5  # ρ with every layer randomized at or above this: the map does not need the training


def cascade(model: Transformer) -> list[tuple[str, list[str]]]:
    """The randomization steps, output first: (label, the module names randomized at that step)."""
    c = model.config
    steps = [("generator", ["generator"])]
    steps += [(f"decoder layer {i}", [f"decoder.layers.{i}"]) for i in reversed(range(c.n_decoder_layers))]
    steps += [(f"encoder layer {i}", [f"encoder.layers.{i}"]) for i in reversed(range(c.n_encoder_layers))]
    steps.append(("embeddings", ["src_embed", "tgt_embed"]))
    return steps


def randomization_check(model: Transformer, src_ids: Tensor, tgt_ids: Tensor, methods: Sequence[str], *,
                        seed: int = 0, progress: Progress | None = None, **options) -> pd.DataFrame:
    """-> DataFrame: method, layers_randomized (0 = the trained model), randomized (the step's label),
    rank_correlation with the trained model's map (over every sentence's real cells), random_like (True on
    every row of a method whose map keeps ρ >= RANDOM_LIKE_THRESHOLD with everything randomized).

    ``options`` go to ``attribute`` (e.g. ``n_steps`` for integrated gradients). ``progress`` (progress.py) is
    told before the trained model's maps and before each step of the cascade.
    """
    if not methods:
        raise ValueError("name at least one method to check")
    steps = cascade(model)
    tell(progress, 0.0, "the trained model's maps")
    trained = {m: attribute(model, src_ids, tgt_ids, m, **_own(m, options)).source for m in methods}
    copy_ = copy.deepcopy(model)  # the randomized copy; the model passed in is never touched
    generator = torch.Generator().manual_seed(seed)
    rows = [{"method": m, "layers_randomized": 0, "randomized": "nothing", "rank_correlation": 1.0}
            for m in methods]
    for step, (label, names) in enumerate(steps, start=1):
        tell(progress, step / (len(steps) + 1), f"{label} randomized")
        for name in names:
            _randomize(copy_, name, generator)
        for m in methods:
            maps = attribute(copy_, src_ids, tgt_ids, m, **_own(m, options)).source
            rows.append({"method": m, "layers_randomized": step, "randomized": label,
                         "rank_correlation": _correlation(trained[m], maps)})
    frame = pd.DataFrame(rows)
    last = frame[frame.layers_randomized == frame.layers_randomized.max()].set_index("method").rank_correlation
    frame["random_like"] = frame.method.map(lambda m: bool(last[m] >= RANDOM_LIKE_THRESHOLD))
    tell(progress, 1.0, "done")
    return frame


def _own(method: str, options: dict) -> dict:
    return options if method == "integrated_gradients" else {}


def _correlation(trained: Tensor, randomized: Tensor) -> float:
    """Spearman's ρ between two (B, T-1, S) maps over the cells that are real in the trained one."""
    mask = trained.ne(0)
    if not mask.any():
        return float("nan")
    table = agreement({"trained": trained[mask][None], "randomized": randomized[mask][None]},
                      mask=torch.ones(1, int(mask.sum()), dtype=torch.bool))
    return float(table.loc["trained", "randomized"])


def _randomize(model: Transformer, name: str, generator: torch.Generator) -> None:
    """New random weights for every parameter under ``name``, by the rules of ``Transformer.reset_parameters``."""
    module = model.get_submodule(name)
    d_model = model.config.d_model
    with torch.no_grad():
        for full, p in module.named_parameters(prefix=name):
            owner, _, kind = full.rpartition(".")
            if "embed" in full:
                nn.init.normal_(p, std=d_model**-0.5, generator=generator)
            elif p.dim() > 1:
                nn.init.xavier_uniform_(p, generator=generator)
            elif owner.endswith("norm"):
                nn.init.ones_(p) if kind == "weight" else nn.init.zeros_(p)
            else:
                bound = model.get_submodule(owner).weight.size(1) ** -0.5
                nn.init.uniform_(p, -bound, bound, generator=generator)
