"""What each built-in task's model was trained on, and whether an input lies inside it.

A model answers inputs far outside its training data without a word of doubt: the shipped
dates model turns ``2100-01-01`` into "1. Januar 12000" and ``2024-13-45`` into a real date,
the numbers model "one million" into "einundzwanzig". Every built-in task is generated, so its
domain is known exactly (``tasks.py``): numbers 0..max_number written as num2words writes them;
valid dates between min_year and max_year in the source format; strings of min_len..max_len
characters of ``ALPHABET``; sentences of the grammar in ``sentences.py``. ``domain_warnings``
says, in plain words, how an input leaves that domain (an empty list when it does not, or when
the task is unknown, e.g. a user's own pairs). ``expected_target`` gives the reference a task's generator would
write for an input, the truth a model is measured against, or says why there is none.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

from num2words import num2words

from . import sentences
from .tasks import ALPHABET, TASKS, _date_formatter, _say_number, task_options

_EN_UNITS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen".split())}
_EN_TENS = {w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), 2)}
_EN_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}


def domain_warnings(task: str | None, text: str, *, src_lang: str = "en", options: dict[str, Any] | None = None
                    ) -> list[str]:
    """How ``text`` leaves the domain of ``task`` trained with ``options`` (defaults: ``task_options``)."""
    if task not in TASKS:
        return []
    opts = {**task_options(task), **(options or {})}
    text = text.strip()
    if not text:
        return []
    if task == "numbers":
        return _numbers(text, src_lang, opts["max_number"])
    if task == "dates":
        return _dates(text, opts)
    if task == "sentences":
        return _sentences(text, opts["max_clauses"], opts["max_adjectives"])
    return _strings(text, opts["min_len"], opts["max_len"])


def _sentences(text: str, max_clauses: int, max_adjectives: int) -> list[str]:
    """A sentence of the grammar, with no more clauses (one subject each) or adjectives on one noun than
    the training sentences had: past its training lengths the shipped model fails (its model card)."""
    try:
        structure = sentences.parse(text)
    except ValueError as error:
        return [f"not a sentence of the grammar this model was trained on: {error}"]
    problems = []
    clauses = sum(1 for _, _, relation in structure.arcs if relation == "nsubj")
    if clauses > max_clauses:
        problems.append(f"it has {clauses} clauses; the model was trained on sentences of at most {max_clauses}")
    per_noun: dict[int, int] = {}
    for _, head, relation in structure.arcs:
        if relation == "amod":
            per_noun[head] = per_noun.get(head, 0) + 1
    if per_noun and max(per_noun.values()) > max_adjectives:
        problems.append(f"a noun has {max(per_noun.values())} adjectives; the model was trained on at most "
                        f"{max_adjectives}")
    return problems


def english_number(text: str) -> int | None:
    """The value of an English number in words ("forty-seven", "two hundred and one"), or None."""
    tokens = [t for t in re.split(r"[\s,-]+", text.lower()) if t and t != "and"]
    if not tokens:
        return None
    total = current = 0
    for token in tokens:
        if token in _EN_UNITS:
            current += _EN_UNITS[token]
        elif token in _EN_TENS:
            current += _EN_TENS[token]
        elif token == "hundred":
            current = max(current, 1) * 100
        elif token in _EN_SCALES:
            total += max(current, 1) * _EN_SCALES[token]
            current = 0
        else:
            return None
    return total + current


def _numbers(text: str, src_lang: str, max_number: int) -> list[str]:
    if src_lang == "digits":
        if not text.isdigit():
            return [f"the model reads numbers written in digits, 0 to {max_number:,}; {text!r} is not one"]
        value: int | None = int(text)
    elif src_lang == "en":
        value = english_number(text)
        if value is None:
            return [f"{text!r} is not an English number in words, which is all this model has seen"]
    else:  # no parser for the other languages: accept exactly what num2words writes, for small numbers
        return []
    if value > max_number:
        return [f"{value:,} is larger than any number the model was trained on (0 to {max_number:,}): "
                "expect a wrong answer"]
    if src_lang == "en" and num2words(value, lang="en") != " ".join(text.lower().split()):
        return [f"the training data writes {value:,} as {num2words(value, lang='en')!r}; other spellings may "
                "be translated wrongly"]
    return []


def _dates(text: str, opts: dict[str, Any]) -> list[str]:
    lo, hi = opts["min_year"], opts["max_year"]
    if opts["src_format"] == "iso":
        match = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})", text)
        if not match:
            return [f"the model reads dates written YYYY-MM-DD; {text!r} is not"]
        year, month, day = map(int, match.groups())
        try:
            datetime.date(year, month, day)
        except ValueError as error:
            return [f"{text} is not a real date ({error}): the model will still answer with one"]
    else:  # a written format: check the year, the one part a model cannot guess
        years = [int(y) for y in re.findall(r"\b\d{4}\b", text)]
        if not years:
            return []
        year = years[0]
    if not lo <= year <= hi:
        return [f"the year {year} is outside the years the model was trained on ({lo} to {hi}): "
                "expect a wrong answer"]
    return []


def _strings(text: str, min_len: int, max_len: int) -> list[str]:
    problems = []
    if not min_len <= len(text) <= max_len:
        problems.append(f"the input has {len(text)} characters; the model was trained on {min_len} to {max_len}, "
                        "and longer inputs come out cut or garbled")
    strange = sorted(set(text) - set(ALPHABET))
    if strange:
        problems.append(f"characters the model never saw in training: {' '.join(repr(c) for c in strange)} "
                        "(it knows a-z and 0-9)")
    return problems


def expected_target(task: str | None, text: str, *, src_lang: str = "en", tgt_lang: str = "de",
                    options: dict[str, Any] | None = None) -> str:
    """The target ``task``'s generator writes for the source ``text`` (what a model trained on it should answer):
    the string copied, reversed or sorted; the number or date read back and written in the target language and
    format; a sentence of the grammar parsed and written in German (``sentences.parse``). ValueError saying why
    there is none: no built-in task, an input the task's generator could not have written (not a number, not a
    date, outside the grammar), or a source format this reads not back (written dates, numbers in words of another
    language than English)."""
    if task not in TASKS:
        raise ValueError("the model was not trained on a built-in task, so no rule gives its reference")
    opts = {**task_options(task), **(options or {})}
    text = " ".join(text.split())
    if not text:
        raise ValueError("the input is empty")
    if task in ("copy", "reverse", "sort"):
        return {"copy": text, "reverse": text[::-1], "sort": "".join(sorted(text))}[task]
    if task == "numbers":
        if src_lang == "digits":
            value = int(text) if text.isdigit() else None
        elif src_lang == "en":
            value = english_number(text)
        else:
            raise ValueError(f"numbers written in {src_lang!r} are not read back here")
        if value is None:
            raise ValueError(f"{text!r} is not a number as the task writes it")
        return _say_number(value, tgt_lang)
    if task == "dates":
        if opts["src_format"] != "iso":
            raise ValueError(f"dates written {opts['src_format']!r} are not read back here")
        try:
            day = datetime.date.fromisoformat(text) if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text) else None
        except ValueError as error:
            raise ValueError(f"{text} is not a real date ({error})") from None
        if day is None:
            raise ValueError(f"{text!r} is not a date written YYYY-MM-DD")
        return _date_formatter(opts["tgt_format"], tgt_lang, "tgt")(day)
    return sentences.parse(text).target
