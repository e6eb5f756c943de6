"""Word alignments read off every attribution method and every cross-attention head, scored against gold links by
the alignment error rate over many sentences: the Explain page's "Word alignments" section.

Gold links come from the model's built-in task (``true_alignment`` lifted to words by ``gold_links``) or from the
user: source lines, their reference translations and a Pharaoh file (fast_align's format: "i-j" sure, "i?j" or
"ipj" possible, source word first, counted from 0; ``read_pharaoh``). Every sentence is teacher-forced on its
reference. Each map becomes links by ``word_alignment`` (the argmax source piece of every output piece, pieces
grouped into words, as Garg et al. 2019 read attention), each cross-attention head's weights too, optionally with
Shift-Att (Chen et al. 2020, "Accurate Word Alignment Induction from Neural Machine Translation": a word is read
where it is the decoder's input). AER is Och & Ney 2003's corpus-level 1 − (|A∩S| + |A∩P|) / (|A| + |S|).

Cost (200 sentences within 30 s on the shipped models): the cheap methods and the heads run on every sentence,
the costly ones (``ui.compute.explain.costly``) on the first ``COSTLY_SENTENCES``; ALTI+ and value zeroing also
for the last decoder layer alone (``layer_view``), whose target words with undefined rows (NaN) are left out of
that map's AER on both sides and counted in "words undefined"; integrated gradients (16 to
128 forward and backward passes per sentence) is left out. On a large model (opus-mt size: attention, rollout,
norm and ALTI+ took 11 s for 20 sentences of 20 tokens) the costly methods are left out and the others run on the first
``COSTLY_SENTENCES``; the heads, read off one forward, on every sentence. Each row says how many sentences it rests
on.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import pandas as pd
import streamlit as st
import torch

from transformer.explain import (
    METHODS,
    REGISTRY,
    alignment_error_rate,
    attribute,
    gold_links,
    read_pharaoh,
    true_alignment,
    undefined_words,
    word_alignment,
    word_ids,
)
from transformer.explain.alignment import TASKS_WITH_ALIGNMENT
from transformer.explain.attention_maps import traced
from transformer.explain.progress import Progress, tell
from transformer.pipeline import Pipeline, clean_text
from transformer.text.ids import pad
from transformer.text.tasks import make_task
from ui.compute.analysis import builtin_task
from ui.compute.explain import LAYERED, costly, label, layer_view
from ui.compute.heads import SEED
from ui.compute.model_size import is_large
from ui.compute.shared_work import shared
from ui.compute.user_sentences import Sentences

N_TASK_SENTENCES = 200  # the task's generated sentences scored
COSTLY_SENTENCES = 50  # the costly methods run on the first this many (on a small model)
CHUNK = 20  # sentences per forward, sorted by length (less padding)
LEFT_OUT = {m.name: m.left_out_of_batches for m in REGISTRY.values() if m.left_out_of_batches}
Links = frozenset[tuple[int, int]]
COLUMNS = ["alignment from", "AER", "sentences", "words undefined"]


@dataclass(frozen=True)
class GoldSet:
    """Sentences to teacher-force on their references, with gold (source word, target word) links."""

    src_ids: tuple[tuple[int, ...], ...]  # per sentence: the pieces' ids, then </s>
    tgt_ids: tuple[tuple[int, ...], ...]  # per sentence: start id, y_1 .. y_n, </s>
    src_words: tuple[tuple[int, ...], ...]  # word_ids of every source piece
    tgt_words: tuple[tuple[int, ...], ...]  # word_ids of every output piece y_1 .. y_n </s>
    sure: tuple[Links, ...]
    possible: tuple[Links, ...]
    key: str  # what the cache knows these sentences by


@dataclass(frozen=True)
class AlignmentScores:
    """AER of every method (``methods``) and every cross-attention head (``heads``: (layer, head, shift) -> AER)."""

    methods: dict[str, tuple[float, int]]  # method or ``layer_view`` -> (AER, sentences)
    heads: dict[tuple[int, int, bool], float]
    n_sentences: int
    left_out: dict[str, str]  # method -> why it is not scored here
    undefined: dict[str, float] = field(default_factory=dict)  # method -> share of target words left out (NaN rows)


def _pieces(tokenizer, ids) -> list[str]:
    return [tokenizer.id_to_piece(int(i)) for i in ids]


def _words(pipeline: Pipeline, src: list[int], tgt: list[int], unit: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    codes = pipeline.language_codes  # a multilingual model's source and forced target codes belong to no word
    return (tuple(word_ids(_pieces(pipeline.src_tokenizer, src), unit, special=codes)),
            tuple(word_ids(_pieces(pipeline.tgt_tokenizer, tgt[1:]), unit, special=codes)))


@st.cache_resource(max_entries=16, show_spinner=False)
def _task_gold(model_key: str, n: int, _pipeline: Pipeline) -> GoldSet | str:
    task = builtin_task(_pipeline)
    if task not in TASKS_WITH_ALIGNMENT:
        return (f"the {task} task has no true alignment" if task else "this model has no built-in task") + \
            ": give sentences, their references and a Pharaoh file of gold links"
    meta = _pipeline.meta
    pairs = make_task(task, n_train=n, n_valid=0, n_test=0, seed=SEED, src_lang=str(meta.get("src_lang", "en")),
                      tgt_lang=str(meta.get("tgt_lang", "de")), **dict(meta.get("task_options") or {})).train
    unit = "word" if task == "sentences" else "piece"  # the other tasks' inputs are one word: align their pieces
    rows: list[tuple] = []
    for source, target in pairs:
        _, src, _, cut = _pipeline.source_ids(source, warn=False)
        tgt = _pipeline.target_ids(target)
        if cut or len(tgt) > _pipeline.config.max_len:
            continue
        src_words, tgt_words = _words(_pipeline, src, tgt, unit)
        truth = true_alignment(task, source, target, _pieces(_pipeline.src_tokenizer, src),
                               _pieces(_pipeline.tgt_tokenizer, tgt[1:]))
        rows.append((tuple(src), tuple(tgt), src_words, tgt_words, frozenset(gold_links(truth, src_words, tgt_words))))
    src_ids, tgt_ids, src_words, tgt_words, sure = zip(*rows, strict=True)
    return GoldSet(src_ids, tgt_ids, src_words, tgt_words, sure, tuple(frozenset() for _ in sure), f"task:{n}")


def task_gold(model_key: str, pipeline: Pipeline, n: int = N_TASK_SENTENCES) -> GoldSet | str:
    """``n`` sentences of the model's built-in task with their true alignment as word links, or why there are none."""
    return _task_gold(model_key, n, pipeline)


