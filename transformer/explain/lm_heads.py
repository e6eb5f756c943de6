"""One row per head of a decoder-only language model: what it does on repeated random tokens, beside chance.

Olsson et al. 2022 ("In-context Learning and Induction Heads") find their heads on sequences of random tokens
repeated once, [BOS] r_1..r_n r_1..r_n: there nothing but the repeat predicts the second half, so a head that
looks back to the token after the current token's earlier occurrence (prefix matching) and raises that token's
logit (copying) is an induction head. ``lm_head_summary`` draws such sequences (``repeated_tokens``: a private
generator seeded by ``seed``, n distinct tokens per sequence, none of them special), runs the model once per chunk
with a trace, and scores every head (lm_head_patterns.py): ``previous_token``, ``duplicate_token``, ``induction``
(prefix matching), ``sink`` and ``copying``.

``copying``, a direct measurement rather than Olsson et al.'s eigenvalue summary of W_U W_O W_V W_E: for each key
j of the first repeat, the vector the head writes when it attends only to j, W_O^h v_j (v_j the value of its
key/value head, in the model's actual stream, so earlier layers count, as they do in the model), is read through
the direct path to the logits: the post-attention norm's gain (Gemma's sandwich norm), the final norm's gain and,
for LayerNorm, its centring, and the unembedding, with each norm's division by the stream's scale left out, as
TransformerLens's direct logit attribution freezes it (a positive factor per position, which changes no ranking).
The score is the percentile of the attended token r_j among the sequence's other n - 1 tokens in those logits;
chance is exactly 0.5 (lm_head_patterns.copying_counts). The eigenvalue form needs every head's V x V matrix (or
its d_k x d_k cousin) and drops the norms and the stream that the model actually feeds the head; this reads
what the head does in the forward that the attention scores come from. It ranks against the prompt's own tokens,
the tokens a copying head could copy here, rather than all V (a V-wide product per key, head and layer:
about 10^17 operations for 50 prompts of Qwen2-0.5B).

Each score comes with its 95% bootstrap interval over sequences (head_baselines.bootstrap_interval) and its chance
baseline (a head attending uniformly over its visible keys, the sliding window included; 0.5 for copying). A role
needs its score at or above its threshold (``THRESHOLDS``) and beating chance as heads.py demands
(``beats_position``: by ``BASELINE_MARGIN``, with the interval's low end above it). First match wins:

1. ``induction``: induction and copying both pass (Olsson et al.'s definition: prefix matching and copying);
2. ``prefix-matching``: induction passes, copying does not;
3. ``previous-token``; 4. ``duplicate-token``; 5. ``sink`` (Xiao et al. 2023); 6. ``copying``; 7. ``mixed``.
"""

from __future__ import annotations

from collections.abc import Collection

import pandas as pd
import torch
from torch import Tensor, nn

from ..network.model import Transformer
from ..network.norms import RMSNorm
from ..network.trace import Trace
from .head_baselines import bootstrap_interval
from .heads import beats_position
from .lm_head_patterns import ATTENTION_SCORES, attention_counts, chance_weights, copying_counts, ratio, visible_keys
from .progress import Progress, tell

SCORES = (*ATTENTION_SCORES, "copying")
THRESHOLDS = LM_THRESHOLDS = {
    "previous_token": 0.5, "duplicate_token": 0.5, "induction": 0.5, "sink": 0.5,  # shares of weight, as heads.py's
    "copying": 0.75}  # the attended token above three in four of the prompt's other tokens, on average
ROLES = LM_ROLES = ("induction", "prefix-matching", "previous-token", "duplicate-token", "sink", "copying", "mixed")
COPYING_CHANCE = 0.5  # the mean percentile of a uniformly drawn token (lm_head_patterns.copying_counts)
CHUNK = 10  # sequences per traced forward: the app's progress bar moves five times over 50 prompts


