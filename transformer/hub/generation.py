"""What a Hugging Face folder says about decoding: its ``generation_config.json``, as ``generate`` reads it.

``transformers`` reads ``generation_config.json`` when the folder has one and ignores config.json's decoding keys
then; without one it takes them from config.json (``GenerationConfig.from_model_config``). The keys kept:

- ``max_length``: the bound on the decoder's ids, its start id included (so ``max_length - 1`` generated tokens);
- ``num_beams``: recorded in the pipeline's meta (``translate`` stays greedy unless given ``beam_size``);
- ``forced_bos_token_id`` (BART: 0, ``<s>``), ``forced_eos_token_id``, ``bad_words_ids``,
  ``no_repeat_ngram_size`` (bart-base: 3), ``min_length``: the logits processors (``decoding.processors``), applied
  by every strategy;
- ``early_stopping`` (True, False or "never") and ``length_penalty``: beam search's defaults for the folder
  (``beam_defaults``), with ``transformers``' rule for ranking and stopping (``decoding.beam``, ``length_norm="hf"``);
- ``decoder_start_token_id``: recorded (config.json's gives the decoder's start id);
- ``do_sample``, ``temperature`` (> 0), ``top_k`` (>= 0) and ``top_p`` (in (0, 1]): recorded, the sampling an
  instruct model's folder recommends (SmolLM2-Instruct, Qwen3); offered by the app's Decoding page, never applied
  by ``generate`` / ``translate`` unless given (they stay greedy by default, as the pipeline's contract says).
"""

from __future__ import annotations

import math
from typing import Any

from .fields import FieldError, short
from .folder import GENERATION_CONFIG

# bad_words_ids is checked once per generated token: a 1 MB file of 160 k sequences made every decoding run to its
# time budget. Real folders forbid a token or a few (opus-mt: its pad id): these caps leave room for many times that.
MAX_BAD_WORDS = 1024  # sequences
MAX_BAD_WORD_LENGTH = 32  # ids in one sequence
MAX_BAD_WORD_IDS = 8192  # ids in all of them
_INTS = ("max_length", "num_beams", "forced_bos_token_id", "forced_eos_token_id", "decoder_start_token_id",
         "no_repeat_ngram_size", "min_length")


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def generation_settings(generation_config: dict[str, Any], document: dict[str, Any]) -> dict[str, Any]:
    """The decoding settings of a folder (its generation_config.json's object, {} when it has none, and
    ``document``: its config.json's; both read by ``folder.read_folder``), well-typed ones only; FieldError for
    ``bad_words_ids`` past its caps (``MAX_BAD_WORDS`` sequences, ``MAX_BAD_WORD_LENGTH`` ids in one,
    ``MAX_BAD_WORD_IDS`` in all), checked before any of it is used."""
    found = generation_config or document
    settings: dict[str, Any] = {key: found[key] for key in _INTS if _is_id(found.get(key))}
    for key in ("max_length", "num_beams"):
        if settings.get(key) == 0:
            del settings[key]
    words = found.get("bad_words_ids")
    if isinstance(words, list) and words:
        _check_bad_words(words, GENERATION_CONFIG if found is not document else "config.json")
        if all(isinstance(w, list) and w and all(map(_is_id, w)) for w in words):
            settings["bad_words_ids"] = [list(w) for w in words]
    if isinstance(found.get("early_stopping"), bool) or found.get("early_stopping") == "never":
        settings["early_stopping"] = found["early_stopping"]
    if isinstance(found.get("length_penalty"), int | float) and not isinstance(found.get("length_penalty"), bool):
        settings["length_penalty"] = float(found["length_penalty"])
    settings.update(sampling_settings(found))
    return settings


def sampling_settings(found: dict[str, Any]) -> dict[str, Any]:
    """The sampling a folder recommends, well-typed and in range only: ``do_sample`` (bool), ``temperature``
    (> 0), ``top_k`` (an int >= 0; 0: off), ``top_p`` (in (0, 1]); {} for none."""
    def number(value: Any) -> bool:
        return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)

    settings: dict[str, Any] = {}
    if isinstance(found.get("do_sample"), bool):
        settings["do_sample"] = found["do_sample"]
    if number(found.get("temperature")) and found["temperature"] > 0:
        settings["temperature"] = float(found["temperature"])
    if _is_id(found.get("top_k")):
        settings["top_k"] = found["top_k"]
    if number(found.get("top_p")) and 0 < found["top_p"] <= 1:
        settings["top_p"] = float(found["top_p"])
    return settings


def _check_bad_words(words: list[Any], file: str) -> None:
    """FieldError naming ``file``, the field and the cap when ``bad_words_ids`` is past one of its caps (counted
    before any sequence is looked at further: a list of 160 k sequences is refused by its length alone)."""
    if len(words) > MAX_BAD_WORDS:
        raise FieldError(f"{file}: bad_words_ids holds {len(words):,} sequences; at most {MAX_BAD_WORDS:,} are read")
    total = 0
    for word in words:
        length = len(word) if isinstance(word, list) else 1
        if length > MAX_BAD_WORD_LENGTH:
            raise FieldError(f"{file}: bad_words_ids holds a sequence of {length:,} ids; at most "
                             f"{MAX_BAD_WORD_LENGTH} are read ({short(word)})")
        total += length
    if total > MAX_BAD_WORD_IDS:
        raise FieldError(f"{file}: bad_words_ids holds {total:,} ids; at most {MAX_BAD_WORD_IDS:,} are read")


# generate()'s own defaults (GenerationConfig) where a folder records none
HF_LENGTH_PENALTY, HF_EARLY_STOPPING = 1.0, False
# our models' beam search: GNMT's length penalty (Wu et al. 2016), alpha 0.6, searching until nothing better can come
OUR_BEAM_DEFAULTS: dict[str, Any] = {"length_penalty": 0.6, "early_stopping": False, "length_norm": "gnmt"}


def beam_options(meta: dict[str, Any], **given: Any) -> dict[str, Any]:
    """The beam-search options (``length_penalty``, ``early_stopping``, ``length_norm``) of a pipeline whose
    checkpoint meta is ``meta``: those ``given`` that are not None, the model's defaults for the rest. A Hugging
    Face folder's defaults are its own settings (``generate``'s, 1.0 and False, where it records none) with
    ``transformers``' rule (``length_norm="hf"``), so that beam search gives what ``generate(num_beams=K)`` gives;
    our own models' are ``OUR_BEAM_DEFAULTS``."""
    if meta.get("source") != "huggingface":
        defaults = dict(OUR_BEAM_DEFAULTS)
    else:
        settings = meta.get("generation") or {}
        defaults = {"length_penalty": settings.get("length_penalty", HF_LENGTH_PENALTY),
                    "early_stopping": settings.get("early_stopping", HF_EARLY_STOPPING), "length_norm": "hf"}
    unknown = set(given) - set(defaults)
    if unknown:
        raise TypeError(f"unknown beam option(s): {', '.join(sorted(unknown))}")
    return {**defaults, **{key: value for key, value in given.items() if value is not None}}