def uploaded_gold(pipeline: Pipeline, sentences: Sentences, pharaoh: str) -> GoldSet:
    """The user's sentences and references with the links of a Pharaoh file; ValueError (a message for the page)
    for a missing reference, a line that is no Pharaoh line, a line count that differs from the sentences', or a
    link whose word index is out of range."""
    if sentences.references is None:
        raise ValueError("gold links link words of a reference translation: give one reference per source line")
    sure, possible = read_pharaoh(pharaoh)
    lines = pharaoh.splitlines()
    while len(sure) > len(sentences.sources) and not lines[len(sure) - 1].strip():  # trailing blank lines
        sure, possible = sure[:-1], possible[:-1]
    if len(sure) != len(sentences.sources):
        raise ValueError(f"the Pharaoh file has {len(sure)} lines for {len(sentences.sources)} sentences: give one "
                         "line of links per sentence, in the same order")
    rows: list[tuple] = []
    for number, (source, reference) in enumerate(zip(sentences.sources, sentences.references, strict=True), 1):
        src = pipeline.source_ids(source, warn=False)[1]
        tgt = pipeline.target_ids(reference)
        n_src, n_tgt = len(clean_text(source).split()), len(clean_text(reference).split())
        for i, j in sorted(sure[number - 1] | possible[number - 1]):
            if i >= n_src or j >= n_tgt:
                raise ValueError(f"line {number}: link {i}-{j} is out of range: the source has {n_src} words and "
                                 f"the reference {n_tgt} (indices count from 0, source first)")
        src_words, tgt_words = _words(pipeline, src, tgt, "word")
        for side, line, words, count in (("source", source, src_words, n_src), ("reference", reference, tgt_words,
                                                                                n_tgt)):
            if max(words, default=-1) + 1 != count:
                raise ValueError(f"line {number}: the model's pieces make {max(words, default=-1) + 1} words of the "
                                 f"{side} {line[:60]!r}, which has {count} space-separated words")
        rows.append((tuple(src), tuple(tgt), src_words, tgt_words))
    src_ids, tgt_ids, src_words, tgt_words = zip(*rows, strict=True)
    digest = hashlib.sha256("\x00".join([*sentences.sources, *sentences.references, pharaoh]).encode()).hexdigest()
    return GoldSet(src_ids, tgt_ids, src_words, tgt_words, tuple(frozenset(s) for s in sure),
                   tuple(frozenset(p) for p in possible), f"upload:{digest}")