def repeated_tokens(vocab_size: int, n_prompts: int, repeat_length: int, *, seed: int = 0, bos: int | None = None,
                    exclude: Collection[int] = ()) -> Tensor:
    """(n_prompts, [1 +] 2 * repeat_length) int64: per row [bos] r_1..r_n r_1..r_n, the r_i distinct ids of
    0..vocab_size-1 outside ``exclude``, drawn from a private generator seeded by ``seed`` (the global one is never
    touched)."""
    excluded = torch.tensor(sorted(set(exclude)), dtype=torch.long)
    allowed = torch.arange(vocab_size)[~torch.isin(torch.arange(vocab_size), excluded)]
    if repeat_length > allowed.numel():
        raise ValueError(f"repeat_length {repeat_length} needs that many distinct ordinary tokens; the vocabulary "
                         f"has {allowed.numel()} outside the special ones")
    generator = torch.Generator().manual_seed(seed)
    rows = torch.stack([allowed[torch.randperm(allowed.numel(), generator=generator)[:repeat_length]]
                        for _ in range(n_prompts)])  # (N, n)
    ids = torch.cat([rows, rows], dim=1)
    return ids if bos is None else torch.cat([torch.full((n_prompts, 1), bos, dtype=torch.long), ids], dim=1)


def lm_head_summary(model: Transformer, *, n_prompts: int = 50, repeat_length: int = 20, seed: int = 0,
                    prepend_bos: bool = True, special: Collection[int] | None = None,
                    progress: Progress | None = None) -> pd.DataFrame:
    """A decoder-only ``model`` (eval mode) -> one row per (layer, head), scored on ``n_prompts`` sequences
    [BOS] r_1..r_n r_1..r_n (``repeat_length`` = n; ``prepend_bos``: start with the config's bos id) of random
    tokens drawn with ``seed``, never an id of the config's special ids or of ``special`` (the tokenizer's: e.g.
    an ``LMTokenizer``'s ``special_ids``). ``progress`` (progress.py) is told before each chunk of ``CHUNK`` sequences.

    Columns: kind ("decoder", as ``ablate`` keys name it), layer, head, kv_head (the key/value head it reads,
    head // (n_heads / n_kv_heads) under grouped-query attention, else head), layer_type ("full" | "sliding"),
    window (the sliding window in keys, None for full layers), then each of ``SCORES`` (previous_token,
    duplicate_token, induction, sink, copying; each in [0, 1], NaN where undefined), then for each score
    ``<score>_low``, ``<score>_high`` (95% bootstrap interval over the sequences) and ``<score>_baseline`` (chance:
    uniform attention over the visible keys; 0.5 for copying); undefined (why a score is NaN, "" when none is),
    role (``ROLES``) and claim (what the role rests on). Module docstring: the definitions.
    """
    c = _check(model, n_prompts, repeat_length, prepend_bos)
    start = 1 if prepend_bos else 0
    ids = repeated_tokens(c.tgt_vocab_size, n_prompts, repeat_length, seed=seed,
                          bos=c.bos_id if prepend_bos else None, exclude={*c.special_ids, *(special or ())})
    windows = [c.sliding_window if c.layer_type(layer) == "sliding" else None for layer in range(c.n_decoder_layers)]
    visible = visible_keys(ids.size(1), windows)
    device = model.generator.weight.device
    sums: dict[str, list[tuple[Tensor, Tensor]]] = {name: [] for name in (*SCORES, *(f"{s}_chance" for s in
                                                                                       ATTENTION_SCORES))}
    for first in range(0, n_prompts, CHUNK):
        chunk = ids[first:first + CHUNK]
        tell(progress, first / n_prompts, f"prompts {first + 1}-{first + chunk.size(0)} of {n_prompts}")
        trace = Trace()
        with torch.no_grad():
            model.decode_states(chunk.to(device), None, None, trace=trace)
            weights = torch.stack([trace.attention("decoder", layer) for layer in range(c.n_decoder_layers)], 1)
            weights = weights.double().cpu()  # (B, L, H, T, T)
            for name in ATTENTION_SCORES:
                sums[name].append(attention_counts(name, weights, chunk, visible))
                sums[f"{name}_chance"].append(attention_counts(name, chance_weights(visible), chunk, visible))
            sums["copying"].append(_copying(model, trace, chunk[:, start:start + repeat_length].to(device), start))
    tell(progress, 1.0, "bootstrap intervals")
    return lm_head_roles(_frame(model, sums, windows, repeat_length))


