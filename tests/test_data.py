"""The built-in tasks are deterministic, disjoint and correct; bad user files get clear errors."""

from __future__ import annotations

import datetime
from collections import Counter

import pytest

from transformer.text.tasks import TASKS, DataError, Splits, describe_task, load_pairs, make_task, split_pairs

SMALL = {"n_train": 300, "n_valid": 30, "n_test": 30}


def sources(pairs):
    return {src for src, _ in pairs}


@pytest.mark.parametrize("task", TASKS)
def test_same_seed_same_splits_other_seed_other_splits(task):
    a = make_task(task, seed=1, **SMALL)
    assert a == make_task(task, seed=1, **SMALL)
    assert a.train != make_task(task, seed=2, **SMALL).train


@pytest.mark.parametrize("task", [t for t in TASKS if t != "numbers"])  # numbers: see below
def test_splits_have_the_sizes_asked_for_and_share_no_source(task):
    s = make_task(task, **SMALL)
    assert (len(s.train), len(s.valid), len(s.test)) == (300, 30, 30)
    assert s.task == task
    assert len(sources(s.all_pairs())) == 360  # sources are distinct, hence in one split each
    assert not sources(s.train) & sources(s.test)
    assert not sources(s.valid) & (sources(s.train) | sources(s.test))
    assert describe_task(task)


def test_numbers_train_on_what_users_type_with_repeats_and_the_building_blocks():
    s = make_task("numbers", src_lang="digits", tgt_lang="en", n_train=6000, n_valid=0, n_test=0)
    assert len(s.train) == 6000
    values = [int(src) for src, _ in s.train]
    assert set(range(100)) <= set(values)  # every building block, whatever the draw
    assert {100, 900, 1000, 9000, 10_000, 500_000, 900_000} <= set(values)
    counts = Counter(len(str(v)) for v in values)
    assert set(counts) == {1, 2, 3, 4, 5, 6}
    assert 800 < counts[1] < 1200  # one in six, as users type them: repeats, not ten pairs in 6000
    assert 800 < counts[6] < 1200
    assert all(0 <= v <= 999_999 for v in values)


def test_numbers_test_split_measures_what_users_type_and_holds_out_the_large_strata():
    s = make_task("numbers", src_lang="digits", tgt_lang="en")  # the defaults: 20,000 / 500 / 1,000
    seen = sources(s.train)
    counts = Counter(len(src) for src, _ in s.test)
    assert set(counts) == {1, 2, 3, 4, 5, 6} and min(counts.values()) > 120  # about 1,000 / 6 each
    for src, _ in s.test + s.valid:
        if len(src) >= 4:  # training covers under half of these: held out
            assert src not in seen
    assert any(len(src) <= 2 for src, _ in s.test)  # small numbers are measured although trained on


def test_numbers_respect_max_number_and_keep_the_sizes():
    s = make_task("numbers", src_lang="digits", max_number=99, **SMALL)
    assert (len(s.train), len(s.valid), len(s.test)) == (300, 30, 30)
    assert {int(src) for src, _ in s.train} == set(range(100))
    assert all(0 <= int(src) <= 99 for src, _ in s.all_pairs())


def test_numbers_train_holds_the_building_blocks_when_they_fit():
    s = make_task("numbers", src_lang="digits", max_number=999, n_train=109, n_valid=0, n_test=0)
    assert {int(src) for src, _ in s.train} == set(range(100)) | {k * 100 for k in range(1, 10)}
    few = make_task("numbers", src_lang="digits", n_train=8, n_valid=0, n_test=0)  # examples: as asked
    assert len(few.train) == 8


def test_dates_train_has_every_month_and_every_day_of_the_month():
    s = make_task("dates", n_train=20, n_valid=50, n_test=50, seed=3)
    days = [datetime.date.fromisoformat(src) for src, _ in s.train]
    assert {d.month for d in days} == set(range(1, 13))
    assert {d.day for d in days} == set(range(1, 32))
    assert not sources(s.train) & (sources(s.valid) | sources(s.test))  # still held out


@pytest.mark.parametrize(
    "lang, number, words",
    [
        ("en", 47, "forty-seven"),
        ("en", 312, "three hundred and twelve"),
        ("de", 47, "siebenundvierzig"),
        ("de", 312, "dreihundertzwölf"),
        ("fr", 99, "quatre-vingt-dix-neuf"),
        ("es", 47, "cuarenta y siete"),
        ("it", 47, "quarantasette"),
    ],
)
def test_number_words_are_num2words_output(lang, number, words):
    s = make_task("numbers", src_lang="digits", tgt_lang=lang, max_number=999, n_train=9000, n_valid=0, n_test=0)
    assert dict(s.all_pairs())[str(number)] == words


def test_dates_iso_to_german_long():
    s = make_task("dates", min_year=2026, max_year=2026, n_train=355, n_valid=5, n_test=5)
    table = dict(s.all_pairs())
    assert table["2026-11-21"] == "21. November 2026"
    assert table["2026-05-03"] == "3. Mai 2026"


def test_dates_other_formats_and_locales():
    s = make_task(
        "dates",
        src_format="en-long",
        tgt_format="medium",
        tgt_lang="fr",
        min_year=2026,
        max_year=2026,
        n_train=355,
        n_valid=5,
        n_test=5,
    )
    assert dict(s.all_pairs())["November 21, 2026"] == "21 nov. 2026"
    for src, _ in make_task("dates", **SMALL).train:
        assert 1900 <= datetime.date.fromisoformat(src).year <= 2099


