"""The attribution registry describes each method once: ``attribute`` dispatches from its entry, and the app's costly
methods, the Explain page's method texts and the table in docs/explain.md are read off it, so none can drift."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import torch
from explain_helpers import batch, tiny_model

from transformer.explain import METHODS, REGISTRY, attribute, methods_markdown, methods_table
from transformer.explain.attribution import COSTS, GRADIENT_METHODS

DOCS = Path(__file__).resolve().parents[1] / "docs" / "explain.md"


def _docs_table() -> str:
    text = DOCS.read_text(encoding="utf-8")
    start = text.index("| method | what it computes |")
    return text[start:text.index("\n\n", start)]


def test_the_docs_table_is_the_registry():
    """docs/explain.md's table is ``methods_table()`` as it stands (regenerate it with the command the docs give)."""
    assert _docs_table() == methods_table()


def test_the_pages_method_texts_are_the_registry():
    from ui.sections.explain import METHODS_TEXT

    bullets = [line for line in METHODS_TEXT.splitlines() if line.startswith("- **")]
    assert len(bullets) == len(REGISTRY)  # one per method, none written by hand beside them
    assert METHODS_TEXT.startswith(methods_markdown())
    for entry, bullet in zip(REGISTRY.values(), bullets, strict=True):
        assert entry.description in bullet and entry.good_for in bullet and entry.paper in bullet
        assert COSTS[entry.cost] in bullet


def test_every_text_fits_a_table_cell():
    for entry in REGISTRY.values():
        for text in (entry.label, entry.summary, entry.paper, entry.description, entry.good_for):
            assert "|" not in text and "\n" not in text, (entry.name, text)
        assert entry.cost in COSTS


def test_the_app_reads_the_costly_methods_and_titles_off_the_registry():
    from ui.compute.explain import METHOD_TITLES, costly

    assert {m for m in METHODS if costly(m)} == {m for m in METHODS if REGISTRY[m].cost != "forward"}
    assert METHOD_TITLES == {m: REGISTRY[m].title for m in METHODS}
    assert GRADIENT_METHODS == ("saliency", "input_x_gradient", "integrated_gradients")


def test_attribute_calls_the_entrys_function_with_its_options(monkeypatch: pytest.MonkeyPatch):
    """A new entry needs no other change: ``attribute`` checks the options against the entry, calls its function
    with them as keywords and masks what it returns (padding rows and columns set to 0)."""
    calls = []

    def fake(model, src_ids, tgt_ids, contrast_ids, progress, **options):  # progress: told between steps
        calls.append((contrast_ids, options))
        b, s, t = src_ids.size(0), src_ids.size(1), tgt_ids.size(1) - 1
        return torch.ones(b, t, s, dtype=torch.float64), torch.ones(b, t, t, dtype=torch.float64), None

    entry = dataclasses.replace(REGISTRY["alti"], name="fake", function=fake, options=("layer",), contrast=True)
    monkeypatch.setitem(REGISTRY, "fake", entry)
    model = tiny_model()
    src, tgt = batch()
    contrast = torch.tensor([[4, 5, 9, 7], [8, 6, 0, 0]])
    result = attribute(model, src, tgt, "fake", contrast_ids=contrast, layer=1)
    assert calls[0][1] == {"layer": 1} and calls[0][0] is contrast
    assert result.method == "fake" and result.delta is None
    assert result.source[1, 2:].abs().sum() == 0 and result.source[1, :, 3:].abs().sum() == 0  # padding masked
    assert result.source[0].eq(1).all() and result.target is not None
    with pytest.raises(ValueError, match="unknown option"):
        attribute(model, src, tgt, "fake", n_steps=3)


def test_no_formula_turns_into_italics():
    """Markdown reads ``)_{j,d} ... e_{j,d}`` as emphasis: only the papers' titles may come out in italics (a
    formula with such underscores goes in a code span)."""
    markdown_it = pytest.importorskip("markdown_it")
    html = markdown_it.MarkdownIt("commonmark").enable("table").render(methods_markdown() + "\n\n" + methods_table())
    titles = {title for m in REGISTRY.values() for title in m.paper.split("*")[1::2]}
    assert set(re.findall(r"<em>(.*?)</em>", html)) <= titles


# Modules that single out methods by what they are (a per-layer view, a baseline, a removal, a cost): each reads it
# from the method's registry entry, so that a method added later is treated by its facts, not by its name.
READ_FROM_THE_REGISTRY = {"transformer/explain/mixing.py": set(), "transformer/explain/sanity.py": set(),
                          "transformer/explain/eraser.py": set(), "ui/compute/explain_alignment.py": set(),
                          "ui/compute/faithfulness.py": set(),
                          "ui/compute/explain.py": {"alti"}}  # ALTI+'s own output, its source share


def test_method_facts_are_read_from_the_registry_not_from_method_names() -> None:
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    for name, allowed in READ_FROM_THE_REGISTRY.items():
        tree = ast.parse((root / name).read_text(encoding="utf-8"))
        named = {node.value for node in ast.walk(tree)
                 if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in REGISTRY}
        assert named <= allowed, f"{name} names {sorted(named - allowed)}: read the fact from REGISTRY"


def test_the_registry_holds_the_facts_the_app_reads() -> None:
    from transformer.explain.attribution import LAYER_VIEW_METHODS, UNDEFINED_REASONS, own_options

    assert LAYER_VIEW_METHODS == ("value_zeroing", "alti")
    assert set(UNDEFINED_REASONS) == {"value_zeroing", "alti"}
    assert [m.name for m in REGISTRY.values() if m.baseline] == ["integrated_gradients"]
    assert {m.name: m.removal for m in REGISTRY.values() if m.removal != "unk"} == {
        "input_x_gradient": "zero", "integrated_gradients": "baseline"}
    assert own_options("occlusion", {"baseline": "pad", "layer": 1}) == {}
    assert own_options("alti", {"baseline": "pad", "layer": 1}) == {"layer": 1}