def _frame(model: Transformer, sums: dict[str, list[tuple[Tensor, Tensor]]], windows: list[int | None],
           repeat_length: int) -> pd.DataFrame:
    """The summed counts -> the rows of ``lm_head_summary`` (before roles)."""
    c = model.config
    n_layers, n_heads = c.n_decoder_layers, c.n_heads
    group = n_heads // c.kv_heads
    columns: dict[str, Tensor] = {}
    for name in SCORES:
        hits, counts = (torch.cat(part) for part in zip(*sums[name], strict=True))  # (N, L, H), (N, L) | (N,)
        counts = counts[:, :, None].expand_as(hits) if counts.dim() == 2 else counts[:, None, None].expand_as(hits)
        columns[name] = hits.sum(0) / counts.sum(0)  # (L, H): NaN where nothing was counted
        low, high = bootstrap_interval(hits.reshape(hits.size(0), -1), counts.reshape(counts.size(0), -1))
        columns[f"{name}_low"], columns[f"{name}_high"] = low.view(n_layers, n_heads), high.view(n_layers, n_heads)
        if name == "copying":
            columns[f"{name}_baseline"] = torch.full((n_layers, n_heads), COPYING_CHANCE, dtype=torch.float64)
        else:
            chance = ratio(*(torch.cat(part) for part in zip(*sums[f"{name}_chance"], strict=True)))  # (L, 1)
            columns[f"{name}_baseline"] = chance.expand(n_layers, n_heads)
    rows = []
    for layer in range(n_layers):
        for head in range(n_heads):
            row = {"kind": "decoder", "layer": layer, "head": head, "kv_head": head // group,
                   "layer_type": c.layer_type(layer), "window": windows[layer]}
            row.update({name: float(columns[name][layer, head]) for name in SCORES})
            for name in SCORES:
                for part in ("low", "high", "baseline"):
                    row[f"{name}_{part}"] = float(columns[f"{name}_{part}"][layer, head])
            missing = [name for name in SCORES if pd.isna(row[name])]
            row["undefined"] = (f"{', '.join(missing)}: no query sees its target within the sliding window of "
                                f"{windows[layer]} keys (the repeat is {repeat_length} tokens)") if missing else ""
            rows.append(row)
    frame = pd.DataFrame(rows)
    frame["window"] = pd.array(frame["window"].tolist(), dtype="Int64")  # <NA> for full layers, not a float NaN
    return frame


def _copying(model: Transformer, trace: Trace, first: Tensor, start: int) -> tuple[Tensor, Tensor]:
    """first (B, n): the first repeat's tokens, from position ``start`` -> copying hits (B, L, H) and counts (B,)
    (module docstring)."""
    c = model.config
    unembed = model.generator.weight[first]  # (B, n, D): the rows of the prompt's tokens
    dtype = torch.promote_types(unembed.dtype, torch.float32)
    gain, centre = _linear_part(model.decoder.norm, c.d_model, unembed)
    rows = unembed.to(dtype) * gain.to(dtype)
    if centre:  # LayerNorm subtracts the mean: (w * g) C = w * g - mean(w * g), C symmetric
        rows = rows - rows.mean(-1, keepdim=True)
    hits = []
    for layer, block in enumerate(model.decoder.layers):
        attention = block.self_attn
        post, _ = _linear_part(block.self_attn_residual.post_norm, c.d_model, unembed)
        values = trace[f"decoder.{layer}.self_attn.values"]  # (B, H_kv, T, d_k)
        values = values[:, attention.kv_heads(values.device), start:start + first.size(1)].to(dtype)  # (B, H, n, d_k)
        w_o = attention.w_o.weight.to(dtype).view(c.d_model, c.n_heads, c.d_k)  # (D, H, d_k): head h's columns
        read = torch.einsum("bkD,Dhd->bkhd", rows * post.to(dtype), w_o)  # (B, n, H, d_k): token k's row, per head
        logits = torch.einsum("bhjd,bkhd->bhjk", values, read)  # (B, H, n, n): attending to key j, token k's logit
        hits.append(copying_counts(logits)[0])
    return torch.stack(hits, 1).double().cpu(), torch.full((first.size(0),), float(first.size(1)),
                                                             dtype=torch.float64)


