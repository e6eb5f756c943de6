"""The Decoding page's computations: beam search and sampling on the current input, every step recorded (cached).

On a large model (``ui.compute.model_size``, the threshold where the Explain page's costly methods wait) the two
wait for the page's buttons (``waits``): at NLLB-600M size they took ~28 s of a first visit, where greedy decoding
is the shared translation every page already has (``Analysis.result.steps``, decoded once by ``analyse``).

A decoder-only model (``LMPipeline``) continues its prompt instead: ``decoding.lm``'s beam search and sampling,
with the EOS ids and the bound on new tokens its greedy continuation (``pipe.trace``) had, and the folder's
recommended sampling offered (``sampling_defaults``)."""

from __future__ import annotations

from typing import Any

import streamlit as st
import torch

from transformer.decoding import beam_search, sample
from transformer.decoding.lm import lm_beam_search, lm_sample
from transformer.hub.generation import beam_options
from transformer.output_bounds import DECODE_SECONDS
from transformer.pipeline import Pipeline
from ui.compute.analysis import Analysis, max_output_len, source_len
from ui.compute.model_size import is_large
from ui.state.settings import RECORD_TOP_K

BEAM_SIZES = range(1, 9)  # the beam-size slider's values
DEFAULT_BEAM_SIZE = 4  # where a model records no num_beams of its own


def beam_defaults(pipeline: Pipeline) -> dict[str, Any]:
    """Where the Decoding page's beam-search controls start for ``pipeline``'s model: ``beam_options``'
    ``length_penalty``, ``early_stopping`` and ``length_norm`` (a Hugging Face folder's own, ``transformers``'
    rule; GNMT's with alpha 0.6 for ours), and ``beam_size``: the folder's ``num_beams`` brought into
    ``BEAM_SIZES``, else ``DEFAULT_BEAM_SIZE``."""
    options = beam_options(pipeline.meta)
    num_beams = (pipeline.meta.get("generation") or {}).get("num_beams")
    options["beam_size"] = (min(max(num_beams, BEAM_SIZES[0]), BEAM_SIZES[-1]) if num_beams
                            else DEFAULT_BEAM_SIZE)
    return options


def waits(pipeline: Pipeline) -> bool:
    """Whether beam search and sampling wait for a button on ``pipeline``'s model: on a large one (``is_large``),
    where each decodes for seconds (k prefixes a step for beam search); a small model runs them at once."""
    return is_large(pipeline)


def sampling_defaults(pipeline: Pipeline) -> dict[str, Any]:
    """Where the Decoding page's sampling controls start: the folder's recommended ``temperature``, ``top_k`` and
    ``top_p`` (its generation_config.json, ``pipe.meta["generation"]``: an instruct model's), else off (T = 1,
    every token); ``do_sample``: whether the folder samples by default (the page starts on Sampling then)."""
    given = pipeline.meta.get("generation") or {}
    return {"temperature": float(given.get("temperature", 1.0)), "top_k": int(given.get("top_k", 0)),
            "top_p": float(given.get("top_p", 1.0)), "do_sample": bool(given.get("do_sample", False))}


def decoder_only(pipeline: Pipeline) -> bool:
    """Whether ``pipeline`` continues a prompt (a decoder-only ``LMPipeline``) rather than translating a source."""
    return getattr(pipeline, "kind", "") == "decoder"


def _source(pipeline: Pipeline, text: str):
    # unknown characters / truncation: the sidebar's analysis already said so
    return pipeline.encode_source(text, warn=False)  # (1, S)


def _lm_common(pipeline: Any, prompt: tuple[int, ...]) -> dict[str, Any]:
    """A language model's prompt ids (the shared analysis's: its chat template's where chat is on) and the bounds
    its greedy continuation had."""
    ids = torch.tensor([prompt], device=pipeline.device)  # (1, P)
    return dict(prompt_ids=ids, max_new_tokens=pipeline.new_tokens_bound(ids.size(1), None),
                eos_id=list(pipeline.eos_ids), record=True, record_top_k=RECORD_TOP_K, time_budget=DECODE_SECONDS)


@st.cache_resource(max_entries=64, show_spinner=False)
def _beam(model_key: str, device: str, text: str, beam_size: int, length_penalty: float, early_stopping: bool | str,
          max_len: int, _pipeline: Pipeline, prompt: tuple[int, ...] = ()):
    if decoder_only(_pipeline):  # generate(num_beams=k)'s search, transformers' rule
        return lm_beam_search(_pipeline.model, **_lm_common(_pipeline, prompt), beam_size=beam_size,
                              length_penalty=length_penalty, early_stopping=early_stopping)[0]
    # the model's ranking rule: GNMT's for ours, transformers' for a Hugging Face folder (decoding.beam)
    return beam_search(_pipeline.model, _source(_pipeline, text), beam_size=beam_size, max_len=max_len,
                       length_penalty=length_penalty, early_stopping=early_stopping,
                       length_norm=beam_options(_pipeline.meta)["length_norm"], record=True,
                       record_top_k=RECORD_TOP_K, time_budget=DECODE_SECONDS, rules=_pipeline.generation_rules)[0]


@st.cache_resource(max_entries=64, show_spinner=False)
def _sample(model_key: str, device: str, text: str, temperature: float, top_k: int | None, top_p: float | None,
            seed: int, max_len: int, _pipeline: Pipeline, prompt: tuple[int, ...] = ()):
    if decoder_only(_pipeline):
        return lm_sample(_pipeline.model, **_lm_common(_pipeline, prompt), temperature=temperature, top_k=top_k,
                         top_p=top_p, seed=seed)
    return sample(_pipeline.model, _source(_pipeline, text), max_len=max_len, temperature=temperature, top_k=top_k,
                  top_p=top_p, seed=seed, record=True, record_top_k=RECORD_TOP_K, time_budget=DECODE_SECONDS,
                  rules=_pipeline.generation_rules)


def beam(model_key: str, device: str, pipeline: Pipeline, analysis: Analysis, beam_size: int,
         length_penalty: float, early_stopping: bool | str):
    """Beam search on the analysed input with every step recorded, shared by all sessions (never modified);
    ranked and stopped by the model's own rule (``beam_options``' ``length_norm``)."""
    return _beam(model_key, device, analysis.text, beam_size, length_penalty, early_stopping,
                 _limit(pipeline, analysis), pipeline, _prompt(pipeline, analysis))  # greedy's limit


def sampled(model_key: str, device: str, pipeline: Pipeline, analysis: Analysis, temperature: float,
            top_k: int | None, top_p: float | None, seed: int):
    """One seeded sample of the analysed input with every step recorded; ``top_k``/``top_p`` None: off."""
    return _sample(model_key, device, analysis.text, temperature, top_k, top_p, seed, _limit(pipeline, analysis),
                   pipeline, _prompt(pipeline, analysis))


def _prompt(pipeline: Pipeline, analysis: Analysis) -> tuple[int, ...]:
    """A language model's prompt as the analysis read it (through its chat template where chat is on); () else."""
    return tuple(analysis.src_ids) if decoder_only(pipeline) else ()


def _limit(pipeline: Pipeline, analysis: Analysis) -> int:
    """The greedy translation's bound on its output (a language model's: ``new_tokens_bound``, in ``_lm_common``)."""
    if decoder_only(pipeline):
        return pipeline.new_tokens_bound(len(analysis.src_tokens), None)
    return max_output_len(pipeline, source_len(pipeline, analysis.text))
