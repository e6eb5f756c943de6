"""Bounds on what one decoding may cost, for every model: its output length and its time.

A model that never says ``</s>`` decodes until a bound stops it; a checkpoint's max_len (up to 2,097,152 under
the positional cap) or an uploaded checkpoint's meta is no bound a visitor cannot choose. So every output is cut
at ``MAX_OUTPUT_TOKENS``, and, unless the model saved a bound from its own training data (``max_output_len``:
the longest training target + 10), at ``LENGTH_FACTOR`` tokens per source token + ``LENGTH_EXTRA``, the rule of
Marian-NMT's ``--max-length-factor`` (Junczys-Dowmunt et al., 2018, "Marian: Fast Neural Machine Translation in
C++"). Decoding also gets a wall-clock budget (``DECODE_SECONDS``; ``decoding.common.deadline_of``).
"""

from __future__ import annotations

from typing import Any

MAX_OUTPUT_TOKENS = 512  # every model's outputs, at most (Marian's own max_length default)
LENGTH_FACTOR, LENGTH_EXTRA = 3, 10  # Marian-NMT's --max-length-factor: at most 3 tokens per source token, + 10
DECODE_SECONDS = 30.0  # a decoding's time budget by default (a model that never says </s> is cut here)


def trained_bound(meta: dict[str, Any]) -> bool:
    """Whether ``meta`` holds a bound on outputs from our training data (``max_output_len``: the longest
    training target + 10); a Hugging Face model's max_length is its config's, not its data's."""
    saved = meta.get("max_output_len")
    return meta.get("source") != "huggingface" and isinstance(saved, int) and not isinstance(saved, bool) \
        and saved > 0


def output_bound(limit: int, meta: dict[str, Any], src_len: int | None) -> int:
    """``limit`` further bounded by the source length (``src_len`` ids, </s> included; None: not known) unless
    the model saved a bound from its training data, and by ``MAX_OUTPUT_TOKENS``."""
    if src_len is not None and not trained_bound(meta):
        limit = min(limit, LENGTH_FACTOR * src_len + LENGTH_EXTRA)
    return max(1, min(limit, MAX_OUTPUT_TOKENS))


class DecodingTimeoutWarning(UserWarning):
    """Decoding ran out of its time budget: the output is what was produced until then."""


def timeout_message(time_budget: float | None) -> str:
    """What a ``DecodingTimeoutWarning`` says (the pipeline's, and the app's notice)."""
    return (f"decoding stopped after its time budget of {time_budget:g} s: the output is the part produced by then "
            "(a model that never says </s>, or a very slow machine)")
