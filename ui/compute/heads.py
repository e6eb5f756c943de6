"""The Heads page's computations: head statistics over many sentences and the pruning curve.

They are computed once per server with a progress bar and kept per model and input (``ui.compute.shared_work``:
half a minute at opus-mt size), never modified after they are built.
The sentences for the head statistics are, for a model of a built-in task, drawn afresh from that task (a
fixed seed, so every session sees the same ones), their true alignments and dependency arcs coming from the
task's known structure where it has one; for any model (a Hugging Face Marian one, one trained on a user's
file), or when the user asks, they are the user's own (``ui.compute.user_sentences``), with the user's references
or else the model's own greedy translations, and no true alignment. Work on the user's sentences, and
patching on a model without a built-in task, starts only at a button (``runs_by_itself``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from transformer import explain
from transformer.decoding import greedy_decode
from transformer.explain.alignment import TASKS_WITH_ALIGNMENT, TASKS_WITH_ARCS
from transformer.explain.progress import Progress, tell, within
from transformer.output_bounds import DECODE_SECONDS
from transformer.pipeline import Pipeline
from transformer.text.ids import pad
from transformer.text.tasks import make_task
from ui.compute.analysis import batch_output_len, builtin_task
from ui.compute.model_size import is_large
from ui.compute.shared_work import shared
from ui.compute.user_sentences import Sentences

N_SENTENCES = 200  # sentences the head statistics average over
N_HELD_OUT = 40  # further sentences for the pruning curve's exact match
N_PRUNING_USER = 40  # of the user's sentences, the first this many run the pruning curve (one decoding per head)
# On a large model (opus-mt: 144 heads, a decoding of 40 sentences 2-10 s) the curve runs on fewer sentences and
# is measured after every PRUNING_EVERY_LARGE-th head (two layers of 8 heads): 10 decodings, not 145.
N_PRUNING_LARGE, PRUNING_EVERY_LARGE = 10, 16
MEASURES = (("ablation", "importance"), ("gradient", "importance_gradient"))  # a curve's order: head_summary column
DECODE_CHUNK = 25  # sentences per batch when the model translates the user's sentences (10: 1.5x slower at opus)
TRANSLATION_SHARE = 0.35  # of the progress bar, when the model translates them first (7 s of 22 s at opus-mt size)
SEED = 4242  # the draw of those sentences (the same for every session)

@dataclass(frozen=True)
class HeadReport:
    """What the Heads page draws: one row per head, the pruning curves, and what the statistics rest on."""

    summary: pd.DataFrame  # transformer.explain.head_summary's columns
    curves: dict[str, pd.DataFrame]  # pruning_curve's columns, per importance measure it follows ("ablation", ...)
    n_sentences: int
    with_alignment: bool
    relations: list[str]  # the dependency relations scored (empty without arcs)
    n_pruning: int = N_HELD_OUT  # sentences the pruning curve decodes
    own_sentences: bool = False  # the user's sentences rather than the task's
    model_references: bool = False  # the references are the model's own greedy translations
    sentences: pd.DataFrame | None = None  # the user's sentences: source and the reference used
    n_cut: int = 0  # model translations that reached the length limit without </s>
    held: tuple[torch.Tensor, torch.Tensor] | None = None  # a large model's curve sentences: run on request

    @property
    def curve(self) -> pd.DataFrame:
        """The pruning curve of the first measure (the ablation one where it was computed)."""
        return next(iter(self.curves.values()))

    @property
    def measures(self) -> list[str]:
        """The importance measures computed for every head ("ablation", "gradient"), which the page offers (a
        large model's curves come later, on request: ``own_curves``)."""
        return [by for by, column in MEASURES if self.summary[column].notna().all()]


def pruning_curves(pipeline: Pipeline, src: torch.Tensor, tgt: torch.Tensor, summary: pd.DataFrame,
                   progress: Progress | None = None) -> dict[str, pd.DataFrame]:
    """The pruning curve following each importance measure ``summary`` holds for every head (on a large model
    after every ``PRUNING_EVERY_LARGE``-th head), each an equal share of ``progress``."""
    every = PRUNING_EVERY_LARGE if is_large(pipeline) else 1
    measures = [by for by, column in MEASURES if summary[column].notna().all()]
    return {by: explain.pruning_curve(pipeline.model, src, tgt, summary, by=by, every=every,
                                      progress=within(progress, i / len(measures), (i + 1) / len(measures),
                                                      f"following the {by} importance: "),
                                      rules=pipeline.generation_rules)
            for i, by in enumerate(measures)}


def _pairs(pipeline: Pipeline, n: int) -> list[tuple[str, str]]:
    meta = pipeline.meta
    splits = make_task(builtin_task(pipeline), n_train=n, n_valid=0, n_test=0, seed=SEED,
                       src_lang=str(meta.get("src_lang", "en")), tgt_lang=str(meta.get("tgt_lang", "de")),
                       **dict(meta.get("task_options") or {}))
    return list(splits.train)


def _structure(task: str, pairs: list[tuple[str, str]], src: torch.Tensor, tgt: torch.Tensor, pipeline: Pipeline
               ) -> tuple[torch.Tensor | None, list | None, list | None]:
    """The (B, T-1, S) true alignment, the per-sentence dependency arcs of the source and those of the reference
    (on positions of ``tgt[:, 1:]``), or None where the task has none."""
    src_piece, tgt_piece = pipeline.src_tokenizer.id_to_piece, pipeline.tgt_tokenizer.id_to_piece
    alignment = torch.zeros(tgt.size(0), tgt.size(1) - 1, src.size(1), dtype=torch.bool) \
        if task in TASKS_WITH_ALIGNMENT else None
    arcs: list | None = [] if task in TASKS_WITH_ARCS else None
    target_arcs: list | None = [] if task in TASKS_WITH_ARCS else None
    for b, (source, target) in enumerate(pairs):
        pad = pipeline.config.pad_id
        src_pieces = [src_piece(int(i)) for i in src[b] if int(i) != pad]
        out_pieces = [tgt_piece(int(i)) for i in tgt[b, 1:] if int(i) != pad]
        if alignment is not None:
            truth = explain.true_alignment(task, source, target, src_pieces, out_pieces)  # (rows, S_b)
            alignment[b, : truth.size(0), : truth.size(1)] = truth
        if arcs is not None:
            arcs.append(explain.dependency_arcs(task, source, src_pieces))
            target_arcs.append(explain.dependency_arcs(task, source, out_pieces, side="target", tgt_text=target))
    return alignment, arcs, target_arcs


def compute_report(pipeline: Pipeline, progress: Progress | None = None) -> HeadReport | str:
    """Every head's statistics over ``N_SENTENCES`` sentences of the model's task and the pruning curve over
    ``N_HELD_OUT`` more, or why there are none (uncached; ``ui.compute.head_reports.head_report`` keeps it);
    ``progress`` is told as it goes (the statistics the first half, the curves the second)."""
    task = builtin_task(pipeline)
    if task is None:
        return "head statistics need sentences of a built-in task; this model was trained on a user's file"
    pairs = _pairs(pipeline, N_SENTENCES + N_HELD_OUT)
    src_rows = [pipeline.source_ids(s, warn=False)[1] for s, _ in pairs]  # cut to max_len, </s> kept
    tgt_rows = [pipeline.target_ids(t)[: pipeline.config.max_len] for _, t in pairs]
    device_ = pipeline.device
    pad_id = pipeline.config.pad_id
    src, tgt = pad(src_rows[:N_SENTENCES], device_, pad_id), pad(tgt_rows[:N_SENTENCES], device_, pad_id)
    alignment, arcs, target_arcs = _structure(task, pairs[:N_SENTENCES], src.cpu(), tgt.cpu(), pipeline)
    summary = explain.head_summary(pipeline.model, src, tgt, alignment=alignment, arcs=arcs,
                                   target_arcs=target_arcs, importance=importance_measure(pipeline),
                                   progress=within(progress, 0.0, 0.5), special=special_tokens(pipeline))
    held_src, held_tgt = pad(src_rows[N_SENTENCES:], device_, pad_id), pad(tgt_rows[N_SENTENCES:], device_, pad_id)
    curves = pruning_curves(pipeline, held_src, held_tgt, summary, within(progress, 0.5, 1.0, "the pruning curve, "))
    return HeadReport(summary, curves, N_SENTENCES, alignment is not None, scored_relations(summary, "rel_"),
                      len(pairs) - N_SENTENCES)


def special_tokens(pipeline: Pipeline) -> tuple[dict[int, str], dict[int, str]]:
    """The special tokens of the model's (source, target) tokenizers, id -> piece: what the head statistics weigh
    as "special" and name a no-op head's token by (language codes, ``</s>``, a ``<pad>`` start, ...)."""
    return pipeline.src_tokenizer.special_tokens(), pipeline.tgt_tokenizer.special_tokens()


_SUFFIXES = ("_low", "_high", "_baseline")


def scored_relations(summary: pd.DataFrame, prefix: str) -> list[str]:
    """The relations scored in ``summary`` under ``prefix`` ("rel_" source arcs, "agree_" German agreement)."""
    return [c.removeprefix(prefix) for c in summary.columns if c.startswith(prefix) and not c.endswith(_SUFFIXES)]


def runs_by_itself(pipeline: Pipeline) -> bool:
    """Whether the pages compute on opening, as they always did for a model of a built-in task (small, and its
    sentences fixed); for any other model (a Hugging Face one may have 74 M parameters) a button starts it."""
    return builtin_task(pipeline) is not None


def _greedy_rows(pipeline: Pipeline, src: torch.Tensor, progress: Progress | None = None
                 ) -> tuple[list[list[int]], int]:
    """The model's greedy translations of a padded batch as decoder rows ``start y_1 .. y_n </s>`` (no ``</s>``
    where the length limit cut one: ``batch_output_len``, on a large model the source length + BATCH_EXTRA), and
    how many were cut; ``progress`` is told before each ``DECODE_CHUNK`` sentences."""
    config = pipeline.config
    rows, cut, n = [], 0, src.size(0)
    with torch.inference_mode():
        for start in range(0, n, DECODE_CHUNK):
            tell(progress, start / n, f"translating sentences {start + 1}-{min(start + DECODE_CHUNK, n)} of {n}")
            result = greedy_decode(pipeline.model, src[start:start + DECODE_CHUNK],
                                   max_len=batch_output_len(pipeline, src.size(1)), time_budget=DECODE_SECONDS,
                                   rules=pipeline.generation_rules)
            for tokens, finished in zip(result.tokens, result.finished, strict=True):
                rows.append([config.bos_id, *tokens, *([config.eos_id] if finished else [])])
                cut += not finished
    return rows, cut


def measure_own(pipeline: Pipeline, sentences: Sentences, progress: Progress | None = None) -> HeadReport:
    """Every head's statistics over the user's sentences (uncached; ``own_report`` keeps it): their references,
    else the model's own greedy translations (the first ``TRANSLATION_SHARE`` of ``progress``)."""
    config = pipeline.config
    src = pad([pipeline.source_ids(s, warn=False)[1] for s in sentences.sources], pipeline.device, config.pad_id)
    if sentences.references is None:
        tgt_rows, cut = _greedy_rows(pipeline, src, within(progress, 0.0, TRANSLATION_SHARE))
        references = [pipeline.tgt_tokenizer.decode(row[1:]) for row in tgt_rows]
        progress = within(progress, TRANSLATION_SHARE, 1.0)
    else:
        tgt_rows, cut = [pipeline.target_ids(r) for r in sentences.references], 0
        references = list(sentences.references)
    tgt = pad(tgt_rows, pipeline.device, config.pad_id)
    large = is_large(pipeline)
    n_pruning = min(len(tgt_rows), N_PRUNING_LARGE if large else N_PRUNING_USER)
    held = (src[:n_pruning], tgt[:n_pruning])
    summary = explain.head_summary(pipeline.model, src, tgt, importance=importance_measure(pipeline),
                                   progress=within(progress, 0.0, 1.0 if large else 0.5),
                                   special=special_tokens(pipeline))
    # a large model's curves wait for a second button (own_curves); a small one's come now
    curves = {} if large else pruning_curves(pipeline, *held, summary,
                                             within(progress, 0.5, 1.0, "the pruning curve, "))
    table = pd.DataFrame({"source": sentences.sources, "reference": references})
    return HeadReport(summary, curves, len(tgt_rows), False, [], n_pruning, True, sentences.references is None,
                      table, cut, held if large else None)


def own_curves(model_key: str, device: str, pipeline: Pipeline, sentences: Sentences, report: HeadReport
               ) -> dict[str, pd.DataFrame]:
    """The report's pruning curves; on a large model, where the statistics come without them (a minute more at
    opus-mt size), computed now on its held sentences (a progress bar) and kept for these sentences."""
    if report.curves:
        return report.curves
    assert report.held is not None
    return shared("head_curves", (model_key, device, sentences.sources, sentences.references),
                  lambda progress: pruning_curves(pipeline, *report.held, report.summary, progress),
                  label="Switching the heads off, least important first:")


def importance_measure(pipeline: Pipeline) -> str:
    """``head_summary``'s ``importance=``: both measures for small models; for large ones only Michel et al.'s
    gradient importance (one forward and backward for all heads), the ablation (one forward per head) being
    minutes there."""
    return "gradient" if is_large(pipeline) else "both"


def own_report(model_key: str, device: str, pipeline: Pipeline, sentences: Sentences) -> HeadReport:
    """Every head's statistics over the user's sentences (no true alignment), the pruning curve on the first
    ``N_PRUNING_USER`` of them; the references are the user's, else the model's own greedy translations.
    Computed once per server with a progress bar (``shared``), kept for these sentences."""
    return shared("head_reports_own", (model_key, device, sentences.sources, sentences.references),
                  lambda progress: measure_own(pipeline, sentences, progress),
                  label="Measuring every head on your sentences:")


BEST_COLUMNS = ["what", "kind", "layer", "head", "score", "95% interval", "position alone", "finding"]


def best_heads(report: HeadReport) -> pd.DataFrame:
    """The best head for the alignment, for each dependency relation of the source (encoder) and each agreement
    relation of the German (decoder, "agreement nsubj"): its score, its 95% bootstrap interval, what position
    alone achieves on the same rows (``head_summary``'s baselines), and whether that makes a finding: a best head
    that does no better than position is none, and the table says so."""
    summary = report.summary
    rows = []
    for column, what in [("alignment", "alignment"), *((f"rel_{r}", r) for r in report.relations),
                         *((f"agree_{r}", f"agreement {r}") for r in scored_relations(summary, "agree_"))]:
        scores = summary[column].astype(float)
        if not scores.notna().any():
            continue
        best = summary.loc[scores.idxmax()]
        score, low, high = float(best[column]), float(best[f"{column}_low"]), float(best[f"{column}_high"])
        baseline = float(best.get(f"{column}_baseline", float("nan")))
        if explain.beats_position(score, baseline, low):
            finding = f"{score:.0%} against {baseline:.0%} by position alone"
        else:
            finding = f"none: position alone gets {baseline:.0%}"
        rows.append({"what": what, "kind": best["kind"], "layer": int(best["layer"]), "head": int(best["head"]),
                     "score": score, "95% interval": f"{low:.0%}–{high:.0%}", "position alone": baseline,
                     "finding": finding})
    return pd.DataFrame(rows, columns=BEST_COLUMNS)
