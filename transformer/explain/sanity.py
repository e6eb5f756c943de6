"""The model randomization test: Adebayo, Gilmer, Muelly, Goodfellow, Hardt & Kim 2018, "Sanity Checks for
Saliency Maps".

An explanation of a model should depend on what the model learned. Randomize the model's layers one at a
time, cascading from the output down (the generator first, then the decoder's layers from the last, then
the encoder's from the last, then the embeddings), recompute each method's map after every step, and rank
-correlate it with the trained model's map (Spearman's ρ over the real cells, as the paper does). A method
whose map stays similar once every layer holds random weights explains the input's structure, not the
model: ``randomization_check`` marks it (``RANDOM_LIKE_THRESHOLD``).

Every parameter is randomized by the end (``cascade`` reads the model's ``named_parameters``, so a family's own
parameters are not missed): a stack's final LayerNorm (``encoder.norm``, ``decoder.norm``; none in post-LN Marian)
goes with the stack's top layer, whose output it normalises, and that step's label says so ("decoder layer 1 +
final norm"); what no layer holds (BART's learned position tables and embedding norms, T5's relative position
bias tables) goes with the embeddings, the input side, in the last step, whose label names it ("embeddings +
positional.src, ...").

What "randomized" means: re-initialised as the paper does, to the parameter's initial distribution, by the
model's own rule (``network.model.init_parameters``, the one place it is written): Xavier matrices,
N(0, 1/d_model) embeddings, U(±1/sqrt(fan_in)) biases. A LayerNorm's initial values are a constant,
γ = 1 and β = 0, not a draw: a "randomized" norm is reset to that plain standardisation, which erases what
it learned (its scale and shift) without adding noise. The values are drawn from a private CPU generator
seeded by ``seed`` and copied to the model's device, so a seed gives the same random weights on every
device; the layers are randomized in a copy of the model, never in the model passed in. In a model whose
generator is tied to the embeddings (``generator_tied``), the first step re-draws that shared matrix (by
the embeddings' rule, its first owner's), embeddings included.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence

import pandas as pd
import torch
from torch import Tensor

from ..network.model import Transformer, init_parameters
from .agreement import agreement
from .attribution import attribute, own_options
from .progress import Progress, tell

RANDOM_LIKE_THRESHOLD = 0.5  # ρ with every layer randomized at or above this: the map does not need the training


def cascade(model: Transformer) -> list[tuple[str, list[str]]]:
    """The randomization steps, output first: (label, the module names randomized at that step). Between them
    they hold every parameter of the model (``named_parameters``): a stack's final norm goes with its top layer,
    and the last step takes the embeddings with every parameter no layer holds (position tables, embedding norms,
    T5's relative bias tables: each stack's input side), its label naming them."""
    c = model.config

    def stack(side: str, n_layers: int) -> list[tuple[str, list[str]]]:
        steps = []
        for i in reversed(range(n_layers)):
            if i == n_layers - 1 and c.final_norm:
                steps.append((f"{side} layer {i} + final norm", [f"{side}.norm", f"{side}.layers.{i}"]))
            else:
                steps.append((f"{side} layer {i}", [f"{side}.layers.{i}"]))
        return steps

    steps = [("generator", ["generator"]), *stack("decoder", c.n_decoder_layers),
             *stack("encoder", c.n_encoder_layers)]
    embeddings = ["tgt_embed"] if c.decoder_only else ["src_embed", "tgt_embed"]  # a decoder-only model: one
    held = {id(p) for _, names in steps for name in [*names, *embeddings]
            for p in model.get_submodule(name).parameters()}
    rest = list(dict.fromkeys(name.rpartition(".")[0] for name, p in model.named_parameters() if id(p) not in held))
    label = "embeddings" + (f" + {', '.join(rest)}" if rest else "")
    return [*steps, (label, [*embeddings, *rest])]


def randomized_copies(model: Transformer, seed: int = 0) -> Iterator[tuple[str, Transformer]]:
    """Cascading randomization of a copy of ``model``: after each step of ``cascade``, (its label, the copy).
    The same copy each time, randomized one step further; ``model`` itself is never touched."""
    copy_ = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(seed)  # on the CPU whatever the model's device (module docstring)
    for label, names in cascade(model):
        _randomize(copy_, names, generator)
        yield label, copy_


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
    rows = [{"method": m, "layers_randomized": 0, "randomized": "nothing", "rank_correlation": 1.0}
            for m in methods]
    for step, (label, copy_) in enumerate(randomized_copies(model, seed), start=1):
        tell(progress, step / (len(steps) + 1), f"{label} randomized")
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
    return own_options(method, options)


def _correlation(trained: Tensor, randomized: Tensor) -> float:
    """Spearman's ρ between two (B, T-1, S) maps over the cells that are real in the trained one."""
    mask = trained.ne(0)
    if not mask.any():
        return float("nan")
    table = agreement({"trained": trained[mask][None], "randomized": randomized[mask][None]},
                      mask=torch.ones(1, int(mask.sum()), dtype=torch.bool))
    return float(table.loc["trained", "randomized"])


def _randomize(model: Transformer, names: Sequence[str], generator: torch.Generator) -> None:
    """New initial values for every parameter under the modules ``names`` (``init_parameters``' rules)."""
    chosen = [p for name in names for p in model.get_submodule(name).parameters()]
    init_parameters(model, generator=generator, only=chosen)
