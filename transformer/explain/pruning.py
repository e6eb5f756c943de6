"""The pruning curve of Michel, Levy & Neubig 2019, "Are Sixteen Heads Really Better than One?"
(their figure 3): switch heads off cumulatively, least important first, and watch the score.

Pass the importance of ``head_summary`` computed on one batch and a held-out batch here, and which measure
to follow: ``by="ablation"`` (the ``importance`` column: the loss change with the head off) or
``by="gradient"`` (``importance_gradient``: Michel et al.'s expected |∂L/∂ξ_h|, divided by its ℓ2 norm over the
heads of the same attention sub-layer as their code does before pruning (``layer_normalised``): the order of their
figure).
After each step the held-out sources are greedy-decoded with the heads switched off
(``greedy_decode(..., ablate=...)``) and compared with the references; the teacher-forced
loss (``ablated_loss``, no label smoothing) is reported too. Step 0 switches nothing off.
"""

from __future__ import annotations

import pandas as pd
from torch import Tensor

from ..checks import check_choice
from ..decoding import greedy_decode
from ..decoding.processors import GenerationRules
from ..network.model import Transformer
from .heads import ablated_loss, layer_normalised
from .inputs import check_inputs
from .progress import Progress, tell

BY = {"ablation": "importance", "gradient": "importance_gradient"}  # measure -> the head_summary column it needs


def pruning_curve(model: Transformer, src_ids: Tensor, tgt_ids: Tensor, importance: pd.DataFrame, *,
                  by: str = "ablation", max_len: int | None = None, every: int = 1,
                  progress: Progress | None = None, rules: GenerationRules | None = None) -> pd.DataFrame:
    """src_ids (B, S), tgt_ids (B, T) = ``<s> y </s>`` padded, the held-out batch; ``importance``
    with columns kind, layer, head and the column of ``by`` (``BY``; e.g. ``head_summary``'s).

    -> one row per step n = 0..number of heads: n_heads_off, heads_off (the list of (kind, layer,
    head) switched off, least important first: by ``importance``, or by ``layer_normalised(importance_gradient)``
    for ``by="gradient"``; ties keep ``importance``'s row order),
    exact_match (share of sentences whose greedy output ids equal the reference ids: tgt_ids
    without <s>, up to </s>, and the output must end with </s>) and loss.
    ``max_len`` (generated tokens, </s> included) defaults to T - 1, enough for every reference.
    ``every`` = k measures after every k-th head only (and with all of them off): each step decodes the batch,
    which at opus-mt's size is seconds, times 144 heads; the steps kept are the same as with k = 1.
    ``progress`` (progress.py) is told before each step. ``rules``: the model's forced and forbidden tokens
    (``Pipeline.generation_rules``; a multilingual model's target code first), applied to every decoding, so an
    output is compared with a reference written as ``Pipeline.target_ids`` writes it.
    """
    check_inputs(model, src_ids, tgt_ids, None)
    check_choice("by", by, tuple(BY))
    if not isinstance(every, int) or every < 1:
        raise ValueError(f"every must be a positive whole number of heads, not {every!r}")
    column = BY[by]
    missing = {"kind", "layer", "head", column} - set(importance.columns)
    if missing:
        raise ValueError(f"importance needs the columns kind, layer, head, {column}; missing {sorted(missing)}")
    if importance[column].isna().any():
        raise ValueError(f"the {by} importance ({column}) was not computed for every head: "
                         f"head_summary(..., importance='both' or {by!r})")
    frame = importance.reset_index(drop=True)
    key = layer_normalised(frame, column) if by == "gradient" else frame[column]  # Michel et al. normalise per layer
    order = frame.iloc[key.to_numpy().argsort(kind="stable")]
    heads = [(str(k), int(layer), int(h)) for k, layer, h in order[["kind", "layer", "head"]].itertuples(index=False)]
    references = [_reference(row, model.config.pad_id, model.config.eos_id) for row in tgt_ids.tolist()]
    max_len = max_len or tgt_ids.size(1) - 1
    rows = []
    steps = sorted({*range(0, len(heads) + 1, every), len(heads)})
    for i, n in enumerate(steps):
        tell(progress, i / len(steps), f"decoding with {n} of {len(heads)} heads off")
        ablate: dict[tuple[str, int], list[int]] = {}
        for kind, layer, head in heads[:n]:
            ablate.setdefault((kind, layer), []).append(head)
        result = greedy_decode(model, src_ids, max_len=max_len, ablate=ablate or None, rules=rules)
        right = sum(done and tokens == ref
                    for tokens, done, ref in zip(result.tokens, result.finished, references, strict=True))
        rows.append({"n_heads_off": n, "heads_off": heads[:n], "exact_match": right / len(references),
                     "loss": ablated_loss(model, src_ids, tgt_ids, ablate or None)})
    tell(progress, 1.0, "done")
    return pd.DataFrame(rows, columns=["n_heads_off", "heads_off", "exact_match", "loss"])


def _reference(row: list[int], pad_id: int, eos_id: int) -> list[int]:
    """<s> y_1 ... y_n </s> <pad>... -> [y_1, ..., y_n]."""
    tokens = [t for t in row[1:] if t != pad_id]
    return tokens[:tokens.index(eos_id)] if eos_id in tokens else tokens
