"""What a Hugging Face folder says about decoding: its ``generation_config.json``, as ``generate`` reads it.

``transformers`` reads ``generation_config.json`` when the folder has one and ignores config.json's decoding keys
then; without one it takes them from config.json (``GenerationConfig.from_model_config``). The keys kept:

- ``max_length``: the bound on the decoder's ids, its start id included (so ``max_length - 1`` generated tokens);
- ``num_beams``: recorded in the pipeline's meta (``translate`` stays greedy unless given ``beam_size``);
- ``forced_bos_token_id`` (BART: 0, ``<s>``), ``forced_eos_token_id``, ``bad_words_ids``,
  ``no_repeat_ngram_size`` (bart-base: 3), ``min_length``: the logits processors (``decoding.processors``), applied
  by every strategy;
- ``decoder_start_token_id``, ``early_stopping``, ``length_penalty``: recorded, so that a difference from
  ``generate`` can be seen (see docs/families.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .fast_tokenizer import read_json

GENERATION_CONFIG = "generation_config.json"
_INTS = ("max_length", "num_beams", "forced_bos_token_id", "forced_eos_token_id", "decoder_start_token_id",
         "no_repeat_ngram_size", "min_length")


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def generation_settings(folder: str | Path, document: dict[str, Any]) -> dict[str, Any]:
    """The decoding settings of ``folder`` (``document``: its config.json), well-typed ones only."""
    found = read_json(Path(folder) / GENERATION_CONFIG) or document
    settings: dict[str, Any] = {key: found[key] for key in _INTS if _is_id(found.get(key))}
    for key in ("max_length", "num_beams"):
        if settings.get(key) == 0:
            del settings[key]
    words = found.get("bad_words_ids")
    if isinstance(words, list) and words and all(isinstance(w, list) and w and all(map(_is_id, w)) for w in words):
        settings["bad_words_ids"] = [list(w) for w in words]
    if isinstance(found.get("early_stopping"), bool):
        settings["early_stopping"] = found["early_stopping"]
    if isinstance(found.get("length_penalty"), int | float) and not isinstance(found.get("length_penalty"), bool):
        settings["length_penalty"] = float(found["length_penalty"])
    return settings
