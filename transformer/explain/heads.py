"""One row per attention head: what it looks at, how much the model needs it, and its role.

Importance, two measures side by side (``importance=`` "both", the default, or one of them; the other
column is then NaN):

- ``importance`` (the ablation measure): the mean token cross-entropy over the batch's real target tokens
  (no label smoothing) with that head alone switched off (``ablate=``), minus the same with every
  head on: the signed loss change, in nats. Positive = the model does worse without the head. The
  encoder output is computed once and shared by every decoder and cross-attention ablation
  (``model.decode``); each encoder ablation runs the whole model. One forward per head: at opus-mt
  size (144 heads, a 58k-word generator) that is minutes.
- ``importance_gradient``: Michel, Levy & Neubig 2019, "Are Sixteen Heads Really Better than One?", eq. 2:
  I_h = E_x |∂L(x)/∂ξ_h|, the expected absolute gradient of a sentence's loss with respect to a gate
  ξ_h = 1 on the head's output, a first-order estimate of what switching it off costs (never
  negative). One forward and one backward for every head of every sentence (``gradient_importance``).
- ``importance_gradient_normalised``: the same divided by its ℓ2 norm over the heads of the same attention
  sub-layer (kind, layer), as Michel et al.'s code does before it prunes (``layer_normalised``): the order of
  their pruning curve (``pruning_curve(..., by="gradient")``).

The pattern columns come from one traced forward (head_patterns.py).

Roles, from the thresholds below, first match wins (the simplest explanation first: a fixed
offset explains a head without any annotation; then agreement with annotations; then the
boundary sink):

1. ``positional``: max(same, previous, next) >= POSITIONAL_THRESHOLD (role_detail: which);
2. ``alignment``: alignment >= ALIGNMENT_THRESHOLD (cross-attention with a true alignment), at least
   BASELINE_MARGIN above what position alone achieves (``alignment_baseline``, head_baselines.py), with the
   lower end of its 95% bootstrap interval above that baseline;
3. ``syntactic``: the best ``rel_*`` share >= SYNTACTIC_THRESHOLD (role_detail: the relation), and beating the
   best fixed offset the same way (Clark et al. 2019, "What Does BERT Look At?", section 4.2);
4. ``agreement``: the best ``agree_*`` share (decoder self-attention: the row predicting a German word looks at
   the word it agrees with) >= AGREEMENT_THRESHOLD (role_detail: the relation), beating the best fixed offset
   the same way;
5. ``no-op``: special (the weight on the special tokens, head_patterns.py) >= NOOP_THRESHOLD (role_detail: the
   special token that gets the most of it, as the tokenizer writes it: ``special_token``);
6. ``mixed``: none of these.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import torch
import torch.nn.functional as F
from torch import Tensor

from ..checks import check_choice
from ..network.interventions import Edit, intervene
from ..network.model import Ablation, Transformer
from ..network.trace import ATTENTION_KINDS, Trace, attention_name
from .head_patterns import PATTERN_COLUMNS, Arc, Special, check_annotations, pattern_rows
from .inputs import check_inputs
from .progress import Progress, tell, within

POSITIONAL_THRESHOLD = 0.5  # mean weight on one fixed offset (same, previous or next token)
ALIGNMENT_THRESHOLD = 0.5  # share of rows whose most-attended source token is a true one
SYNTACTIC_THRESHOLD = 0.5  # share of one relation's dependents whose most-attended token is their head
AGREEMENT_THRESHOLD = 0.5  # share of agreement arcs whose later word's row looks most at the earlier word
NOOP_THRESHOLD = 0.5  # mean weight on the special tokens (the tokenizer's; the decoder's start at position 0)
BASELINE_MARGIN = 0.10  # how far an alignment, syntactic or agreement score must beat what position alone achieves
ROLES = ("positional", "alignment", "syntactic", "agreement", "no-op", "mixed")  # in order of precedence
IMPORTANCE_METHODS = ("both", "ablation", "gradient")


def head_summary(model: Transformer, src_ids: Tensor, tgt_ids: Tensor, alignment: Tensor | None = None,
                 arcs: Sequence[Sequence[Arc]] | None = None, *, target_arcs: Sequence[Sequence[Arc]] | None = None,
                 importance: str = "both", progress: Progress | None = None, special: Special | None = None
                 ) -> pd.DataFrame:
    """src_ids (B, S), tgt_ids (B, T) = ``<s> y </s>`` padded -> one row per (kind, layer, head).

    Columns: kind ("encoder", "decoder", "cross"), layer, head, entropy, distance, same, previous, next, special,
    special_token (the special token it weighs most),
    importance (ablation), importance_gradient (Michel et al.), importance_gradient_normalised (per layer),
    alignment, one ``rel_<relation>`` per relation in ``arcs``, one ``agree_<relation>`` per agreement relation in
    ``target_arcs``, their intervals and baselines, role, role_detail, claim (module docstring). ``importance`` =
    "both", "ablation" or "gradient" picks the measures computed; the other columns are NaN. The decoder reads
    ``tgt_ids[:, :-1]``; position t predicts ``tgt_ids[:, t+1]``.

    alignment: (B, T-1, S) bool, row t the true source tokens of ``tgt_ids[:, t+1]``.
    arcs: per sentence a list of (dependent, head, relation) source positions.
    target_arcs: per sentence the German arcs on target positions t (the token ``tgt_ids[:, t+1]``).
    progress: told before each step (progress.py); the traced forward, the ablations and the gradients get
    shares of the bar by their rough cost (``STEP_COST``).
    special: the special tokens of the (source, target) tokenizers, id -> piece (``Tokenizer.special_tokens()``,
    e.g. ``(pipe.src_tokenizer.special_tokens(), pipe.tgt_tokenizer.special_tokens())``): what ``special`` weighs
    and ``special_token`` names; default the config's reserved ids, named by role (head_patterns.py).
    """
    check_choice("importance", importance, IMPORTANCE_METHODS)
    check_inputs(model, src_ids, tgt_ids, None)
    check_annotations(src_ids, tgt_ids, alignment, arcs, model.config.pad_id, target_arcs)
    parts = [("patterns", "")] + [(method, f"{method} importance: ") for method in ("ablation", "gradient")
                                  if importance in (method, "both")]
    costs = [STEP_COST[part] * (model.config.n_heads * _n_layers(model) if part == "ablation" else 1)
             for part, _ in parts]
    edges = [sum(costs[:i]) / sum(costs) for i in range(len(parts) + 1)]
    shares = {part: within(progress, edges[i], edges[i + 1], prefix) for i, (part, prefix) in enumerate(parts)}
    tell(shares["patterns"], 0.0, "the attention patterns of every head")
    dec_ids = tgt_ids[:, :-1]
    trace = Trace()
    with torch.no_grad():
        model(src_ids, dec_ids, trace=trace)
    out_rows = (tgt_ids[:, 1:] != model.config.pad_id).sum(-1)  # (B,): the rows that predict a real token
    frame = pd.DataFrame(pattern_rows(trace, src_ids, dec_ids, alignment, arcs, ids=model.config.special_ids,
                                      target_arcs=target_arcs, out_rows=out_rows, special=special))
    keys = [tuple(key) for key in frame[["kind", "layer", "head"]].itertuples(index=False)]
    for offset, (column, method, measure) in enumerate((("importance", "ablation", head_importance),
                                                        ("importance_gradient", "gradient", gradient_importance))):
        scores = measure(model, src_ids, tgt_ids, shares[method]) if importance in (method, "both") else {}
        frame.insert(len(PATTERN_COLUMNS) + 3 + offset, column, [scores.get(key, float("nan")) for key in keys])
    frame.insert(len(PATTERN_COLUMNS) + 5, "importance_gradient_normalised", layer_normalised(frame))
    tell(progress, 1.0, "done")
    return head_roles(frame)


# The rough cost of head_summary's steps in forwards of the batch, to share a progress bar: the traced forward
# with its statistics; one ablation (per head); the gradients (forward and backward of every sentence).
STEP_COST = {"patterns": 1.0, "ablation": 0.5, "gradient": 3.0}


def _n_layers(model: Transformer) -> int:
    """The attention sub-layers: one per encoder layer, two per decoder layer."""
    return model.config.n_encoder_layers + 2 * model.config.n_decoder_layers


GRADIENT_CHUNK = 8  # sentences per forward and backward of the gradient importance


def gradient_importance(model: Transformer, src_ids: Tensor, tgt_ids: Tensor, progress: Progress | None = None
                        ) -> dict[tuple[str, int, int], float]:
    """(kind, layer, head) -> Michel et al.'s I_h = mean over sentences of |∂L_b/∂ξ_h| (module docstring).

    Every attention sub-layer gets a gate per (sentence, head), all ones, multiplied into the heads' outputs
    before W^O mixes them (an edit of the ``.heads`` sites: the forward is unchanged). L_b is sentence b's mean
    token cross-entropy; the sum over sentences is differentiated once, and since sentence b's loss depends
    only on its own gates, the gates' gradient holds every ∂L_b/∂ξ_h at once. For the same reason the batch
    is taken ``GRADIENT_CHUNK`` sentences at a time with the same result: the logits and what the backward
    keeps grow with the sentences (50 sentences of 56 tokens at opus-mt's 58,101 words: 6.8 GB at once).
    ``progress`` is told before each chunk.
    """
    c = model.config
    n = src_ids.size(0)
    sums: dict[tuple[str, int], Tensor] = {}
    for start in range(0, n, GRADIENT_CHUNK):
        part = slice(start, start + GRADIENT_CHUNK)
        tell(progress, start / n, f"sentences {start + 1}-{min(start + GRADIENT_CHUNK, n)} of {n}")
        for key, grad in _gate_gradients(model, src_ids[part], tgt_ids[part]).items():
            sums[key] = sums.get(key, 0) + grad.abs().sum(0)  # (H,)
    return {(kind, layer, head): float(total[head]) / src_ids.size(0)
            for (kind, layer), total in sums.items() for head in range(c.n_heads)}


def layer_normalised(summary: pd.DataFrame, column: str = "importance_gradient") -> pd.Series:
    """Each head's ``column`` divided by the ℓ2 norm of ``column`` over the heads of its attention sub-layer
    (same kind and layer): I_h / sqrt(sum over h' of I_h'^2).

    Michel, Levy & Neubig 2019 normalise their importance so before pruning (their code: ``calculate_head_importance``
    with ``normalize_scores_by_layer=True``, the default; their translation runs pass ``--normalize-by-layer``), which
    makes heads of different layers comparable: a layer whose gates all get large gradients no longer keeps all of
    its heads. A layer whose heads all score 0 keeps 0 (their code adds 1e-20 to the norm); NaN stays NaN.
    """
    values = summary[column].astype(float)
    norm = values.pow(2).groupby([summary["kind"], summary["layer"]]).transform("sum").pow(0.5)
    return values / norm.where(norm > 0, 1.0)


def _gate_gradients(model: Transformer, src_ids: Tensor, tgt_ids: Tensor) -> dict[tuple[str, int], Tensor]:
    """(kind, layer) -> ∂L_b/∂ξ_{b,h} of every sentence b and head h of the batch (B, H)."""
    c = model.config
    weight = model.generator.weight  # the gates live where the model does, in its dtype (a CUDA model: on the GPU)
    gates = {(kind, layer): torch.ones(src_ids.size(0), c.n_heads, dtype=weight.dtype, device=weight.device,
                                       requires_grad=True)
             for kind in ATTENTION_KINDS for layer in range(c.n_encoder_layers if kind == "encoder"
                                                            else c.n_decoder_layers)}
    edits = {f"{attention_name(kind, layer)}.heads": _gating(gate) for (kind, layer), gate in gates.items()}
    with intervene(edits), torch.enable_grad():
        logits = model(src_ids, tgt_ids[:, :-1])  # (B, T-1, V)
        targets = tgt_ids[:, 1:]
        token_loss = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=c.pad_id,
                                     reduction="none")  # (B, T-1)
        real = (targets != c.pad_id).to(token_loss.dtype)
        sentence_loss = (token_loss * real).sum(1) / real.sum(1).clamp(min=1)  # (B,)
        grads = torch.autograd.grad(sentence_loss.sum(), list(gates.values()))
    return dict(zip(gates, grads, strict=True))


def _gating(gate: Tensor) -> Edit:
    """An edit of a ``.heads`` site (B, H, T, d_k) that multiplies head h of sentence b by gate[b, h]."""
    return lambda heads: heads * gate[:, :, None, None]


def target_loss_sum(logits: Tensor, tgt_ids: Tensor, pad_id: int) -> tuple[float, int]:
    """The summed cross-entropy (nats, no label smoothing, in float64) of logits (B, T-1, V) over the real targets
    tgt_ids[:, 1:], and how many there are: summed over chunks of a batch, their ratio is the batch's mean."""
    real = tgt_ids[:, 1:] != pad_id  # (B, T-1): only real targets are scored (and upcast)
    return float(F.cross_entropy(logits[real].double(), tgt_ids[:, 1:][real], reduction="sum")), int(real.sum())


def ablated_loss(model: Transformer, src_ids: Tensor, tgt_ids: Tensor, ablate: Ablation | None = None) -> float:
    """The mean cross-entropy over every real target token (``target_loss_sum``) with the heads in ``ablate``
    switched off, taken over ``length_chunks`` of the batch: the logits of one chunk at a time (40 sentences at
    opus-mt's 58,101 words held 5.5 GB at once in float64)."""
    total, count = 0.0, 0
    with torch.no_grad():
        for src, tgt in length_chunks(src_ids, tgt_ids, model.config.pad_id):
            loss, n = target_loss_sum(model(src, tgt[:, :-1], ablate=ablate), tgt, model.config.pad_id)
            total, count = total + loss, count + n
    return total / count


ABLATION_CHUNK = 20  # sentences per forward of the ablation measure (chunks of similar length when there are more)


def head_importance(model: Transformer, src_ids: Tensor, tgt_ids: Tensor, progress: Progress | None = None
                    ) -> dict[tuple[str, int, int], float]:
    """(kind, layer, head) -> loss with that head off minus loss with every head on (the mean over every real target
    token of the batch, as ``ablated_loss``). Run on ``length_chunks`` of the batch: the same sums, less padding.
    ``progress`` is told before each head."""
    c = model.config
    result = {}
    with torch.no_grad():
        chunks = [(src, tgt, model.encode(src), model.memory_mask(src))  # memory shared by decoder-side ablations
                  for src, tgt in length_chunks(src_ids, tgt_ids, c.pad_id)]

        def loss(kind: str | None = None, ablate: Ablation | None = None) -> float:
            total, count = 0.0, 0
            for src, tgt, memory, memory_mask in chunks:
                logits = (model(src, tgt[:, :-1], ablate=ablate) if kind == "encoder"
                          else model.decode(tgt[:, :-1], memory, memory_mask, ablate=ablate))
                loss, n = target_loss_sum(logits, tgt, c.pad_id)
                total, count = total + loss, count + n
            return total / count

        base = loss()
        total = c.n_heads * _n_layers(model)
        for kind in ATTENTION_KINDS:
            for layer in range(c.n_encoder_layers if kind == "encoder" else c.n_decoder_layers):
                for head in range(c.n_heads):
                    tell(progress, len(result) / total, f"{kind} layer {layer} head {head} off")
                    result[(kind, layer, head)] = loss(kind, {(kind, layer): [head]}) - base
    return result


def length_chunks(src_ids: Tensor, tgt_ids: Tensor, pad_id: int) -> list[tuple[Tensor, Tensor]]:
    """The batch in chunks of at most ``ABLATION_CHUNK`` sentences of similar target length, each cut to its own
    longest source and target: a batch of the sentences task is about half padding, which a forward still pays
    for. One chunk, untouched, when the batch is no larger."""
    if src_ids.size(0) <= ABLATION_CHUNK:
        return [(src_ids, tgt_ids)]
    src_len, tgt_len = _lengths(src_ids, pad_id), _lengths(tgt_ids, pad_id)
    order = torch.argsort(tgt_len * (src_ids.size(1) + 1) + src_len, stable=True)
    return [(src_ids[part, : int(src_len[part].max())], tgt_ids[part, : int(tgt_len[part].max())])
            for part in order.split(ABLATION_CHUNK)]


def _lengths(ids: Tensor, pad_id: int) -> Tensor:
    """(B, L) -> (B,) the position after each row's last non-padding token; position 0 always counts (a Marian
    model's decoder starts with its pad id)."""
    real = ids != pad_id
    real[:, 0] = True
    return (real * torch.arange(1, ids.size(1) + 1, device=ids.device)).amax(1)


def head_roles(summary: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``summary`` with ``role``, ``role_detail`` and ``claim`` (module docstring).

    Needs the columns same, previous, next, special, alignment and any ``rel_*`` and ``agree_*``; where
    ``<score>_baseline`` and ``<score>_low`` are present, an alignment, syntactic or agreement role also needs
    the score to beat its baseline by ``BASELINE_MARGIN`` and its interval's lower end to lie above the
    baseline. NaN never passes.
    ``claim`` says in a sentence what the role rests on, or why a score that passes its threshold gives no
    role (position alone does as well).
    """
    frame = summary.copy()
    roles, details, claims = [], [], []
    for row in frame.to_dict("records"):
        offsets = {name: row[name] for name in ("same", "previous", "next") if pd.notna(row[name])}
        best_offset = max(offsets, key=offsets.get) if offsets else None
        aligned, aligned_why = _beats(row, "alignment", ALIGNMENT_THRESHOLD)
        best_relation, syntactic, syntactic_why = _best_relation(row, "rel_", SYNTACTIC_THRESHOLD)
        best_agreement, agreeing, agreeing_why = _best_relation(row, "agree_", AGREEMENT_THRESHOLD)
        if best_offset is not None and offsets[best_offset] >= POSITIONAL_THRESHOLD:
            role, detail = "positional", best_offset
            claim = f"puts {offsets[best_offset]:.0%} of its weight on the {best_offset} token"
        elif aligned:
            role, detail, claim = "alignment", "", aligned_why
        elif syntactic:
            role, detail, claim = "syntactic", best_relation, syntactic_why
        elif agreeing:
            role, detail, claim = "agreement", best_agreement, agreeing_why
        elif pd.notna(row["special"]) and row["special"] >= NOOP_THRESHOLD:
            sink = row.get("special_token")
            role, detail = "no-op", sink if isinstance(sink, str) and sink else "special tokens"
            claim = f"puts {row['special']:.0%} of its weight on special tokens" + (
                f", most on {detail}" if detail != "special tokens" else "")
        else:
            role, detail = "mixed", ""
            claim = "; ".join(why for why in (aligned_why, syntactic_why, agreeing_why) if why)
        roles.append(role)
        details.append(detail)
        claims.append(claim)
    frame["role"] = roles
    frame["role_detail"] = details
    frame["claim"] = claims
    return frame


def _best_relation(row: dict, prefix: str, threshold: float) -> tuple[str, bool, str]:
    """The relation of the row's best ``<prefix><relation>`` share, whether it earns its role, and why."""
    shares = {name[len(prefix):]: value for name, value in row.items() if name.startswith(prefix)
              and not name.endswith(("_low", "_high", "_baseline")) and pd.notna(value)}
    if not shares:
        return "", False, ""
    best = max(shares, key=shares.get)
    return (best, *_beats(row, f"{prefix}{best}", threshold))


_WHAT = {"rel_": ("points from a {} dependent to its head", "syntactic"),
         "agree_": ("looks back from a German word to the word it agrees with ({})", "agreement")}


def beats_position(score: float, baseline: float, low: float | None) -> bool:
    """The margin rule, the one place it is written: a score earns an alignment, syntactic or agreement role (or the
    Heads page's "finding") only when it beats what position alone achieves by ``BASELINE_MARGIN`` and its
    interval's lower end ``low`` (None: no interval) lies above that baseline."""
    return score >= baseline + BASELINE_MARGIN and (low is None or pd.isna(low) or low > baseline)


def _beats(row: dict, name: str, threshold: float) -> tuple[bool, str]:
    """Whether ``row[name]`` earns its role (threshold, baseline margin, interval), and the sentence that says so
    or says why not ("" when the score is absent or below its threshold)."""
    score = row.get(name)
    if score is None or pd.isna(score) or score < threshold:
        return False, ""
    prefix = next((p for p in _WHAT if name.startswith(p)), "")
    template, role = _WHAT.get(prefix, ("picks a true source token", "alignment"))
    what = template.format(name[len(prefix):])
    baseline, low, high = row.get(f"{name}_baseline"), row.get(f"{name}_low"), row.get(f"{name}_high")
    interval = f" (95% interval {low:.0%}–{high:.0%})" if low is not None and pd.notna(low) else ""
    if baseline is None or pd.isna(baseline):
        return True, f"{what} in {score:.0%} of cases{interval}"
    alone = "position alone" if name == "alignment" else "the best fixed offset"
    text = f"{what} in {score:.0%} of cases{interval}; {alone}: {baseline:.0%}"
    if not beats_position(score, baseline, low):
        return False, f"{text}, so no {role} role"
    return True, text
