"""docs/benchmarks.md holds today's figures: one row per measurement, each with its command and its date.

How a figure moved over time belongs in CHANGELOG.md; benchmarks.md keeps the latest figure of each
measurement (issue 34), so no measurement may be named twice, and a row without a command or a date could
not be reproduced or placed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "docs" / "benchmarks.md"
CODE = ("transformer", "ui", "pages", "bench")
HEADER = ["what", "command", "measured", "date", "target"]
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}( \d{2}:\d{2})?$")
# A command cell that only points at another row ("same command", "same run") hides what to run.
BACK_REFERENCE = re.compile(r"^\(?same (command|run)\)?$", re.IGNORECASE)


def cells(line: str) -> list[str]:
    """The cells of one markdown table row, with escaped pipes (``\\|``) kept inside their cell."""
    inner = line.strip().removeprefix("|").removesuffix("|")
    return [cell.replace("\\|", "|").strip() for cell in re.split(r"(?<!\\)\|", inner)]


def tables(text: str) -> list[tuple[int, list[str], list[tuple[int, list[str]]]]]:
    """Every markdown table of ``text``: (line number of its header, header cells, [(line number, cells)])."""
    found, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        is_table = (lines[i].lstrip().startswith("|") and i + 1 < len(lines)
                    and re.fullmatch(r"\s*\|?\s*:?-{3,}.*", lines[i + 1]))
        if not is_table:
            i += 1
            continue
        header, rows, j = cells(lines[i]), [], i + 2
        while j < len(lines) and lines[j].lstrip().startswith("|"):
            rows.append((j + 1, cells(lines[j])))
            j += 1
        found.append((i + 1, header, rows))
        i = j
    return found


def measurement_name(what: str) -> str:
    """A row's measurement, compared without markdown emphasis, case or spacing."""
    return re.sub(r"\s+", " ", what.replace("*", "").replace("`", "")).strip().lower()


def check(text: str) -> list[str]:
    """What is wrong with the tables of a benchmarks page, one line each (empty when nothing is)."""
    problems, seen = [], {}
    found = tables(text)
    if not found:
        problems.append("no table")
    for at, header, rows in found:
        if [h.lower() for h in header] != HEADER:
            problems.append(f"line {at}: header {header}, expected {HEADER}")
            continue
        for line, row in rows:
            if len(row) != len(HEADER):
                problems.append(f"line {line}: {len(row)} cells, expected {len(HEADER)}")
                continue
            what, command, measured, date, _ = row
            if not what or not measured:
                problems.append(f"line {line}: no measurement name or no figure")
            if not command or command in {"—", "-"} or BACK_REFERENCE.match(command):
                problems.append(f"line {line}: no command of its own ({command!r})")
            if not DATE.match(date):
                problems.append(f"line {line}: date {date!r} is not YYYY-MM-DD [HH:MM]")
            name = measurement_name(what)
            if name in seen:
                problems.append(f"line {line}: {what!r} is measured on line {seen[name]} already")
            seen.setdefault(name, line)
    return problems


def test_benchmarks_hold_one_current_row_per_measurement() -> None:
    assert check(BENCHMARKS.read_text(encoding="utf-8")) == []


def row_references(text: str) -> list[str]:
    """The rows a source file names as ``docs/benchmarks.md, "<row>"`` (a comment may wrap the name)."""
    flat = re.sub(r"\n\s*(#\s*)?", " ", text)  # one line: a wrapped comment or docstring joined with spaces
    return re.findall(r'docs/benchmarks\.md, "([^"]+)"', flat)


def test_code_names_rows_that_exist() -> None:
    names = [measurement_name(row[0]) for _, header, rows in tables(BENCHMARKS.read_text(encoding="utf-8"))
             for _, row in rows if row]
    missing = [f"{path.relative_to(ROOT)}: {ref!r}"
               for folder in CODE for path in sorted((ROOT / folder).rglob("*.py"))
               for ref in row_references(path.read_text(encoding="utf-8"))
               if not any(name.startswith(measurement_name(ref)) for name in names)]
    assert missing == []


GOOD = """| what | command | measured | date | target |
|---|---|---|---|---|
| decoding | `python bench/x.py` | 1.2× \\| 3 | 2026-11-22 | ≥ 2× |
| start-up | `python bench/y.py` | 3 s | 2026-11-25 13:40 | — |
"""


@pytest.mark.parametrize("text, problem", [
    (GOOD.replace("| start-up |", "| **Decoding** |"), "is measured on line 3 already"),
    (GOOD.replace("`python bench/y.py`", "same command"), "no command of its own"),
    (GOOD.replace("`python bench/y.py`", ""), "no command of its own"),
    (GOOD.replace("2026-11-25 13:40", "same run"), "is not YYYY-MM-DD"),
    (GOOD.replace("| date | target |", "| target |").replace("|---|---|---|---|---|", "|---|---|---|---|"),
     "header"),
    (GOOD.replace("| 3 s |", "|"), "cells, expected 5"),
    ("no tables here\n", "no table"),
])
def test_the_check_finds_each_fault(text: str, problem: str) -> None:
    assert check(GOOD) == []
    assert any(problem in line for line in check(text)), check(text)


def test_the_readme_sets_up_a_virtual_environment_and_says_what_the_models_folder_does() -> None:
    """Issue 45: the README's set-up never said to make a virtual environment, did not say that
    TRANSFORMER_APP_MODELS_DIR replaces pretrained/ in the menu (the shipped models vanish), and asked for
    `pip install huggingface_hub`, which requirements.txt already brings. It stays a front door: at most 150
    lines, with its two set-up commands."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    assert "pip install -r requirements.txt\nstreamlit run app.py" in readme
    assert "python -m venv" in readme.split("pip install -r requirements.txt")[0]  # before the first install
    models = readme[readme.index("TRANSFORMER_APP_MODELS_DIR"):][:300]
    assert "instead of" in models and "shipped models leave the menu" in models
    requirements = (ROOT / "requirements.txt").read_text(encoding="utf-8")
    assert re.search(r"^huggingface_hub\b", requirements, re.MULTILINE)
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        assert "pip install huggingface_hub" not in page.read_text(encoding="utf-8"), page.name
