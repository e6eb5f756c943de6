"""The built-in tasks: generated parallel text to train on (a user's own file: ``pairs``).

A data set is a list of ``(source, target)`` string pairs. The built-in tasks are
generated, so they are free, endless and exactly checkable:

- ``numbers``: a number in words in one language -> the same number in another
  ("forty-seven" -> "siebenundvierzig"), via num2words. Reordering, agreement and
  compounding make it a real, if tiny, translation problem.
- ``dates``: a date written one way -> another ("2026-11-21" -> "21. November 2026"),
  via Babel.
- ``copy``, ``reverse``, ``sort``: strings of letters and digits -> the same string,
  reversed, or with its characters sorted: the classic sanity checks for attention.
- ``sentences``: English sentences of a small grammar -> German ("the dog sleeps because the
  man sees the cat" -> "der Hund schläft, weil der Mann die Katze sieht"), with agreement,
  case and verb-final subordinate clauses (``sentences.py``, which also gives each pair's
  true alignment and dependency arcs).

Every split is drawn from one ``random.Random(seed)`` (never the global generator).
For dates, strings and sentences the space is large: train, valid and test never share
a source, so a test score measures generalisation rather than memory; dates also keep
every month and every day of the month in training (added to train if the draw missed
one). ``numbers`` follows what users type instead: train is drawn from the task's own
distribution (a digit count uniformly, then a value uniformly in it, repeats allowed, so
"seven" is seen as often as users type one-digit numbers) plus the building blocks
(all of 0-99, the round hundreds, thousands, ...) always; valid and test are drawn from
the same distribution, excluding sources seen in training only in digit counts where
training covers less than half of the values (4-6 digits with the defaults). In
the small ones (1-3 digits, which training sees almost whole) the test measures the
numbers as users type them, seen or not, which a deduplicated split could not.
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Callable
from typing import Any

from babel.dates import format_date
from num2words import num2words

from ..checks import check_choice, check_int
from . import sentences

# A user's file: kept importable from here, where it used to live.
from .pairs import DataError, Pair, Splits, load_pairs, split_pairs  # noqa: F401

TASKS: tuple[str, ...] = ("numbers", "dates", "copy", "reverse", "sort", "sentences")
NUMBER_LANGS: tuple[str, ...] = ("digits", "en", "de", "fr", "es", "it")
DATE_LOCALES: tuple[str, ...] = ("de", "en", "fr", "es", "it")
# "short" is left out on purpose: its two-digit years make 1926 and 2026 collide.
DATE_STYLES: tuple[str, ...] = ("iso", "long", "medium", "full")
ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"

_DESCRIPTIONS = {
    "numbers": "A number in words in one language -> the same number in another (num2words).",
    "dates": "A date in one format -> the same date in another, e.g. 2026-11-21 -> 21. November 2026.",
    "copy": "A random string of letters and digits -> the same string.",
    "reverse": "A random string of letters and digits -> the string backwards.",
    "sort": "A random string of letters and digits -> its characters in sorted order.",
    "sentences": "An English sentence of a small grammar -> German, with agreement, case and verb-final clauses.",
}
_OPTIONS = {
    "numbers": {"max_number": 999_999},
    "dates": {"src_format": "iso", "tgt_format": "long", "min_year": 1900, "max_year": 2099},
    "copy": {"min_len": 1, "max_len": 24},
    "reverse": {"min_len": 1, "max_len": 24},
    "sort": {"min_len": 1, "max_len": 24},
    "sentences": {"max_clauses": 2, "max_adjectives": 2, "long_share": 0.0},
}


def describe_task(task: str) -> str:
    """One line on what a built-in task asks the model to do."""
    check_choice("task", task, TASKS)
    return _DESCRIPTIONS[task]


def task_options(task: str) -> dict[str, Any]:
    """The options ``make_task`` accepts for a task, with their defaults."""
    check_choice("task", task, TASKS)
    return dict(_OPTIONS[task])


def make_task(
    task: str,
    *,
    n_train: int = 20000,
    n_valid: int = 500,
    n_test: int = 1000,
    seed: int = 0,
    src_lang: str = "en",
    tgt_lang: str = "de",
    **options: Any,
) -> Splits:
    """Generate a built-in task's splits, the same ones for the same arguments.

    Except for ``numbers`` (see the module docstring), distinct sources are drawn first
    and then cut into train/valid/test. When a task has fewer distinct sources than asked
    for (``max_len=1``), all three sizes shrink in proportion, each requested split
    keeping at least one pair. ``numbers`` gives the sizes asked for; its train holds the
    building blocks (``number_building_blocks``) whenever n_train is at least their number.

    Languages: ``numbers`` takes ``src_lang``/``tgt_lang`` from NUMBER_LANGS
    ("digits" is the plain number, "4711"). ``dates`` uses them as Babel locales
    (DATE_LOCALES) for the formats ``long``/``medium``/``full``; a format may also
    name its locale itself, as in ``tgt_format="fr-long"``; ``iso`` has no locale.
    ``copy``/``reverse``/``sort`` ignore them; ``sentences`` is English -> German only.

    Options (see ``task_options``): numbers ``max_number``; dates ``src_format``,
    ``tgt_format``, ``min_year``, ``max_year``; copy/reverse/sort ``min_len``, ``max_len``;
    sentences ``max_clauses`` (1 = no subordinate clause), ``max_adjectives`` (per noun), ``long_share`` (the
    share of pairs of at least ``sentences.LONG_WORDS`` words).
    """
    check_choice("task", task, TASKS)
    unknown = sorted(set(options) - set(_OPTIONS[task]))
    if unknown:
        raise ValueError(
            f"unknown option(s) {', '.join(unknown)} for task {task!r}; valid options: {', '.join(_OPTIONS[task])}"
        )
    opts = {**_OPTIONS[task], **options}
    sizes = [
        check_int("n_train", n_train, 1),
        check_int("n_valid", n_valid, 0),
        check_int("n_test", n_test, 0),
    ]
    rng = random.Random(seed)
    if task == "numbers":
        return _numbers(rng, sizes, src_lang, tgt_lang, check_int("max_number", opts["max_number"], 1))
    if task == "dates":
        return _dates(rng, sizes, src_lang, tgt_lang, opts)
    if task == "sentences":
        if (src_lang, tgt_lang) != ("en", "de"):
            raise ValueError(f"the sentences task is English -> German only, got {src_lang} -> {tgt_lang}")
        pairs = sentences.sentence_pairs(rng, sum(sizes), opts["max_clauses"], opts["max_adjectives"],
                                         opts["long_share"])
    else:
        pairs = _strings(rng, sizes, task, opts)
    sizes = _fit_sizes(sizes, len(pairs))
    rng.shuffle(pairs)
    n_tr, n_va, _ = sizes
    return Splits(pairs[:n_tr], pairs[n_tr : n_tr + n_va], pairs[n_tr + n_va :], task)


# --- the generators -----------------------------------------------------------------


def number_building_blocks(max_number: int) -> list[int]:
    """The numbers every numbers model must see: 0-99 and the round ones (100, ..., 900,
    1000, ..., 9000, 10000, ...) up to max_number; the rest is composed of them."""
    blocks = list(range(min(99, max_number) + 1))
    scale = 100
    while scale <= max_number:
        blocks += [k * scale for k in range(1, 10) if k * scale <= max_number]
        scale *= 10
    return blocks


def number_strata(max_number: int) -> list[tuple[int, int]]:
    """(lowest, highest) value of each digit count up to max_number: 0-9, 10-99, ..."""
    lows = [0] + [10 ** (d - 1) for d in range(2, len(str(max_number)) + 1)]
    return [(lo, min(10 ** (d + 1) - 1, max_number)) for d, lo in enumerate(lows)]


def draw_number(rng: random.Random, max_number: int = 999_999) -> int:
    """A number as users type them: the digit count uniformly, then a value uniformly in it."""
    lo, hi = rng.choice(number_strata(max_number))
    return rng.randint(lo, hi)


def _numbers(rng: random.Random, sizes: list[int], src: str, tgt: str, max_number: int) -> Splits:
    """Train from the task distribution plus the building blocks; valid/test from the same
    distribution, holding out training's sources only in the digit counts training covers
    thinly (see the module docstring)."""
    check_choice("src_lang", src, NUMBER_LANGS)
    check_choice("tgt_lang", tgt, NUMBER_LANGS)
    n_train, n_valid, n_test = sizes
    blocks = number_building_blocks(max_number)
    if n_train < len(blocks):  # a preview or a few examples: the distribution alone, the size asked for
        blocks = []
    train = blocks + [draw_number(rng, max_number) for _ in range(n_train - len(blocks))]
    rng.shuffle(train)
    seen = set(train)
    strata = number_strata(max_number)
    held_out = {i for i, (lo, hi) in enumerate(strata)
                if 2 * sum(lo <= v <= hi for v in seen) < hi - lo + 1}

    def draw_unseen() -> int:
        while True:
            i = rng.randrange(len(strata))
            value = rng.randint(*strata[i])
            if i not in held_out or value not in seen:
                return value

    valid = [draw_unseen() for _ in range(n_valid)]
    test = [draw_unseen() for _ in range(n_test)]

    def say(values: list[int]) -> list[Pair]:
        return [(_say_number(v, src), _say_number(v, tgt)) for v in values]

    return Splits(say(train), say(valid), say(test), "numbers")


def _say_number(value: int, lang: str) -> str:
    return str(value) if lang == "digits" else num2words(value, lang=lang)


def _dates(rng: random.Random, sizes: list[int], src: str, tgt: str, opts: dict[str, Any]) -> Splits:
    """Distinct dates drawn uniformly between Jan 1 of min_year and Dec 31 of max_year,
    cut into splits; train then gets any month or day of the month it lacks."""
    src_fmt = _date_formatter(opts["src_format"], src, "src")
    tgt_fmt = _date_formatter(opts["tgt_format"], tgt, "tgt")
    lo, hi = opts["min_year"], opts["max_year"]
    if not (isinstance(lo, int) and isinstance(hi, int) and 1 <= lo <= hi <= 9999):
        raise ValueError(f"need 1 <= min_year <= max_year <= 9999, got {lo} and {hi}")
    first = datetime.date(lo, 1, 1)
    n_days = (datetime.date(hi, 12, 31) - first).days + 1
    days = [first + datetime.timedelta(days=i) for _, i in _stratified_sample(rng, [(0, n_days)], sum(sizes))]
    sizes = _fit_sizes(sizes, len(days))
    rng.shuffle(days)
    n_tr, n_va, _ = sizes
    train, valid, test = days[:n_tr], days[n_tr : n_tr + n_va], days[n_tr + n_va :]
    train += _missing_months_and_days(rng, train, set(valid + test), lo, hi)

    def say(split: list[datetime.date]) -> list[Pair]:
        return [(src_fmt(d), tgt_fmt(d)) for d in split]

    return Splits(say(train), say(valid), say(test), "dates")


def _missing_months_and_days(rng: random.Random, train: list[datetime.date], held: set[datetime.date],
                             lo: int, hi: int) -> list[datetime.date]:
    """Dates to add to train so that every month and every day of the month is in it
    (none of them in valid/test): names a model can only learn by seeing them."""
    months = {d.month for d in train}
    doms = {d.day for d in train}
    wanted = [(m, 1) for m in range(1, 13) if m not in months] + [(1, d) for d in range(1, 32) if d not in doms]
    taken = set(train) | held
    extra = []
    for month, dom in wanted:
        for _ in range(1000):  # day 1 of a month or a day of January: valid in every year
            day = datetime.date(rng.randint(lo, hi), month, dom)
            if day not in taken:
                extra.append(day)
                taken.add(day)
                break
    return extra



def _date_formatter(spec: str, lang: str, side: str) -> Callable[[datetime.date], str]:
    """'iso', a style ('long') in the side's locale, or 'locale-style' ('fr-long')."""
    valid = f"'iso', one of {', '.join(DATE_STYLES[1:])} or 'locale-style' such as 'fr-long'"
    if not isinstance(spec, str):
        raise ValueError(f"{side}_format must be {valid}, got {spec!r}")
    if spec == "iso":
        return datetime.date.isoformat
    locale, _, style = spec.rpartition("-")
    if not locale:
        check_choice(f"{side}_lang (the date locale)", lang, DATE_LOCALES)
        locale = lang
    if style not in DATE_STYLES[1:] or locale not in DATE_LOCALES:
        raise ValueError(f"{side}_format must be {valid} with a locale from {', '.join(DATE_LOCALES)}; got {spec!r}")

    def fmt(day: datetime.date) -> str:
        # Babel uses no-break spaces in some locales; plain spaces keep tokenizers simple.
        return format_date(day, style, locale=locale).replace("\u00a0", " ").replace("\u202f", " ")

    return fmt