@pytest.mark.parametrize(
    "task, expect", [("copy", lambda s: s), ("reverse", lambda s: s[::-1]), ("sort", lambda s: "".join(sorted(s)))]
)
def test_string_tasks_targets(task, expect):
    s = make_task(task, min_len=3, max_len=9, **SMALL)
    for src, tgt in s.all_pairs():
        assert tgt == expect(src)
        assert 3 <= len(src) <= 9 and set(src) <= set("abcdefghijklmnopqrstuvwxyz0123456789")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"task": "translate"}, "valid choices: numbers, dates"),
        ({"task": "numbers", "tgt_lang": "xx"}, "unknown tgt_lang 'xx'"),
        ({"task": "numbers", "max_len": 3}, "valid options: max_number"),
        ({"task": "dates", "tgt_format": "short"}, "tgt_format"),
        ({"task": "dates", "tgt_lang": "digits", "tgt_format": "long"}, "date locale"),
        ({"task": "copy", "min_len": 5, "max_len": 2}, "min_len"),
        ({"task": "copy", "n_train": 0}, "n_train"),
    ],
)
def test_bad_arguments_raise_value_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_task(**kwargs)


def test_split_pairs_dedupes_by_source_and_is_deterministic():
    pairs = [(f"s{i % 50}", f"t{i}") for i in range(100)]  # every source twice
    s = split_pairs(pairs, valid_fraction=0.1, test_fraction=0.1, seed=3)
    assert isinstance(s, Splits) and (len(s.train), len(s.valid), len(s.test)) == (40, 5, 5)
    assert len(sources(s.all_pairs())) == 50
    assert dict(s.all_pairs())["s7"] == "t7"  # the first target seen wins
    assert s == split_pairs(pairs, valid_fraction=0.1, test_fraction=0.1, seed=3)


# --- load_pairs -------------------------------------------------------------------

GOOD_LINES = [f"source {i}\tziel {i}" for i in range(12)]


def write(tmp_path, content: bytes, name: str = "pairs.tsv"):
    path = tmp_path / name
    path.write_bytes(content)
    return path


def test_good_tsv_with_header_blank_lines_and_whitespace(tmp_path):
    text = "source\ttarget\n\n" + "\n".join(f"  {line} " for line in GOOD_LINES) + "\r\n\n"
    pairs = load_pairs(write(tmp_path, text.encode()))
    assert len(pairs) == 12 and pairs[0] == ("source 0", "ziel 0")


def test_good_csv_with_quotes_and_bom_from_bytes():
    text = "src,tgt\n" + "".join(f'"hello, {i}",hallo {i}\n' for i in range(10))
    pairs = load_pairs(("\ufeff" + text).encode(), name="upload.csv")
    assert pairs[3] == ("hello, 3", "hallo 3") and len(pairs) == 10


def test_not_utf8_names_line_and_offset(tmp_path):
    data = "\n".join(GOOD_LINES[:3]).encode() + b"\nsch\xf6n\tbeautiful\n"
    with pytest.raises(DataError, match=r"not UTF-8.*0xf6 on line 4 \(byte offset 51\)"):
        load_pairs(write(tmp_path, data))


def test_binary_file(tmp_path):
    with pytest.raises(DataError, match=r"binary file.*line 3 \(byte offset 8\)"):
        load_pairs(write(tmp_path, b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
    with pytest.raises(DataError, match="UTF-16"):
        load_pairs(write(tmp_path, "a\tb\n".encode("utf-16")))


def test_too_large(tmp_path):
    with pytest.raises(DataError, match="larger than the limit"):
        load_pairs(write(tmp_path, "\n".join(GOOD_LINES).encode()), max_bytes=100)


def test_wrong_number_of_columns_names_the_line(tmp_path):
    lines = GOOD_LINES[:4] + ["one\ttwo\tthree"] + GOOD_LINES[4:]
    with pytest.raises(DataError, match="line 5: expected 2 tab-separated columns.*found 3"):
        load_pairs(write(tmp_path, "\n".join(lines).encode()))


def test_empty_target_names_the_line(tmp_path):
    lines = ["source\ttarget"] + GOOD_LINES[:2] + ["lonely\t  "] + GOOD_LINES[2:]
    with pytest.raises(DataError, match="line 4: the target is empty"):
        load_pairs(write(tmp_path, "\n".join(lines).encode()))


def test_too_few_pairs(tmp_path):
    with pytest.raises(DataError, match="found 3 pair.*at least 10"):
        load_pairs(write(tmp_path, "\n".join(GOOD_LINES[:3]).encode()))


def test_empty_file(tmp_path):
    with pytest.raises(DataError, match="pairs.tsv: the file is empty"):
        load_pairs(write(tmp_path, b"\n  \n"))
    with pytest.raises(DataError, match="the file is empty"):
        load_pairs(b"")


def test_missing_file_and_bad_csv_quote(tmp_path):
    with pytest.raises(DataError, match="cannot read"):
        load_pairs(tmp_path / "nope.tsv")
    with pytest.raises(DataError, match="line 2: expected 2 comma-separated"):
        load_pairs(b"a,b\nc,d,e\n", name="x.csv")
