"""The cached computations the pages draw: one input through the model, a padded batch, the comparison with
torch.nn.Transformer, logits with heads switched off, a retrained tokenizer, and a model's example sentences.

Each is cached across pages, reruns and browser sessions (keyed by the model's key, the device
and the inputs; the pipeline itself is passed unhashed) and is never modified after it is built.
One input's analysis, which holds every score and weight, goes into a cache bounded by bytes
(``ANALYSIS_CACHE_BYTES``, ``ui/compute/byte_cache.py``); the others use ``st.cache_resource``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import streamlit as st
import torch

from transformer.decoding import greedy_decode
from transformer.network.masks import decoder_real
from transformer.network.trace import Trace
from transformer.output_bounds import DECODE_SECONDS, output_bound
from transformer.pipeline import Pipeline, TranslationTrace
from ui.compute.byte_cache import ByteLRU
from ui.compute.model_size import is_large
from ui.state.settings import N_EXAMPLES, RECORD_TOP_K

Ablation = dict[tuple[str, int], Sequence[int]]  # (kind, layer) -> heads switched off


@dataclass(frozen=True)
class Analysis:
    """One input sentence through the model: what the pages draw.

    ``trace`` is the teacher-forced forward on the source and the decoder input
    ``<s> y_1 .. y_n`` (the greedy output): ``src_tokens`` label its source positions,
    ``decoder_tokens`` its decoder positions; position t predicts ``output_tokens[t]``.
    """

    text: str  # the cleaned input
    result: TranslationTrace
    src_tokens: list[str]
    decoder_tokens: list[str]
    output_text: str
    eos_id: int  # the model's end-of-sequence id (3 in our vocabularies, 0 in a Marian model's)

    @property
    def trace(self) -> Trace:
        return self.result.trace

    @property
    def src_ids(self) -> list[int]:
        return self.result.src_ids if "src.ids" not in self.trace else self.trace["src.ids"][0].tolist()

    @property
    def decoder_ids(self) -> list[int]:
        return self.trace["tgt.ids"][0].tolist()

    @property
    def output_tokens(self) -> list[str]:
        """What each decoder position predicts: y_1 .. y_n, then </s> if decoding finished."""
        cut = "(time limit)" if self.result.timed_out else "(max length)"
        predicted = [*self.result.output_pieces, "</s>" if self.result.finished else cut]
        return predicted[: len(self.decoder_tokens)]


def first_chosen_output(pipeline: Pipeline, analysis: Analysis) -> int:
    """The first output position the model chose itself, for a page's default: 1 where the model's rules force the
    first token (NLLB's and mBART-50's target language code: explaining it explains nothing but the rule), else 0."""
    rules = pipeline.generation_rules
    forced = rules.forced_bos_id if rules is not None else None
    output = analysis.result.output_ids
    return 1 if forced is not None and len(output) > 1 and output[0] == forced else 0


@dataclass(frozen=True)
class BatchAnalysis:
    """A padded batch through the model: (B, S) source and (B, T) decoder ids, their pieces, the Trace."""

    src_ids: torch.Tensor
    tgt_ids: torch.Tensor
    src_pieces: list[list[str]]  # per sentence, without padding
    tgt_pieces: list[list[str]]
    trace: Trace
    truncated: tuple[int, ...] = ()  # the sentences (0-based) cut to the model's max_len source positions
    unfinished: tuple[int, ...] = ()  # the sentences whose output reached ``output_cap`` without </s> of its own
    output_cap: int = 0  # how many tokens greedy decoding could produce per sentence
    forced_end: bool = False  # the model's rules force </s> at ``output_cap`` (Marian, BART): there it ends


def max_output_len(pipeline: Pipeline, src_len: int | None = None) -> int:
    """How many tokens greedy decoding may produce here: the training data's longest target (saved in the
    checkpoint), leaving room for <s> in the traced forward's positions. A model that saved no such bound (a
    Hugging Face model, whose config allows 512 tokens; an uploaded checkpoint without it) gets, given the source
    length, ``LENGTH_FACTOR`` tokens per source token + ``LENGTH_EXTRA``, as Marian-NMT bounds its output; every
    model at most ``MAX_OUTPUT_TOKENS`` (``transformer.output_bounds``), so a model that never says </s> (a
    looping translation, a random stand-in) cannot hold the server for minutes."""
    return output_bound(min(pipeline.max_output_len, max(1, pipeline.config.max_len - 1)), pipeline.meta, src_len)


BATCH_EXTRA = 10  # on a large model, a batch's outputs stop at its longest source + this many tokens


def batch_output_len(pipeline: Pipeline, src_len: int) -> int:
    """How many tokens a batch decodes per sentence: as a translation (``max_output_len``), but on a large model
    at most the padded source length + ``BATCH_EXTRA``. Every decoding step reads the whole output projection
    (58,101 x 512 floats at opus-mt size, ~20 ms a step on 2 cores); a translation is about as long as its
    source, so a real model stops well inside this bound, while one that never says </s> (a random stand-in)
    no longer decodes three outputs to 3 tokens per source token + 10 (2.5 s for the default batch) just to
    show what the masks do."""
    limit = max_output_len(pipeline, src_len)
    return min(limit, src_len + BATCH_EXTRA) if is_large(pipeline) else limit


def source_len(pipeline: Pipeline, text: str) -> int | None:
    """The number of source ids ``text`` gives (</s> included), or None when it gives none."""
    try:
        return len(pipeline.source_ids(text, warn=False)[1])
    except ValueError:
        return None


def _ablate_key(ablate: Ablation | None) -> tuple:
    """A hashable, order-free form of an ablation, for the cache keys."""
    return tuple(sorted((kind, layer, tuple(sorted(heads))) for (kind, layer), heads in (ablate or {}).items()))


def _ablation(ablate_key: tuple) -> dict[tuple[str, int], list[int]] | None:
    return {(kind, layer): list(heads) for kind, layer, heads in ablate_key} or None


# --- one input -------------------------------------------------------------------------------------


ANALYSIS_CACHE_BYTES = 256 * 2**20  # every session's traces together; a shipped model's is ~0.1-0.2 MB
_ANALYSES = ByteLRU(ANALYSIS_CACHE_BYTES)


def analysis_bytes(analysis: Analysis) -> int:
    """What a cached analysis holds: its trace's tensors and the decoding records' tensors."""
    trace = analysis.result.trace
    total = sum(trace[name].numel() * trace[name].element_size() for name in trace)
    for step in analysis.result.steps.steps:
        total += sum(v.numel() * v.element_size() for v in vars(step).values() if isinstance(v, torch.Tensor))
    return total


def _analyse(model_key: str, device: str, text: str, ablate_key: tuple, _pipeline: Pipeline) -> Analysis:
    if getattr(_pipeline, "kind", "") == "decoder":  # a language model: the prompt and its continuation
        result = _pipeline.trace(text, ablate=_ablation(ablate_key), record_top_k=RECORD_TOP_K, warn=False)
        pieces = _pipeline.tokenizer.display_pieces(result.trace["tgt.ids"][0].tolist())
        return Analysis(result.src_text, result, result.src_pieces, pieces, result.output_text,
                        _pipeline.eos_ids[0])
    # unknown characters and truncation are reported from the result (warn=False: no process-wide filter)
    limit = max_output_len(_pipeline, source_len(_pipeline, text))
    result = _pipeline.trace(text, ablate=_ablation(ablate_key), max_len=limit,
                             record_top_k=RECORD_TOP_K, warn=False)
    src_vocab, tgt_vocab = _pipeline.src_tokenizer, _pipeline.tgt_tokenizer
    src_tokens = [src_vocab.id_to_piece(int(i)) for i in result.trace["src.ids"][0]]
    decoder_tokens = [tgt_vocab.id_to_piece(int(i)) for i in result.trace["tgt.ids"][0]]
    return Analysis(result.src_text, result, src_tokens, decoder_tokens, result.output_text, _pipeline.config.eos_id)


def analyse(model_key: str, device: str, pipeline: Pipeline, text: str, ablate: Ablation | None = None) -> Analysis:
    """``text`` translated greedily, with the Trace of its teacher-forced forward (heads in ``ablate`` off).

    Raises ValueError for an input that is empty after cleaning or a bad ablation.
    """
    key = (model_key, device, text, _ablate_key(ablate))
    return _ANALYSES.get_or_compute(key, lambda: _analyse(*key, pipeline), analysis_bytes)


@st.cache_resource(max_entries=8, show_spinner="Copying the weights into torch.nn.Transformer...")
def _reference(model_key: str, device: str, _pipeline: Pipeline) -> torch.nn.Module:
    from transformer.network.interop import to_torch

    return to_torch(_pipeline.model).eval()


@st.cache_resource(max_entries=64, show_spinner=False)
def _parity(model_key: str, device: str, text: str, _pipeline: Pipeline, _analysis: Analysis
            ) -> tuple[torch.Tensor, torch.Tensor]:
    reference = _reference(model_key, device, _pipeline)
    src = _analysis.trace["src.ids"]
    tgt = _analysis.trace["tgt.ids"]
    with torch.inference_mode():
        return _pipeline.model(src, tgt), reference(src, tgt)


def parity_gap(pipeline: Pipeline) -> str | None:
    """Why torch.nn.Transformer cannot reproduce this model (a Marian model's switches), or None when it can."""
    from transformer.network.interop import torch_reference_gap

    return torch_reference_gap(pipeline.config)


def parity(model_key: str, device: str, pipeline: Pipeline, analysis: Analysis
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits of this model and of its copy built from torch.nn.Transformer on the analysed input."""
    return _parity(model_key, device, analysis.text, pipeline, analysis)


@st.cache_resource(max_entries=64, show_spinner=False)
def _ablated_logits(model_key: str, device: str, text: str, ablate_key: tuple, _pipeline: Pipeline,
                    _analysis: Analysis) -> torch.Tensor:
    with torch.inference_mode():
        src = _analysis.trace["src.ids"] if "src.ids" in _analysis.trace else None  # None: a decoder-only model
        return _pipeline.model(src, _analysis.trace["tgt.ids"], ablate=_ablation(ablate_key))


def ablated_logits(model_key: str, device: str, pipeline: Pipeline, analysis: Analysis,
                   ablate: Ablation) -> torch.Tensor:
    """Logits on the analysed input (same decoder input) with the given heads switched off."""
    return _ablated_logits(model_key, device, analysis.text, _ablate_key(ablate), pipeline, analysis)


# --- a batch ------------------------------------------------------------------------------------------


def cached_analysis(model_key: str, device: str, text: str) -> Analysis | None:
    """The shared analysis of ``text`` (no heads off) if a page already computed it, else None: nothing is run."""
    return _ANALYSES.get((model_key, device, text, ()))


def batch_row(result: TranslationTrace, limit: int, cap: int, forced: bool, eos_id: int) -> list[int] | None:
    """The ids a batch's greedy decoding to ``cap`` tokens gives this sentence (its ``</s>`` last when it says one),
    read off its translation ``result`` decoded to ``limit`` tokens, or None when that decoding could differ.

    Both decodings take the same steps with the same rules but for the length bound (and ``forced``: the ``</s>``
    a model's rules force at it): up to the shorter bound the ids are the same. With ``limit >= cap`` the row is
    the translation's first ``cap`` ids, its last one ``</s>`` where the bound forces it; with ``limit < cap`` only a
    translation that said ``</s>`` of its own before its bound is the whole row. A translation stopped by its
    time budget is not."""
    ids = [*result.output_ids, eos_id] if result.finished else list(result.output_ids)
    if result.timed_out and not result.finished:
        return None
    if limit >= cap:
        return [*ids[: cap - 1], eos_id] if forced and len(ids) >= cap else ids[:cap]
    said_it = result.finished and (len(ids) < limit or not forced)  # at ``limit`` a forced </s> says nothing
    return ids if said_it else None


def _batch_outputs(model_key: str, device: str, pipe: Pipeline, texts: tuple[str, ...], cap: int, forced: bool
                   ) -> list[list[int]]:
    """Each sentence's greedy output ids (``</s>`` last where it came within ``cap``): a sentence a page already
    translated (the sidebar's input, analysed by every page) is read off that translation (``batch_row``); only
    the others are decoded, as one batch. At NLLB size the Masks page decoded the sidebar's input a second time,
    6 s of its first visit (docs/benchmarks.md)."""
    eos = pipe.config.eos_id
    rows: list[list[int] | None] = []
    for text in texts:
        known = cached_analysis(model_key, device, text)
        rows.append(None if known is None else
                    batch_row(known.result, max_output_len(pipe, source_len(pipe, text)), cap, forced, eos))
    todo = [i for i, row in enumerate(rows) if row is None]
    if todo:
        src_ids = pipe.encode_source([texts[i] for i in todo], warn=False)  # (B', S'), padded
        with torch.inference_mode():
            decoded = greedy_decode(pipe.model, src_ids, max_len=cap, time_budget=DECODE_SECONDS,
                                    rules=pipe.generation_rules)  # a forced first token, as translate has it
        for i, tokens, done in zip(todo, decoded.tokens, decoded.finished, strict=True):
            rows[i] = [*tokens, eos] if done else list(tokens)
    return rows  # type: ignore[return-value]  # every None was filled


@st.cache_resource(max_entries=32, show_spinner="Running the batch...")
def _batch(model_key: str, device: str, texts: tuple[str, ...], _pipeline: Pipeline) -> BatchAnalysis:
    pipe = _pipeline
    pad, eos = pipe.config.pad_id, pipe.config.eos_id
    src_ids = pipe.encode_source(list(texts), warn=False)  # (B, S), padded
    cap = batch_output_len(pipe, src_ids.size(1))
    truncated = tuple(i for i, text in enumerate(texts) if pipe.source_ids(text, warn=False)[3])
    forced = pipe.generation_rules is not None and pipe.generation_rules.forced_eos_id is not None
    rows = [[pipe.config.bos_id, *ids] for ids in _batch_outputs(model_key, device, pipe, texts, cap, forced)]
    said = [len(row) > 1 and row[-1] == eos for row in rows]  # </s> generated (not the start, even if it is </s>)
    width = max(len(row) for row in rows)
    tgt_ids = torch.tensor([row + [pad] * (width - len(row)) for row in rows], device=src_ids.device)  # (B, 1 + T)
    outputs = tgt_ids[:, 1:]  # a view: the start id stays, even where it is </s> (BART, mBART, NLLB)
    outputs[outputs == eos] = pad  # the decoder input stops before </s>
    width = int(decoder_real(tgt_ids, pad).sum(dim=1).max())
    tgt_ids = tgt_ids[:, :width][:, : pipe.config.max_len]
    trace = Trace()
    with torch.inference_mode():  # to the decoder's output: the page reads attention, never the logits (whose
        memory = pipe.model.encode(src_ids, trace=trace)  # B x T x V floats were 256,206 wide at NLLB size)
        pipe.model.decode_states(tgt_ids, memory, pipe.model.memory_mask(src_ids), trace=trace)

    def pieces(tokenizer: Any, ids: torch.Tensor, real: torch.Tensor) -> list[list[str]]:
        return [[tokenizer.id_to_piece(int(i)) for i, keep in zip(row, kept, strict=True) if keep]
                for row, kept in zip(ids, real, strict=True)]

    # the decoder's first position is its start id, real even when that is the pad id (Marian)
    return BatchAnalysis(src_ids, tgt_ids, pieces(pipe.src_tokenizer, src_ids, src_ids != pad),
                         pieces(pipe.tgt_tokenizer, tgt_ids, decoder_real(tgt_ids, pad)), trace, truncated,
                         tuple(i for i, (row, done) in enumerate(zip(rows, said, strict=True))
                               if not done or forced and len(row) - 1 >= cap), cap, forced)


def batch(model_key: str, device: str, pipeline: Pipeline, texts: Sequence[str]) -> BatchAnalysis:
    """Several sentences as one padded batch: greedy outputs (at most ``batch_output_len`` tokens; a sentence
    already translated by a page is not decoded again) as decoder inputs, one traced forward up to the decoder's
    output (the trace has no ``logits``)."""
    return _batch(model_key, device, tuple(texts), pipeline)


# --- text: examples and other tokenizers ------------------------------------------------------------


@st.cache_data(max_entries=64, show_spinner=False)
def _examples(task: str | None, options: dict, src_lang: str, tgt_lang: str) -> list[tuple[str, str]]:
    """A few (source, target) pairs of the model's task, freshly generated."""
    from transformer.text.tasks import TASKS, make_task

    if task not in TASKS:
        return []
    try:
        splits = make_task(task, n_train=N_EXAMPLES, n_valid=0, n_test=0, seed=12345,
                           src_lang=src_lang, tgt_lang=tgt_lang, **options)
    except Exception:  # an option this version of the tasks does not know: no examples, not a broken app
        return []
    return sorted(splits.train, key=lambda pair: len(pair[0]))


def builtin_task(pipeline: Pipeline) -> str | None:
    """The built-in task a model was trained on (its examples, alignment and grammar are known), or None for a
    model trained on a user's file or on a task this version does not have."""
    from transformer.text.tasks import TASKS

    task = pipeline.meta.get("task")
    return task if task in TASKS and not pipeline.meta.get("data") else None


def hub_examples(model_type: str, name: str, src_lang: str | None) -> list[str]:
    """Example inputs for a Hugging Face folder, as its family gives them (``Family.examples_for``: English
    sentences where the model reads English, T5's with its translation prefix; none where the source is another
    language, in which we hold no sentences)."""
    from transformer.hub.families import family_or_none

    family = family_or_none(model_type)
    return family.examples_for(name, src_lang) if family else []


def examples_for(pipeline: Pipeline) -> list[tuple[str, str]]:
    """Example (source, expected target) pairs for a model, from its training meta (a Hugging Face model reading
    English gets a few English sentences, with no expected target: ``hub_examples``)."""
    meta = pipeline.meta
    given = meta.get("examples")
    if isinstance(given, list) and given:
        return [(str(e[0]), str(e[1])) if isinstance(e, list | tuple) else (str(e), "") for e in given]
    if meta.get("source") == "huggingface":
        texts = hub_examples(str(meta.get("model_type", "")), str(meta.get("name", "")),
                             getattr(pipeline, "src_lang", None))
        return [(text, "") for text in texts]
    return _examples(builtin_task(pipeline), dict(meta.get("task_options") or {}),
                     str(meta.get("src_lang", "en")), str(meta.get("tgt_lang", "de")))


def expected_output(pipeline: Pipeline, text: str, examples: Sequence[tuple[str, str]]) -> str | None:
    """What the sidebar says under the input of what the model should answer: an example's target, else the
    reference the model's built-in task writes for the input (``transformer.text.domains.expected_target``: a
    user's own valid input too), else why there is none. None for an empty input."""
    from transformer.text.domains import expected_target

    if not text.strip():
        return None
    given = dict(examples).get(text)
    if given:
        return f"Expected output: {given}"
    task, meta = builtin_task(pipeline), pipeline.meta
    if task is None:
        why = ("a Hugging Face model translates open text, where no rule gives the one right answer"
               if meta.get("source") == "huggingface" else
               "this model learnt from its own pairs, and no rule gives the answer for a new input")
        return f"No expected output: {why}."
    try:
        return "Expected output: " + expected_target(task, text, src_lang=str(meta.get("src_lang", "en")),
                                                     tgt_lang=str(meta.get("tgt_lang", "de")),
                                                     options=dict(meta.get("task_options") or {}))
    except ValueError as error:
        return f"No expected output: {error}."


@st.cache_resource(max_entries=16, show_spinner="Training the tokenizer...")
def retrained_tokenizer(task: str, options_items: tuple, src_lang: str, tgt_lang: str, kind: str,
                        vocab_size: int, n_pairs: int = 2000) -> Any:
    """A shared tokenizer of another kind or size, trained on ``n_pairs`` pairs of a built-in task."""
    from transformer.text.tasks import make_task
    from transformer.text.tokenizers import build_tokenizers

    splits = make_task(task, n_train=n_pairs, n_valid=0, n_test=0, seed=0, src_lang=src_lang, tgt_lang=tgt_lang,
                       **dict(options_items))
    return build_tokenizers(splits, kind=kind, vocab_size=vocab_size, shared=True)[0]