def _linear_part(norm: nn.Module | None, width: int, like: Tensor) -> tuple[Tensor, bool]:
    """A norm's map with its division by the stream's scale left out: (its gain (D,), whether it centres)."""
    if norm is None or isinstance(norm, nn.Identity):
        return like.new_ones(width), False
    if isinstance(norm, nn.LayerNorm):
        return (norm.weight if norm.weight is not None else like.new_ones(width)), True
    if isinstance(norm, RMSNorm):
        return (1.0 + norm.weight.float() if norm.kind == "rms_unit_offset" else norm.weight), False
    raise ValueError(f"copying needs a LayerNorm or RMSNorm, got {type(norm).__name__}")


def _check(model: Transformer, n_prompts: int, repeat_length: int, prepend_bos: bool):  # noqa: ANN202  (a config)
    c = model.config
    if not c.decoder_only:
        raise ValueError("lm_head_summary takes a decoder-only model; an encoder-decoder's heads: head_summary")
    if model.training:
        raise ValueError("the model is in training mode (dropout is random): call .eval() on it first")
    for name, value, least in (("n_prompts", n_prompts, 1), ("repeat_length", repeat_length, 2)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    length = 2 * repeat_length + (1 if prepend_bos else 0)
    if length > c.max_len:
        raise ValueError(f"repeat_length {repeat_length} makes sequences of {length} tokens, past the model's "
                         f"max_len of {c.max_len}")
    return c


_WHAT = {"previous_token": "on the previous token", "duplicate_token": "on earlier copies of its own token",
         "induction": "on the token after its token's earlier occurrence", "sink": "on the first token"}


def lm_head_roles(summary: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``summary`` (the score columns of ``lm_head_summary`` with their ``_low``, ``_high`` and
    ``_baseline``) with ``role`` and ``claim`` (module docstring). NaN never passes."""
    frame = summary.copy()
    roles, claims = [], []
    for row in frame.to_dict("records"):
        passes = {name: _passes(row, name) for name in SCORES}
        if passes["induction"]:
            role = "induction" if passes["copying"] else "prefix-matching"
            reasons = ["induction", "copying"] if passes["copying"] else ["induction"]
        else:
            role, reasons = "mixed", []
            for name, named in (("previous_token", "previous-token"), ("duplicate_token", "duplicate-token"),
                                ("sink", "sink"), ("copying", "copying")):
                if passes[name]:
                    role, reasons = named, [name]
                    break
        if role == "mixed":  # say which scores reached their threshold but not past chance
            near = [name for name in SCORES if pd.notna(row[name]) and row[name] >= THRESHOLDS[name]]
            claim = "; ".join(f"{_sentence(row, name)}, so no role" for name in near)
        else:
            claim = "; ".join(_sentence(row, name) for name in reasons)
        roles.append(role)
        claims.append(claim)
    frame["role"] = roles
    frame["claim"] = claims
    return frame


def _passes(row: dict, name: str) -> bool:
    score = row[name]
    return bool(pd.notna(score) and score >= THRESHOLDS[name]
                and beats_position(score, row[f"{name}_baseline"], row[f"{name}_low"]))


def _sentence(row: dict, name: str) -> str:
    score, low, high, baseline = (row[f"{name}{part}"] for part in ("", "_low", "_high", "_baseline"))
    interval = f" (95% interval {low:.0%}–{high:.0%})" if pd.notna(low) else ""
    if name == "copying":
        return (f"its value path ranks the token it reads above {score:.0%} of the prompt's other tokens{interval};"
                f" chance: {baseline:.0%}")
    return f"puts {score:.0%} of its weight {_WHAT[name]}{interval}; uniform attention: {baseline:.0%}"
