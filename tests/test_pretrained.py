"""The shipped models in pretrained/: each loads fast and translates fixed examples exactly.

A model folder that does not exist yet (they are trained after the code lands) is skipped.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

PRETRAINED = Path(__file__).resolve().parents[1] / "pretrained"


def _numbers_en_de() -> list[tuple[str, str]]:
    from num2words import num2words

    fixed = [("three hundred and twelve", "dreihundertzwölf"), ("seven", "sieben"), ("forty-one", "einundvierzig")]
    # more numbers, each written the way the training data writes them (num2words)
    more = [(num2words(n, lang="en"), num2words(n, lang="de")) for n in (0, 19, 85, 1001, 4711, 90210)]
    return fixed + more


EXAMPLES = {
    "numbers-en-de": _numbers_en_de,
    "reverse": lambda: [("abc123", "321cba"), ("hello", "olleh"), ("x", "x"), ("transformer42", "24remrofsnart")],
}


def _folder(name: str) -> Path:
    folder = PRETRAINED / name
    if not (folder / "config.json").is_file():
        pytest.skip(f"pretrained/{name} does not exist yet")
    return folder


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_pretrained_model_loads_fast_and_translates_the_examples(name):
    folder = _folder(name)
    from transformer import load_pretrained

    start = time.perf_counter()
    pipe = load_pretrained(folder)
    elapsed = time.perf_counter() - start
    assert elapsed < 1.0, f"loading {name} took {elapsed:.2f} s"

    examples = EXAMPLES[name]()
    sources = [src for src, _ in examples]
    expected = [tgt for _, tgt in examples]
    assert pipe.translate(sources) == expected
    assert pipe.translate(sources[:3], beam_size=4) == expected[:3]


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_pretrained_model_has_a_model_card(name):
    folder = _folder(name)
    cards = [p for p in folder.iterdir() if p.name.lower() in ("readme.md", "model_card.md", "modelcard.md")]
    assert cards, f"pretrained/{name} has no model card (README.md)"
