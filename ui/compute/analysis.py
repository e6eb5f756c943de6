"""The cached computations the pages draw: one input through the model, a padded batch, the comparison with
torch.nn.Transformer, logits with heads switched off (a retrained tokenizer and a model's example sentences are in
``ui.compute.examples``, re-exported here).

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
from transformer.lm_pipeline import LMPipeline
from transformer.network.masks import decoder_real
from transformer.network.trace import Trace
from transformer.output_bounds import DECODE_SECONDS, output_bound
from transformer.pipeline import Pipeline, TranslationTrace
from ui.compute.byte_cache import ByteLRU
from ui.compute.examples import (  # noqa: F401  (moved to ui/compute/examples.py; callers import them from here too)
    NO_EXPECTED_CONTINUATION,
    builtin_task,
    examples_for,
    expected_output,
    hub_examples,
    retrained_tokenizer,
)
from ui.compute.model_size import is_large
from ui.models.menu import is_decoder_only
from ui.state.settings import RECORD_TOP_K

Ablation = dict[tuple[str, int], Sequence[int]]  # (kind, layer) -> heads switched off


@dataclass(frozen=True)
class Analysis:
    """One input sentence through the model: what the pages draw.

    ``trace`` is the teacher-forced forward on the source and the decoder input
    ``<s> y_1 .. y_n`` (the greedy output): ``src_tokens`` label its source positions,
    ``decoder_tokens`` its decoder positions; position t predicts ``output_tokens[t]``.

    A decoder-only model's (``decoder_only``): ``trace`` is one forward over the prompt and its greedy continuation,
    ``src_tokens`` label the prompt (its ids as read: the chat template's where chat is on), ``decoder_tokens``
    every position of the sequence (prompt then continuation, readable pieces: ``display_pieces``).
    """

    text: str  # the cleaned input
    result: TranslationTrace
    src_tokens: list[str]
    decoder_tokens: list[str]
    output_text: str
    eos_id: int  # the model's end-of-sequence id (3 in our vocabularies, 0 in a Marian model's)
    eos_piece: str = "</s>"  # how ``output_tokens`` names it (a decoder-only model's own: "<|endoftext|>", "<eos>")

    @property
    def trace(self) -> Trace:
        return self.result.trace

    @property
    def decoder_only(self) -> bool:
        """Whether a decoder-only model made it (its trace has no source: no encoder)."""
        return "src.ids" not in self.trace

    @property
    def src_ids(self) -> list[int]:
        """The source's ids (a decoder-only model's: the prompt's, the first positions of ``decoder_ids``)."""
        return list(self.result.src_ids) if self.decoder_only else self.trace["src.ids"][0].tolist()

    @property
    def decoder_ids(self) -> list[int]:
        return self.trace["tgt.ids"][0].tolist()

    @property
    def output_tokens(self) -> list[str]:
        """What each decoder position predicts: y_1 .. y_n, then </s> if decoding finished (a decoder-only model's
        positions: the next token of the sequence, then its EOS or where it was cut)."""
        cut = "(time limit)" if self.result.timed_out else "(max length)"
        end = self.eos_piece if self.result.finished else cut
        if self.decoder_only:
            return [*self.decoder_tokens[1:], end][: len(self.decoder_tokens)]
        predicted = [*self.result.output_pieces, end]
        return predicted[: len(self.decoder_tokens)]


def first_chosen_output(pipeline: Pipeline, analysis: Analysis) -> int:
    """The first output position the model chose itself, for a page's default: 1 where the model's rules force the
    first token (NLLB's and mBART-50's target language code: explaining it explains nothing but the rule), else 0."""
    rules = None if is_decoder_only(pipeline) else pipeline.generation_rules  # a continuation has no forced token
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
    # unknown characters and truncation are reported from the result (warn=False: no process-wide filter)
    limit = max_output_len(_pipeline, source_len(_pipeline, text))
    result = _pipeline.trace(text, ablate=_ablation(ablate_key), max_len=limit,
                             record_top_k=RECORD_TOP_K, warn=False)
    src_vocab, tgt_vocab = _pipeline.src_tokenizer, _pipeline.tgt_tokenizer
    src_tokens = [src_vocab.id_to_piece(int(i)) for i in result.trace["src.ids"][0]]
    decoder_tokens = [tgt_vocab.id_to_piece(int(i)) for i in result.trace["tgt.ids"][0]]
    return Analysis(result.src_text, result, src_tokens, decoder_tokens, result.output_text, _pipeline.config.eos_id)


def _analyse_lm(text: str, ablate_key: tuple, pipe: LMPipeline, chat: bool) -> Analysis:
    """A decoder-only model's analysis: the prompt continued greedily (``LMPipeline.trace``: at most its default
    ``DEFAULT_NEW_TOKENS``), the trace of one forward over prompt + continuation."""
    result = pipe.trace(text, chat=chat, ablate=_ablation(ablate_key), record_top_k=RECORD_TOP_K, warn=False)
    sequence = pipe.tokenizer.display_pieces(result.trace["tgt.ids"][0].tolist())  # readable byte-level pieces
    eos = pipe.eos_ids[0]
    return Analysis(text, result, list(result.src_pieces), sequence, result.output_text, eos,
                    pipe.tokenizer.display_pieces([eos])[0])


def analyse(model_key: str, device: str, pipeline: Pipeline | LMPipeline, text: str, ablate: Ablation | None = None,
            *, chat: bool = False) -> Analysis:
    """``text`` translated greedily, with the Trace of its teacher-forced forward (heads in ``ablate`` off); for a
    decoder-only model the prompt continued greedily (``chat``: through its chat template), the trace over both.

    Raises ValueError for an input that is empty after cleaning or a bad ablation.
    """
    key = (model_key, device, text, _ablate_key(ablate), *(("chat",) if chat else ()))
    if is_decoder_only(pipeline):
        return _ANALYSES.get_or_compute(key, lambda: _analyse_lm(text, key[3], pipeline, chat), analysis_bytes)
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