def _batches(gold: GoldSet, count: int, device: str, pad_id: int):
    """The first ``count`` sentences in chunks of ``CHUNK`` of similar length: (the chunk's start in that order,
    indices, (B, S) src, (B, T) tgt)."""
    order = sorted(range(count), key=lambda i: len(gold.src_ids[i]) + len(gold.tgt_ids[i]))
    for start in range(0, count, CHUNK):
        chunk = order[start:start + CHUNK]
        yield (start, chunk, pad([list(gold.src_ids[i]) for i in chunk], device, pad_id),
               pad([list(gold.tgt_ids[i]) for i in chunk], device, pad_id))


def _links(gold: GoldSet, index: int, scores: torch.Tensor, shift: bool = False) -> set[tuple[int, int]]:
    """One sentence's links from its row of a padded (B, T-1, S) map, cut to its own size."""
    rows, columns = len(gold.tgt_ids[index]) - 1, len(gold.src_ids[index])
    return word_alignment(scores[:rows, :columns].numpy(), gold.src_words[index], gold.tgt_words[index], shift=shift)


def _undefined(gold: GoldSet, index: int, scores: torch.Tensor) -> set[int]:
    """One sentence's target words that the map leaves undefined (NaN rows): out of its AER on both sides."""
    rows, columns = len(gold.tgt_ids[index]) - 1, len(gold.src_ids[index])
    return undefined_words(scores[:rows, :columns], gold.tgt_words[index])


def _aer(gold: GoldSet, links: dict[int, set], dropped: dict[int, set[int]] | None = None) -> float:
    """Corpus AER of the first len(links) sentences; ``dropped``: per sentence, target words left out of the
    gold links too (a method's undefined rows are no misses)."""
    count, dropped = len(links), dropped or {}

    def kept(gold_links: frozenset, i: int) -> set:
        return {(s, t) for s, t in gold_links if t not in dropped.get(i, ())}

    return alignment_error_rate([links[i] for i in range(count)], [kept(gold.sure[i], i) for i in range(count)],
                                [kept(gold.possible[i], i) for i in range(count)])


def _views(model, method: str) -> list[tuple[str, dict]]:
    """The maps scored for ``method``: its roll-out, and for ALTI+ and value zeroing the last decoder layer alone."""
    last = model.config.n_decoder_layers - 1
    return [(method, {})] + ([(layer_view(method, last), {"layer": last})] if method in LAYERED else [])


