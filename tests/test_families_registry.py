"""A family is one file: the registry is what ``transformer/hub/families/`` holds, so a new model_type needs its
file (and its tests) and nothing else: no list to extend, no dispatch to edit, no ui table."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from family_folders import random_folder

from transformer.hub import families
from transformer.pipeline import load_pretrained

pytest.importorskip("transformers")

# A throw-away family: T5's tables under a new model_type, declared the way every family file declares itself.
COPY = '''
from dataclasses import replace

from transformer.hub.families import t5


def config_of(document):
    return t5.config_of({**document, "model_type": "t5"})


FAMILY = replace(t5.FAMILY, model_type="t5_copy", name="T5 copy", display_name="T5 (a copy)", config_of=config_of,
                 default_languages=("en", "de"))
'''


@pytest.fixture
def extra_family(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """``families`` with one more module in its package path (the registry found afresh, and forgotten after)."""
    extra = tmp_path / "extra_families"
    extra.mkdir()
    (extra / "t5_copy.py").write_text(COPY, encoding="utf-8")
    monkeypatch.setattr(families, "__path__", [*families.__path__, str(extra)])
    monkeypatch.delitem(sys.modules, "transformer.hub.families.t5_copy", raising=False)
    families.registry.cache_clear()
    yield
    families.registry.cache_clear()


def test_the_registry_is_the_folders_files() -> None:
    assert families.supported() == ("marian", "t5", "bart", "mbart", "m2m_100", "gpt2", "llama", "mistral", "qwen2",
                                    "qwen3", "gemma2", "gemma3_text")
    assert all(family.model_type == name for name, family in families.registry().items())
    files = {p.stem for p in Path(families.__file__).parent.glob("*.py") if not p.stem.startswith("_")}
    assert files == set(families.supported())


def test_a_new_family_needs_nothing_but_its_file(extra_family, family_tokenizers, tmp_path) -> None:
    """A folder of the new model_type opens (the loader), is named (the menu) and gets examples (the analysis),
    computing exactly what the family it copies computes."""
    from ui.compute.analysis import hub_examples
    from ui.models.menu import family_name

    assert families.supported()[-1] == "t5_copy"
    folder, _ = random_folder("t5", family_tokenizers, tmp_path, dtype=torch.float32)
    original = load_pretrained(folder)
    document = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**document, "model_type": "t5_copy"}))
    copy = load_pretrained(folder)
    assert copy.meta["model_type"] == "t5_copy" and copy.config == original.config
    ids = torch.tensor([[5, 6, 7, 1]])
    with torch.no_grad():
        assert torch.equal(copy.model(ids, ids), original.model(ids, ids))  # the same tables: the same numbers
    assert family_name("t5_copy") == "T5 (a copy)"
    assert hub_examples("t5_copy", folder.name, None) == hub_examples("t5", folder.name, None) != []


def test_a_type_no_file_declares_is_refused_listing_the_files() -> None:
    with pytest.raises(ValueError, match="decoder-only.*marian, t5, bart, mbart, m2m_100, gpt2, llama"):
        families.family_of("phi3")
