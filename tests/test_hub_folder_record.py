"""A folder takes one way through the hub: its small files are read once, each under its cap, into one record
(``folder.read_folder``), which its family maps; no reader opens config.json, tokenizer_config.json or
generation_config.json a second time."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import torch
from family_folders import random_folder

import transformer.checkpoints.file_caps as file_caps
from transformer.hub.folder import read_folder
from transformer.hub.load import load_hf

pytest.importorskip("transformers")


@pytest.mark.parametrize("name", ["t5", "m2m100"])
def test_each_small_file_is_read_once(name, family_tokenizers, tmp_path, monkeypatch) -> None:
    folder, _ = random_folder(name, family_tokenizers, tmp_path, dtype=torch.float32)
    assert {"config.json", "tokenizer_config.json", "generation_config.json"} <= {p.name for p in folder.iterdir()}
    reads: Counter[str] = Counter()
    read_capped = file_caps.read_capped

    def counted(path, cap):  # noqa: ANN001, ANN202
        reads[Path(path).name] += 1
        return read_capped(path, cap)

    monkeypatch.setattr(file_caps, "read_capped", counted)
    load_hf(folder)
    assert reads["config.json"] == reads["tokenizer_config.json"] == reads["generation_config.json"] == 1, reads


def test_the_record_holds_what_the_family_maps(family_tokenizers, tmp_path) -> None:
    folder, _ = random_folder("bart", family_tokenizers, tmp_path, dtype=torch.float32)
    record = read_folder(folder)
    assert record.model_type == "bart" and record.config["model_type"] == "bart"
    assert record.tokenizer_config.get("tokenizer_class") and record.weight_files == (folder / "model.safetensors",)
    (folder / "generation_config.json").write_text("[]", encoding="utf-8")
    with pytest.raises(ValueError, match=r"^generation_config.json: not a JSON object$"):
        read_folder(folder)