def _measure(pipeline: Pipeline, gold: GoldSet, progress: Progress | None = None) -> AlignmentScores:
    """Every method's and head's AER on ``gold`` (uncached; ``alignment_scores`` keeps it); ``progress`` is told
    before each chunk of sentences of each method, and of the heads."""
    model, pad_id, n = pipeline.model, pipeline.config.pad_id, len(gold.src_ids)
    large = is_large(pipeline)
    left_out = dict(LEFT_OUT)
    counts: dict[str, int] = {}  # method -> the first this many sentences
    for method in METHODS:
        if method in left_out or (large and costly(method)):
            left_out.setdefault(method, "too slow at this model's size")
        else:
            counts[method] = min(n, COSTLY_SENTENCES) if costly(method) or large else n  # opus-mt: ~0.5 s each
    views = {method: _views(model, method) for method in counts}
    steps = sum(len(views[m]) * -(-count // CHUNK) for m, count in counts.items()) + -(-n // CHUNK)
    done = 0
    methods: dict[str, tuple[float, int]] = {}
    undefined: dict[str, float] = {}
    for method, count in counts.items():
        for key, options in views[method]:
            links: dict[int, set] = {}
            dropped: dict[int, set[int]] = {}
            for start, chunk, src, tgt in _batches(gold, count, pipeline.device, pad_id):
                tell(progress, done / steps, f"{label(key)}: sentences {start + 1}-{start + len(chunk)} of {count}")
                maps = attribute(model, src, tgt, method, **options).source.cpu()
                links.update({i: _links(gold, i, maps[b]) for b, i in enumerate(chunk)})
                dropped.update({i: _undefined(gold, i, maps[b]) for b, i in enumerate(chunk)})
                done += 1
            methods[key] = (_aer(gold, links, dropped), count)
            words = sum(max(gold.tgt_words[i], default=-1) + 1 for i in range(count))
            undefined[key] = sum(len(d) for d in dropped.values()) / max(words, 1)
    head_links: dict[tuple[int, int, bool], dict[int, set]] = {}
    for start, chunk, src, tgt in _batches(gold, n, pipeline.device, pad_id):
        tell(progress, done / steps, f"cross-attention heads: sentences {start + 1}-{start + len(chunk)} of {n}")
        trace = traced(model, src, tgt)
        for layer in range(model.config.n_decoder_layers):
            weights = trace.attention("cross", layer).cpu()  # (B, H, T-1, S)
            for head in range(weights.size(1)):
                for shift in (False, True):
                    found = head_links.setdefault((layer, head, shift), {})
                    found.update({i: _links(gold, i, weights[b, head], shift) for b, i in enumerate(chunk)})
        done += 1
    heads = {site: _aer(gold, links) for site, links in head_links.items()}
    tell(progress, 1.0, "done")
    return AlignmentScores(methods, heads, n, left_out, undefined)


def alignment_scores(model_key: str, device: str, pipeline: Pipeline, gold: GoldSet) -> AlignmentScores:
    """AER of every method and cross-attention head on ``gold``'s sentences, with a progress bar, kept per model
    and sentences for every browser (``shared_work``)."""
    return shared("alignment_scores", (model_key, device, gold.key),
                  lambda progress: _measure(pipeline, gold, progress),
                  label="Aligning every sentence with every method and head:")


def aer_table(scores: AlignmentScores, shift: bool = False) -> pd.DataFrame:
    """Every method and head (with Shift-Att or without) as a row: what the links come from, AER, the number of
    sentences and the share of target words left out because the map leaves their rows undefined (NaN: ALTI+,
    value zeroing; those words count neither as links nor as gold), best (lowest AER) first."""
    rows = [{"alignment from": label(m), "AER": aer, "sentences": count,
             "words undefined": scores.undefined.get(m, 0.0)} for m, (aer, count) in scores.methods.items()]
    rows += [{"alignment from": f"cross-attention layer {layer} head {head}" + (" (Shift-Att)" if shift else ""),
              "AER": aer, "sentences": scores.n_sentences, "words undefined": 0.0}
             for (layer, head, shifted), aer in scores.heads.items() if shifted == shift]
    return pd.DataFrame(rows, columns=COLUMNS).sort_values("AER", na_position="last", kind="stable") \
        .reset_index(drop=True)