def _strings(rng: random.Random, sizes: list[int], task: str, opts: dict[str, Any]) -> list[Pair]:
    """Random strings over ALPHABET, the length uniform in min_len..max_len."""
    lo, hi = opts["min_len"], opts["max_len"]
    if not (isinstance(lo, int) and isinstance(hi, int) and 1 <= lo <= hi <= 256):
        raise ValueError(f"need 1 <= min_len <= max_len <= 256, got {lo} and {hi}")
    base = len(ALPHABET)
    strata = [(length, base**length) for length in range(lo, hi + 1)]
    pairs = []
    for length, index in _stratified_sample(rng, strata, sum(sizes)):
        chars = []
        for _ in range(length):  # the index written in base 36, one character per digit
            index, digit = divmod(index, base)
            chars.append(ALPHABET[digit])
        s = "".join(chars)
        pairs.append((s, {"copy": s, "reverse": s[::-1], "sort": "".join(sorted(s))}[task]))
    return pairs


def _stratified_sample(rng: random.Random, strata: list[tuple[Any, int]], k: int) -> list[tuple[Any, int]]:
    """Draw up to k distinct (key, index) items: a stratum uniformly, then an index in it.

    strata are (key, size) pairs; a full stratum drops out of the draw, so small ones
    (the ten one-digit numbers) are taken whole and the rest of k goes to the others.
    """
    counts = [0] * len(strata)
    open_ = [i for i, (_, size) in enumerate(strata) if size > 0]
    for _ in range(k):
        if not open_:
            break
        j = rng.choice(open_)
        counts[j] += 1
        if counts[j] == strata[j][1]:
            open_.remove(j)
    out = []
    for (key, size), count in zip(strata, counts, strict=True):
        if count * 4 >= size:  # dense: sample without replacement from the whole range
            indices = rng.sample(range(size), count)
        else:  # sparse (or too big for range()): draw and reject repeats
            seen: set[int] = set()
            indices = []
            while len(indices) < count:
                i = rng.randrange(size)
                if i not in seen:
                    seen.add(i)
                    indices.append(i)
        out.extend((key, i) for i in indices)
    return out


def _fit_sizes(sizes: list[int], available: int) -> list[int]:
    """Shrink [train, valid, test] in proportion to fit the distinct items available."""
    total = sum(sizes)
    if total <= available:
        return list(sizes)
    needed = sum(1 for s in sizes if s > 0)
    if available < needed:
        raise ValueError(
            f"only {available} distinct source(s) available, too few for "
            f"{needed} non-empty splits; widen the task's range or use more data"
        )
    fitted = [max(int(s * available / total), int(s > 0)) for s in sizes]
    fitted[0] = available - fitted[1] - fitted[2]
    if fitted[0] < 1:
        raise ValueError(f"only {available} distinct source(s) available: too few to leave any for training")
    return fitted
