"""What a decoder-only model's heads look at: the scores as pure functions of attention weights and token ids.

Every score is a share of attention weight, averaged over the queries for which it is defined, and kept as
per-sequence sums (hits) and query counts so that the score of a batch is a ratio of sums and a bootstrap over
sequences gives its interval (head_baselines.py). Weights are (B, L, H, T, T): sequence, layer, head, query i,
key j; ids (B, T); ``visible`` (L, T, T) says which keys each layer's query may see (causal, within a sliding
window; ``visible_keys``). A query counts for a score only where at least one of its target keys is visible.

- ``previous_token``: a_{i,i-1}, over the queries i >= 1 (Voita et al. 2019's positional head; the first half of
  Olsson et al.'s induction circuit);
- ``duplicate_token``: the weight on earlier occurrences of the query's own token, sum over j < i with
  ids_j = ids_i, over the queries that have one (TransformerLens's ``duplicate_token_head``);
- ``induction`` (= prefix matching, Olsson et al. 2022, "In-context Learning and Induction Heads"): the weight on
  the tokens right after an earlier occurrence of the query's token, sum over j <= i with ids_{j-1} = ids_i, over
  the queries that have one. On [BOS] r_1..r_n r_1..r_n of distinct random tokens that is, for each query of the
  second repeat, the key n - 1 back. TransformerLens's ``detect_head(..., "induction_head")`` (head_detector.py,
  ``error_measure="mul"``) marks the same cells (its duplicate pattern shifted one key right, lower triangle)
  but divides by the sum of all the attention, i.e. by T rows: its score is ours times (queries counted / T),
  about half of ours on a repeated sequence, since the first repeat cannot score. Its tutorial's stripe
  (``pattern.diagonal(offset=1-n)``) averages n + 2 cells, two of them first-repeat queries; ours averages the n
  second-repeat queries only;
- ``sink``: the weight on the first token, a_{i,0}, over the queries i >= 1 that see it (Xiao et al. 2023,
  "Efficient Streaming Language Models with Attention Sinks": most heads of a trained model park weight there,
  whatever the token);
- ``copying`` (``copying_counts``): whether the head's value path raises the logit of the token it attends to.

Chance (``chance_weights``): a head that spreads its weight evenly over its visible keys, scored by the same
functions with the same ids: previous token 1/|keys(i)|, sink 1/|keys(i)|, duplicate and induction (visible
targets)/|keys(i)|, each averaged over the same queries.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from ..network.masks import causal_mask

ATTENTION_SCORES = ("previous_token", "duplicate_token", "induction", "sink")


def visible_keys(t: int, windows: Sequence[int | None]) -> Tensor:
    """(L, T, T) bool: key j is visible to query i in layer l (j <= i, and i - j < window where the layer has one)."""
    return torch.stack([causal_mask(t, t, None, window)[0, 0] for window in windows])


def chance_weights(visible: Tensor) -> Tensor:
    """visible (L, T, T) -> (1, L, 1, T, T): each query's weight spread evenly over its visible keys."""
    uniform = visible.double()
    return (uniform / uniform.sum(-1, keepdim=True))[None, :, None]


def targets(name: str, ids: Tensor, visible: Tensor) -> Tensor:
    """The keys a head with score ``name`` attends to: (B, L, T, T) bool, query i's targets in row i."""
    t = ids.size(1)
    i = torch.arange(t)[:, None]
    j = torch.arange(t)[None, :]
    same = ids[:, :, None] == ids[:, None, :]  # (B, T, T): ids_i == ids_j
    if name == "previous_token":
        target = (j == i - 1)[None]
    elif name == "duplicate_token":
        target = same & (j < i)
    elif name == "induction":  # key j follows an earlier occurrence j - 1 < i of the query's token
        after = torch.zeros_like(same)
        after[:, :, 1:] = same[:, :, :-1]  # after[b, i, j] = (ids_i == ids_{j-1})
        target = after  # j <= i: the causal mask of ``visible`` below
    elif name == "sink":
        target = ((j == 0) & (i >= 1))[None]
    else:
        raise ValueError(f"score must be one of {ATTENTION_SCORES}, got {name!r}")
    return (target[:, None] & visible[None]).expand(ids.size(0), -1, -1, -1)  # (B, L, T, T)


def attention_counts(name: str, weights: Tensor, ids: Tensor, visible: Tensor | None = None
                     ) -> tuple[Tensor, Tensor]:
    """weights (B|1, L, H|1, T, T), ids (B, T), visible (L, T, T) (default: causal, no window) -> per sequence,
    layer and head the weight on ``targets`` summed over the queries that have a visible target (B, L, H), and
    how many such queries there are (B, L)."""
    if visible is None:
        visible = visible_keys(ids.size(1), [None] * weights.size(1))
    target = targets(name, ids.cpu(), visible.cpu()).to(weights.device)  # (B, L, T, T)
    counted = target.any(-1)  # (B, L, T): the queries with a visible target
    on_target = (weights * target[:, :, None].to(weights.dtype)).sum(-1)  # (B, L, H, T)
    hits = (on_target * counted[:, :, None].to(weights.dtype)).sum(-1)
    return hits.double(), counted.sum(-1).double()


def ratio(hits: Tensor, counts: Tensor) -> Tensor:
    """Summed hits over summed counts: (B, L, H), (B, L) -> (L, H); NaN where nothing was counted (0 / 0)."""
    return hits.sum(0) / counts.sum(0)[:, None]


def pattern_scores(weights: Tensor, ids: Tensor, visible: Tensor | None = None) -> dict[str, Tensor]:
    """weights (B, L, H, T, T), ids (B, T) -> each of ATTENTION_SCORES per (layer, head), (L, H)."""
    return {name: ratio(*attention_counts(name, weights, ids, visible)) for name in ATTENTION_SCORES}


def copying_counts(logits: Tensor) -> tuple[Tensor, Tensor]:
    """logits (B, ..., n, n), row j the logits a head writes when it attends only to key j, column k those of the
    token at key k (the n keys hold n distinct tokens) -> per sequence the summed percentile of the attended token
    (column j of row j) among the n - 1 others, a tie counting half (B, ...), and n (B,).

    1 = the head always raises the token it reads above every other token of the sequence; 0.5 = what a head blind
    to the token it reads gets on average over uniformly drawn tokens (for any fixed row, the mean percentile of a
    random column is exactly one half); 0 = it always lowers it below all of them."""
    n = logits.size(-1)
    if n < 2:
        raise ValueError(f"copying compares the attended token with the others: n >= 2 keys, got {n}")
    own = logits.diagonal(dim1=-2, dim2=-1)[..., None]  # (B, ..., n, 1)
    others = ~torch.eye(n, dtype=torch.bool, device=logits.device)
    below = ((logits < own) & others).sum(-1) + 0.5 * ((logits == own) & others).sum(-1)  # (B, ..., n)
    hits = below.double().sum(-1) / (n - 1)
    return hits, torch.full((logits.size(0),), float(n), dtype=torch.float64, device=logits.device)
