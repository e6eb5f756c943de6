"""Faithfulness of an attribution: does removing what a method ranks highest change the output?

ERASER's two measures (DeYoung et al. 2020, "ERASER: A Benchmark to Evaluate Rationalized NLP Models", section 4),
per explained row t (``attribute``'s rows: row t explains y = tgt_ids[:, t+1] given tgt_ids[:, :t+1] and the source),
with p(x) = softmax probability of y when the encoder reads source x and the decoder the unchanged prefix (teacher
forcing: only the source is perturbed):

    comprehensiveness_k = p(x) − p(x with the top-k% source tokens removed)        higher is better
    sufficiency_k       = p(x) − p(x with only the top-k% source tokens kept)       lower is better
    AOPC                = the mean over k ∈ FRACTIONS = {1, 5, 10, 20, 50}%         (ERASER's bins)

"Top-k%" is the n_k = ⌈k·n⌉ highest-scored of the n source tokens that may be removed (so at least one; 20 tokens:
1, 1, 2, 4, 10), ranked by the row's signed score (the tokens that push the prediction up come first; ties keep
source order). The soft variants (Zhao & Aletras 2023, "Incorporating Attribution Importance for Improving
Faithfulness Metrics") remove no whole token: each row's scores are scaled to w ∈ [0, 1] (min-max over the
removable tokens; all 1/2 where they are all equal), and every element of token j's embedding is kept with
probability 1 − w_j (soft comprehensiveness) or w_j (soft sufficiency), a dropped element taking the removal's
value, as the paper's Bernoulli mask on the embedding does (one draw, from the call's own generator). They are
reported as the same differences p(x) − p(x'), not normalised by a null input as the paper's Soft-NC / Soft-NS are,
so that the four numbers share one scale.

What "removed" means is the method's own baseline (``removal``): integrated gradients' baseline embedding (option
``baseline``: zero, ``<pad>`` or ``<unk>``), the zero embedding for input × gradient (its Σ e·∂f/∂e is the
first-order change from e to 0), and ``<unk>`` for every other method (occlusion's erasure; the attention family,
relevancy, ALTI+, value zeroing and saliency have no baseline of their own). A removal replaces the token's
embedding (the ``src.tokens`` site, before the √d_model scale and the positions), so the masks and positions stay.

Special tokens are never removed (``special``: default every position holding the model's eos id; the app passes
its tokenizer's specials, a language code or BART's ``<s>`` as well). ERASER's rationales are words of the text, and
a source without its ``</s>`` or language code is an input the model never saw: removing it measures that damage,
not the method, and would reward the methods that pile weight on ``</s>`` (integrated gradients, docs/explain.md).
Their scores are ignored by the ranking and they stay in every perturbed input, the "only top-k% kept" ones too.

The baseline every method must beat: a random ranking (and uniform random scores for the soft variants), the mean
of ``n_random`` draws from a ``torch.Generator`` seeded by ``seed``, local to the call (the global RNG is never
touched). One random draw serves every row of a sentence (the prefix is teacher-forced, so one perturbed source
gives every row's p): its expectation is that of a draw per row, at a fraction of the forwards. Every perturbed
input of a sentence, the method's, the random ones and the clean source, goes through the encoder in one batch
(chunked only past a memory budget, ``COPY_BUDGET``); identical hard perturbations run once, and so does a (copy,
row) pair that recurs. The decoder is causal, so a copy read at rows up to r runs positions 0..r only; copies are
sorted by that length and decoded in a few passes, each at its longest copy's length (``_passes``: many small
batches would leave the CPU's matrix products far below their peak). The generator reads only the states the pairs
need, all of them in one batch (chunked past the budget). None of this changes a number but by float rounding
(tests/test_explain_faithfulness.py runs one plain forward per pair beside it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import torch
from torch import Tensor

from ..network.config import TransformerConfig
from ..network.interventions import intervene
from ..network.model import Transformer
from .attribution import REGISTRY, Attribution
from .gradients import default_baseline
from .inputs import check_inputs
from .pairs import decoder_states, source_embedding
from .row_gradients import replacing

FRACTIONS = (0.01, 0.05, 0.10, 0.20, 0.50)  # ERASER's AOPC bins
N_RANDOM = 3  # random rankings averaged into the baseline (each costs 2 U + 2 copies read at every row)
REMOVALS = ("unk", "pad", "zero")
MEASURES = ("comprehensiveness", "sufficiency", "soft comprehensiveness", "soft sufficiency")
HIGHER_IS_BETTER = {"comprehensiveness": True, "sufficiency": False, "soft comprehensiveness": True,
                    "soft sufficiency": False}
COPY_BUDGET = 2**28  # bytes of activations one forward of copies may hold (``_chunk``), or of logits
PASS_COST = 64  # what one more decoder pass costs, in decoder tokens (``_passes``)


def removal(attribution: Attribution, config: TransformerConfig) -> str:
    """What removing a token means for the method that made ``attribution`` (its registry entry's ``removal``):
    "unk", "pad" or "zero"; integrated gradients' own baseline option, else the model's default baseline
    (``gradients.default_baseline``: one at which the model is smooth)."""
    removed = REGISTRY[attribution.method].removal
    if removed == "baseline":
        return str(attribution.options.get("baseline") or default_baseline(config))
    return removed


def counts(n: int, fractions: tuple[float, ...] = FRACTIONS) -> list[int]:
    """n_k = ⌈k·n⌉ tokens for each fraction k of n removable tokens (at least 1 where n ≥ 1)."""
    return [min(n, max(1, math.ceil(k * n - 1e-9))) if n else 0 for k in fractions]


def column(measure: str, fraction: float) -> str:
    """The table's column of ``measure`` at one fraction: "comprehensiveness@10%"."""
    return f"{measure}@{fraction:.0%}"


def faithfulness(model: Transformer, src_ids: Tensor, tgt_ids: Tensor, attribution: Attribution, *,
                 special: Tensor | None = None, baseline: str | None = None,
                 fractions: tuple[float, ...] = FRACTIONS, n_random: int = N_RANDOM, seed: int = 0) -> pd.DataFrame:
    """ERASER's comprehensiveness and sufficiency of ``attribution.source`` (B, T-1, S), hard and soft, beside a
    random ranking's (module docstring for the formulas).

    ``special`` (B, S) bool: positions never removed (default: the model's eos id, and a decoder-only model's bos
    id; padding never is). A decoder-only model's prompt is the source (pairs.py): only the prompt is perturbed,
    the continuation before each row is kept, as a target prefix is.
    ``baseline``: "unk", "pad" or "zero", overriding the method's own ``removal``.
    Returns one row per real (sentence, output row) and ranking ("method", then "random", the mean of ``n_random``
    draws): batch, row, target, p (the full source's probability), n (removable tokens), removal, then per measure
    its value at each fraction (``column``), its AOPC under its own name, and the two soft measures. Rows where the
    attribution is NaN (undefined) get NaN. Never changes ``model`` and touches no process-wide state.
    """
    check_inputs(model, src_ids, tgt_ids, None)
    source = attribution.source
    if tuple(source.shape) != (src_ids.size(0), tgt_ids.size(1) - 1, src_ids.size(1)):
        raise ValueError(f"the attribution's source has shape {tuple(source.shape)}, but these ids need "
                         f"(B, T-1, S) = {(src_ids.size(0), tgt_ids.size(1) - 1, src_ids.size(1))}")
    if n_random < 1:
        raise ValueError(f"n_random must be at least 1, got {n_random}")
    if not fractions or any(not 0 < k <= 1 for k in fractions):
        raise ValueError(f"fractions must lie in (0, 1], got {fractions}")
    kind = baseline if baseline is not None else removal(attribution, model.config)
    if kind not in REMOVALS:
        raise ValueError(f"baseline must be one of {', '.join(REMOVALS)}, got {kind!r}")
    c = model.config
    if special is None:
        special = (src_ids == c.eos_id) | ((src_ids == c.bos_id) if c.decoder_only else False)
    elif tuple(special.shape) != tuple(src_ids.shape) or special.dtype != torch.bool:
        raise ValueError(f"special must be a bool tensor of the source's shape {tuple(src_ids.shape)}")
    movable = (src_ids != c.pad_id) & ~special.to(src_ids.device)  # (B, S)
    if not movable.any(-1).all():
        raise ValueError("a source row has no token that may be removed (every real token is special)")
    generator = torch.Generator().manual_seed(seed)  # on the CPU: the same draws on every device
    frames = []
    for b in range(src_ids.size(0)):
        rows = (tgt_ids[b, 1:] != c.pad_id).nonzero(as_tuple=True)[0]  # (R,)
        if rows.numel() == 0:
            continue
        length = int(rows.max()) + 2  # the sentence's own target, its padding cut
        sentence = _Sentence(model, src_ids[b:b + 1], tgt_ids[b:b + 1, :length], movable[b], rows, kind, fractions)
        frames.append(sentence.table(b, source[b, rows].to(torch.float64), n_random, generator))
    return pd.concat(frames, ignore_index=True)


@dataclass
class _Sentence:
    """One sentence's perturbed inputs and the probabilities read off them."""

    model: Transformer
    src: Tensor  # (1, S)
    tgt: Tensor  # (1, T)
    movable: Tensor  # (S,) bool: the tokens that may be removed
    rows: Tensor  # (R,) the real rows
    kind: str  # the removal
    fractions: tuple[float, ...]

    def table(self, b: int, scores: Tensor, n_random: int, generator: torch.Generator) -> pd.DataFrame:
        """scores (R, S) of the real rows -> the rows of ``faithfulness``'s table for this sentence."""
        position = self.movable.nonzero(as_tuple=True)[0]  # (n,) the removable positions
        n, s = position.numel(), self.src.size(1)
        n_k = counts(n, self.fractions)
        unique = sorted(set(n_k))
        defined = ~scores.isnan().any(-1)  # (R,)
        device = self.src.device
        # Rankings: the method's per row, the random ones shared by every row.
        n_rows = self.rows.numel()
        ranked = scores[:, position].nan_to_num(0.0).argsort(dim=-1, descending=True, stable=True)  # (R, n)
        random_rank = torch.stack([torch.randperm(n, generator=generator) for _ in range(n_random)]).to(device)
        random_scores = torch.rand(n_random, n, generator=generator, dtype=torch.float64).to(device)
        per_row = 2 * len(unique)
        method_masks = self._hard(position[ranked], unique).view(n_rows, per_row, s)
        method_masks[~defined] = True  # an undefined row reads the clean copy (its values are NaN)
        hard = torch.cat([method_masks.view(-1, s), self._hard(position[random_rank], unique),
                          torch.ones(1, s, dtype=torch.bool, device=device)])  # (M, S): keep masks, clean last
        masks, which = hard.unique(dim=0, return_inverse=True)
        # (copy, row) pairs read: the method's copies at their own row, the random and clean ones at every row.
        hard_method = which[:n_rows * per_row]
        hard_random = which[n_rows * per_row:-1]
        clean = which[-1]
        weights = torch.cat([self._weights(scores[:, position], position), self._weights(random_scores, position)])
        chosen = torch.cat([defined.repeat_interleave(2), torch.ones(2 * n_random, dtype=torch.bool, device=device)])
        soft = self._soft(weights, generator)[chosen]  # (2 (R' + n_random), S, D): keep masks per element
        index = masks.size(0) + chosen.long().cumsum(0) - 1  # each soft copy's place among the copies
        soft_method = torch.where(chosen[:2 * n_rows], index[:2 * n_rows], clean)
        soft_random = index[2 * n_rows:]
        r = torch.arange(n_rows, device=device)
        pair_copy = torch.cat([hard_method, soft_method, hard_random.repeat_interleave(n_rows),
                               soft_random.repeat_interleave(n_rows), clean.repeat(n_rows)])
        pair_row = torch.cat([r.repeat_interleave(per_row), r.repeat_interleave(2),
                              r.repeat(hard_random.numel()), r.repeat(soft_random.numel()), r])
        p = self._probabilities(masks, soft, pair_copy, pair_row)
        u = len(unique)
        at = [unique.index(k) for k in n_k]
        i = 0

        def take(size: int) -> Tensor:
            nonlocal i
            part, i = p[i:i + size], i + size
            return part

        method_hard = take(n_rows * per_row).view(n_rows, u, 2)  # [..., 0] comprehensiveness, [..., 1] sufficiency
        method_soft = take(2 * n_rows).view(n_rows, 2)
        random_hard = take(n_random * per_row * n_rows).view(n_random, u, 2, n_rows).permute(0, 3, 1, 2).mean(0)
        random_soft = take(2 * n_random * n_rows).view(n_random, 2, n_rows).permute(0, 2, 1).mean(0)
        full = take(n_rows)  # (R,)
        frames = []
        for ranking, hard_p, soft_p in (("method", method_hard, method_soft), ("random", random_hard, random_soft)):
            data = {"batch": b, "row": self.rows.tolist(), "target": self.tgt[0, self.rows + 1].tolist(),
                    "ranking": ranking, "p": full.tolist(), "n": n, "removal": self.kind}
            for j, measure in enumerate(("comprehensiveness", "sufficiency")):
                drops = full[:, None] - hard_p[:, at, j]  # (R, K)
                if ranking == "method":
                    drops = drops.masked_fill(~defined[:, None], float("nan"))
                for f, fraction in enumerate(self.fractions):
                    data[column(measure, fraction)] = drops[:, f].tolist()
                data[measure] = drops.mean(-1).tolist()
            for j, measure in enumerate(("soft comprehensiveness", "soft sufficiency")):
                drop = full - soft_p[:, j]
                data[measure] = (drop.masked_fill(~defined, float("nan")) if ranking == "method" else drop).tolist()
            frames.append(pd.DataFrame(data))
        return pd.concat(frames, ignore_index=True)

    def _hard(self, order: Tensor, unique: list[int]) -> Tensor:
        """order (N, n): positions best first -> keep masks (N · U · 2, S): per ranking, per count, comprehensiveness
        (the top c removed) then sufficiency (only the top c of the removable tokens kept)."""
        s, n = self.src.size(1), order.size(1)
        rank_at = torch.full((order.size(0), s), -1, dtype=torch.long, device=order.device)  # -1: not removable
        rank_at.scatter_(1, order, torch.arange(n, device=order.device).expand_as(order))
        masks = []
        for c in unique:
            top = (rank_at >= 0) & (rank_at < c)  # (N, S)
            rest = (rank_at >= c)
            masks += [~top, ~rest]
        return torch.stack(masks, dim=1).view(-1, s)

    def _weights(self, scores: Tensor, position: Tensor) -> Tensor:
        """scores (N, n) over the removable tokens -> w (N, S) in [0, 1], min-max per row, 1/2 where constant, 1 at
        every position that is not removable (kept whole in both soft measures)."""
        scores = scores.nan_to_num(0.0)
        low, high = scores.min(-1, keepdim=True).values, scores.max(-1, keepdim=True).values
        span = high - low
        w = torch.where(span > 0, (scores - low) / span.clamp(min=torch.finfo(scores.dtype).tiny), 0.5)
        out = torch.ones(scores.size(0), self.src.size(1), dtype=scores.dtype, device=scores.device)
        out[:, position] = w
        return out

    def _soft(self, w: Tensor, generator: torch.Generator) -> Tensor:
        """w (N, S) -> keep masks per embedding element (2N, S, D): comprehensiveness keeps each with probability
        1 − w_j (w_j = 1 at unremovable positions: kept), sufficiency with w_j; alternating per ranking."""
        d = self.model.config.d_model
        draw = torch.rand(w.size(0), w.size(1), d, generator=generator, dtype=torch.float64).to(w.device)
        movable = self.movable[None, :, None]
        comp = (draw < (1 - w)[..., None]) | ~movable
        suff = (draw < w[..., None]) | ~movable
        return torch.stack([comp, suff], dim=1).view(-1, w.size(1), d)

    def _probabilities(self, masks: Tensor, soft: Tensor, pair_copy: Tensor, pair_row: Tensor) -> Tensor:
        """Every copy's forward (the hard keep masks (M, S), then the soft ones (M', S, D)) -> p at each (copy, row)
        pair (P,), in the pairs' order. The encoder reads every copy once (a chunk of copies per forward); the
        decoder reads each copy only up to its last read row, copies of similar lengths in one pass (``_passes``);
        the generator reads the P states the pairs need, in batches within ``COPY_BUDGET``."""
        model = self.model
        with torch.no_grad():
            embed = source_embedding(model)(self.src)  # (1, S, D)
            removed = self._removed(embed)  # (1, S, D)
            keep = torch.cat([masks[:, :, None].expand(-1, -1, embed.size(-1)), soft])  # (M + M', S, D)
            tgt_in, target = self.tgt[:, :-1], self.tgt[0, 1:]
            # a (copy, row) pair that recurs (two rows' rankings perturbing alike, a copy both a method's and a
            # random one) is read once
            key, read = (pair_copy * self.tgt.size(1) + self.rows[pair_row]).unique(return_inverse=True)
            pair_copy, rows = key.div(self.tgt.size(1), rounding_mode="floor"), key % self.tgt.size(1)  # (P',)
            needed = torch.zeros(keep.size(0), dtype=torch.long, device=embed.device)
            needed.scatter_reduce_(0, pair_copy, rows + 1, reduce="amax")  # decoder length per copy
            order = needed.argsort(descending=True, stable=True)  # (M + M',) the copies, longest first
            states = embed.new_empty(rows.numel(), embed.size(-1))  # (P', D): the state each pair reads
            step = _chunk(model, self.src.size(1), tgt_in.size(1))
            for start in range(0, order.numel(), step):
                chunk = order[start:start + step]  # (n,)
                part = torch.where(keep[chunk], embed, removed)  # (n, S, D)
                src = self.src.expand(chunk.numel(), -1)
                memory = memory_mask = None  # a decoder-only model reads each copy with its target (pairs.py)
                if not model.config.decoder_only:
                    with intervene({"src.tokens": replacing(part)}):
                        memory = model.encode(src)  # (n, S, D): every copy of the chunk in one batch
                    memory_mask = model.memory_mask(src)
                # The decoder is causal: a copy read at rows up to r needs positions 0..r only, and a pass run
                # longer gives the same states at those positions.
                for first, stop, length in _passes(needed[chunk].tolist()):
                    group = slice(first, stop)
                    prefix = tgt_in[:, :length].expand(stop - first, -1)
                    hidden = (decoder_states(model, src[group], prefix, part[group]) if memory is None else
                              model.decode_states(prefix, memory[group], memory_mask[group]))  # (g, length, D)
                    place = torch.full((keep.size(0),), -1, dtype=torch.long, device=embed.device)
                    place[chunk[group]] = torch.arange(stop - first, device=embed.device)
                    here = (place[pair_copy] >= 0).nonzero(as_tuple=True)[0]  # the pairs this pass serves
                    states[here] = hidden[place[pair_copy[here]], rows[here]]
            out = torch.empty(rows.numel(), dtype=torch.float64, device=embed.device)
            step = max(1, COPY_BUDGET // (embed.element_size() * model.config.tgt_vocab_size))  # rows of logits
            for start in range(0, rows.numel(), step):
                logits = model.generator(states[start:start + step])  # (step, V), a fresh tensor
                chosen = logits.gather(-1, target[rows[start:start + step]][:, None])[:, 0]
                top = logits.amax(-1)  # log Σ exp as logsumexp computes it, in place: no second (step, V) tensor
                log_z = logits.sub_(top[:, None]).exp_().sum(-1).log() + top
                out[start:start + step] = (chosen - log_z).double().exp()
        return out[read]

    def _removed(self, embed: Tensor) -> Tensor:
        """The embedding a removed token takes, at every position (1, S, D)."""
        if self.kind == "zero":
            return torch.zeros_like(embed)
        token = self.model.config.unk_id if self.kind == "unk" else self.model.config.pad_id
        return source_embedding(self.model)(torch.full_like(self.src, token))


def _chunk(model: Transformer, src_len: int, tgt_len: int) -> int:
    """Copies per forward within ``COPY_BUDGET``: the widest activation of a layer, per copy (no graph is kept)."""
    c = model.config
    per_copy = 4 * (src_len + tgt_len) * (c.d_ff + 4 * c.d_model + c.n_heads * (src_len + tgt_len))
    return int(max(1, COPY_BUDGET // per_copy))


def _passes(lengths: list[int]) -> list[tuple[int, int, int]]:
    """Decoder lengths of a chunk's copies, longest first -> the decoder passes (first, stop, length) over them: the
    partition into runs of consecutive copies, each run at its first copy's length, that costs least when a pass of
    g copies at length L costs g·L + PASS_COST decoder tokens (dynamic programming over the distinct lengths). One
    pass per distinct length runs many small batches, which a CPU multiplies far below its peak; one pass at the
    longest length runs every copy to the last row."""
    bounds = [i for i in range(len(lengths)) if i == 0 or lengths[i] != lengths[i - 1]] + [len(lengths)]
    best, cut = [0.0] + [math.inf] * (len(bounds) - 1), [0] * len(bounds)
    for j in range(1, len(bounds)):
        for i in range(j):
            cost = best[i] + PASS_COST + (bounds[j] - bounds[i]) * lengths[bounds[i]]
            if cost < best[j]:
                best[j], cut[j] = cost, i
    passes, j = [], len(bounds) - 1
    while j > 0:
        passes.append((bounds[cut[j]], bounds[j], lengths[bounds[cut[j]]]))
        j = cut[j]
    return passes[::-1]


def faithfulness_summary(table: pd.DataFrame, *, level: float = 0.95, n_bootstrap: int = 1000, seed: int = 0
                         ) -> pd.DataFrame:
    """``faithfulness``'s table (one method) -> one row per measure (AOPC for the hard ones): the method's mean over
    the output rows with its percentile bootstrap interval (rows resampled, Efron & Tibshirani 1993), the random
    ranking's mean, the paired difference method − random with its interval, and ``beats_random``: that interval
    lies wholly on the better side (above 0 for comprehensiveness, below for sufficiency). Undefined rows (NaN) are
    left out and counted in ``undefined``; with fewer than two rows there is no interval and no verdict (NaN)."""
    method = table[table.ranking == "method"].set_index(["batch", "row"])
    random = table[table.ranking == "random"].set_index(["batch", "row"])
    generator = torch.Generator().manual_seed(seed)
    out = []
    for measure in MEASURES:
        m = torch.tensor(method[measure].to_numpy(dtype=float), dtype=torch.float64)
        r = torch.tensor(random.loc[method.index, measure].to_numpy(dtype=float), dtype=torch.float64)
        ok = ~m.isnan()
        m, r = m[ok], r[ok]
        low, high = _interval(m, level, n_bootstrap, generator)
        d_low, d_high = _interval(m - r, level, n_bootstrap, generator)
        better = HIGHER_IS_BETTER[measure]
        verdict = float("nan") if math.isnan(d_low) else (d_low > 0 if better else d_high < 0)
        out.append({"measure": measure, "better": "higher" if better else "lower",
                    "method": float(m.mean()) if m.numel() else float("nan"), "low": low, "high": high,
                    "random": float(r.mean()) if r.numel() else float("nan"),
                    "difference": float((m - r).mean()) if m.numel() else float("nan"),
                    "difference_low": d_low, "difference_high": d_high, "beats_random": verdict,
                    "rows": int(ok.sum()), "undefined": int((~ok).sum())})
    return pd.DataFrame(out)


def _interval(values: Tensor, level: float, n: int, generator: torch.Generator) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of ``values`` (N,); NaN for fewer than two values."""
    if values.numel() < 2:
        return float("nan"), float("nan")
    picks = torch.randint(values.numel(), (n, values.numel()), generator=generator)
    means = values[picks].mean(-1)
    tail = (1 - level) / 2
    low, high = torch.quantile(means, torch.tensor([tail, 1 - tail], dtype=torch.float64))
    return float(low), float(high)
