"""``python -m transformer.hub download``: a folder appears whole and checked, or not at all (no network).

A stand-in ``huggingface_hub`` module is put in ``sys.modules``; its ``snapshot_download`` writes a tiny fake
Marian folder (only the files' presence is checked, so their bytes are placeholders), an incomplete one, or
raises, and records how it was called.
"""

from __future__ import annotations

import fnmatch
import json
import os
import sys
import types
from pathlib import Path

import pytest

import transformer
from transformer.hub import download as download_module
from transformer.hub.__main__ import main
from transformer.hub.download import DEFAULT_OUT, DownloadError, download
from transformer.hub.folder import BIN_PATTERNS, DOWNLOAD_PATTERNS

REPO = "Helsinki-NLP/opus-mt-en-de"
MARIAN_FILES = {"config.json": json.dumps({"model_type": "marian", "d_model": 16}), "model.safetensors": "weights",
                "source.spm": "spm", "target.spm": "spm", "vocab.json": "{}", "tokenizer_config.json": "{}"}


class FakeHTTPError(Exception):
    """What huggingface_hub raises for a repository that is not there (a several-line message)."""


def stand_in(monkeypatch, *, files: dict[str, str] | None = None, error: BaseException | None = None) -> list[dict]:
    """Install a fake huggingface_hub; return the list its snapshot_download appends each call's arguments to."""
    calls: list[dict] = []

    def snapshot_download(repo_id, *, revision=None, local_dir=None, allow_patterns=None):
        local_dir = Path(local_dir)
        out = local_dir.parent.parent
        calls.append({"repo_id": repo_id, "revision": revision, "local_dir": local_dir,
                      "allow_patterns": allow_patterns,
                      "listed_while_downloading": [p.name for p in out.iterdir() if (p / "config.json").exists()]})
        local_dir.mkdir(parents=True, exist_ok=True)
        for name, content in (MARIAN_FILES if files is None else files).items():
            if any(fnmatch.fnmatch(name, pattern) for pattern in allow_patterns):  # as huggingface_hub filters
                (local_dir / name).write_text(content, encoding="utf-8")
        (local_dir / ".cache" / "huggingface").mkdir(parents=True, exist_ok=True)
        (local_dir / ".cache" / "huggingface" / "config.json.metadata").write_text("x", encoding="utf-8")
        if error is not None:
            raise error
        return str(local_dir)

    module = types.ModuleType("huggingface_hub")
    module.snapshot_download = snapshot_download
    monkeypatch.setitem(sys.modules, "huggingface_hub", module)
    return calls


def test_download_lands_under_out(monkeypatch, tmp_path, capsys):
    calls = stand_in(monkeypatch)
    out = tmp_path / "models"
    assert main(["download", REPO, "--out", str(out), "--revision", "v1.0"]) == 0
    folder = out / "opus-mt-en-de"
    assert sorted(p.name for p in folder.iterdir()) == sorted(MARIAN_FILES)  # the Hub's .cache is dropped
    assert [p.name for p in out.iterdir()] == ["opus-mt-en-de"]  # no staging folder left
    (call,) = calls
    assert call["repo_id"] == REPO and call["revision"] == "v1.0" and call["allow_patterns"] == DOWNLOAD_PATTERNS
    assert call["local_dir"].parent.parent == out and call["local_dir"].parent.name.startswith(".")
    assert call["listed_while_downloading"] == []  # nothing under out/ looked like a model until it was complete
    assert f"Downloaded {REPO} to {folder}" in capsys.readouterr().out


def test_default_out_is_the_projects_pretrained_folder():
    assert DEFAULT_OUT == (Path(transformer.__file__).parent.parent / "pretrained").resolve()


@pytest.mark.parametrize("error", [FakeHTTPError("404 Client Error: Repository Not Found\nRequest ID: abc"),
                                   ConnectionError("Name or service not known")])
def test_a_failed_download_leaves_nothing(monkeypatch, tmp_path, capsys, error):
    stand_in(monkeypatch, error=error)
    out = tmp_path / "models"
    assert main(["download", REPO, "--out", str(out)]) == 2
    assert not out.exists()
    err = capsys.readouterr().err
    assert f"Downloading {REPO} from the Hugging Face Hub failed ({type(error).__name__}" in err
    assert f"git clone https://huggingface.co/{REPO}" in err and "load_pretrained" in err
    assert "Request ID" not in err and "Traceback" not in err and err.count("\n") == 1


def test_an_interrupted_download_leaves_nothing(monkeypatch, tmp_path):
    stand_in(monkeypatch, error=KeyboardInterrupt())
    (tmp_path / "other").mkdir()
    with pytest.raises(KeyboardInterrupt):
        download(REPO, out=tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["other"]


@pytest.mark.parametrize(("files", "message"), [
    ({k: v for k, v in MARIAN_FILES.items() if k != "target.spm"}, "not a complete marian folder: it lacks target.spm"),
    ({k: v for k, v in MARIAN_FILES.items() if k != "model.safetensors"}, "lacks model.safetensors or pytorch_model"),
    ({**MARIAN_FILES, "config.json": json.dumps({"model_type": "t5"})}, "not a complete t5 folder: it lacks tokenizer"),
    ({**MARIAN_FILES, "config.json": json.dumps({"model_type": "phi3"})}, "'phi3' is not supported: it is a decoder"),
    ({**MARIAN_FILES, "config.json": "{broken"}, "not a Hugging Face model config"),
])
def test_a_folder_that_is_not_marian_is_refused(monkeypatch, tmp_path, files, message):
    stand_in(monkeypatch, files=files)
    with pytest.raises(DownloadError, match=message):
        download(REPO, out=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_an_existing_folder_is_kept_unless_forced(monkeypatch, tmp_path, capsys):
    calls = stand_in(monkeypatch)
    old = tmp_path / "opus-mt-en-de"
    old.mkdir()
    (old / "mine.txt").write_text("keep", encoding="utf-8")
    assert main(["download", REPO, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{old} already exists" in err and "--force" in err
    assert calls == [] and [p.name for p in old.iterdir()] == ["mine.txt"]

    assert main(["download", REPO, "--out", str(tmp_path), "--force"]) == 0
    assert sorted(p.name for p in old.iterdir()) == sorted(MARIAN_FILES)
    assert [p.name for p in tmp_path.iterdir()] == ["opus-mt-en-de"]


def test_a_forced_download_that_fails_keeps_the_old_folder(monkeypatch, tmp_path):
    old = tmp_path / "opus-mt-en-de"
    old.mkdir()
    (old / "mine.txt").write_text("keep", encoding="utf-8")
    stand_in(monkeypatch, files={"config.json": MARIAN_FILES["config.json"]})
    with pytest.raises(DownloadError, match="lacks"):
        download(REPO, out=tmp_path, force=True)
    assert [p.name for p in tmp_path.iterdir()] == ["opus-mt-en-de"]
    assert [p.name for p in old.iterdir()] == ["mine.txt"]

    # The final rename failing puts the old folder back.
    stand_in(monkeypatch)
    real_replace = os.replace

    def failing_replace(src, dst):
        if Path(dst) == old and Path(src).name == "opus-mt-en-de":  # the new folder's rename, not the restore
            raise OSError("disk full")
        return real_replace(src, dst)

    monkeypatch.setattr(download_module.os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        download(REPO, out=tmp_path, force=True)
    assert [p.name for p in tmp_path.iterdir()] == ["opus-mt-en-de"]
    assert [p.name for p in old.iterdir()] == ["mine.txt"]


@pytest.mark.parametrize("repo_id", ["opus-mt-en-de", "a/b/c", "../x", "a/..", "owner/na me", "owner/-x", "", "/x",
                                     "owner/x;rm", "owner/x\n", "ow--ner/x", "owner/" + "x" * 97])
def test_a_bad_repo_id_is_refused_first(monkeypatch, tmp_path, capsys, repo_id):
    calls = stand_in(monkeypatch)
    assert main(["download", repo_id, "--out", str(tmp_path / "models")]) == 2
    assert "is not a Hugging Face model id" in capsys.readouterr().err
    assert calls == [] and not (tmp_path / "models").exists()


def test_a_bad_revision_is_refused(monkeypatch, tmp_path):
    calls = stand_in(monkeypatch)
    with pytest.raises(DownloadError, match="is not a revision"):
        download(REPO, out=tmp_path, revision="../../etc")
    assert calls == []


def test_without_huggingface_hub(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import huggingface_hub now raises ImportError
    out = tmp_path / "models"
    assert main(["download", REPO, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "huggingface_hub is not installed" in err and "pip install huggingface_hub" in err
    assert f"git clone https://huggingface.co/{REPO}" in err and "Traceback" not in err
    assert not out.exists()


def test_help(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["download", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert "--out DIR" in text and "--revision REV" in text and "--force" in text and "owner/name" in text
    with pytest.raises(SystemExit) as exit_info:
        main([])
    assert exit_info.value.code == 2


FAMILY_FILES = {  # what each family's repository holds (placeholders: only presence and config.json are read)
    "google/flan-t5-small": ({"model_type": "t5"}, {"T5Tokenizer"}, ["spiece.model"]),
    "facebook/bart-base": ({"model_type": "bart"}, {"BartTokenizer"}, ["vocab.json", "merges.txt"]),
    "facebook/mbart-large-50-many-to-many-mmt": ({"model_type": "mbart"}, {"MBart50Tokenizer"},
                                                 ["sentencepiece.bpe.model"]),
    "facebook/nllb-200-distilled-600M": ({"model_type": "m2m_100"}, {"NllbTokenizer"}, ["sentencepiece.bpe.model"]),
    "HuggingFaceTB/SmolLM2-135M": ({"model_type": "llama"}, {"GPT2Tokenizer"}, ["vocab.json", "merges.txt"]),
    "openai-community/gpt2": ({"model_type": "gpt2"}, {"GPT2Tokenizer"}, ["vocab.json", "merges.txt"]),
    "Qwen/Qwen3-0.6B": ({"model_type": "qwen3"}, {"Qwen2Tokenizer"}, ["vocab.json", "merges.txt"]),
    "google/gemma-3-270m": ({"model_type": "gemma3_text"}, {"GemmaTokenizer"}, ["tokenizer.model",
                                                                                 "chat_template.jinja"]),
}


@pytest.mark.parametrize("repo_id", list(FAMILY_FILES))
@pytest.mark.parametrize("weights", [["model.safetensors"], ["pytorch_model.bin"],
                                     ["model.safetensors", "pytorch_model.bin"]])
def test_a_family_folder_arrives_with_what_it_needs(monkeypatch, tmp_path, repo_id, weights):
    config, (tokenizer_class,), other = FAMILY_FILES[repo_id]
    repository = {"config.json": json.dumps(config), "tokenizer.json": "{}", "generation_config.json": "{}",
                  "special_tokens_map.json": "{}", "tokenizer_config.json": json.dumps({"tokenizer_class":
                                                                                          tokenizer_class}),
                  "flax_model.msgpack": "x", "tf_model.h5": "x", "README.md": "x",
                  **dict.fromkeys(other, "x"), **dict.fromkeys(weights, "w")}
    calls = stand_in(monkeypatch, files=repository)
    folder = download(repo_id, out=tmp_path)
    got = {p.name for p in folder.iterdir()}
    assert {"config.json", "tokenizer.json", "generation_config.json", "tokenizer_config.json",
            "special_tokens_map.json"} <= got and not got & {"flax_model.msgpack", "tf_model.h5", "README.md"}
    only_bin = weights == ["pytorch_model.bin"]
    assert got & {"model.safetensors", "pytorch_model.bin"} == {weights[0]}  # never both
    assert [call["allow_patterns"] for call in calls] == [DOWNLOAD_PATTERNS, *([BIN_PATTERNS] if only_bin else [])]
    assert ("chat_template.jinja" in got) == ("chat_template.jinja" in other)  # an instruct model's template


def test_a_gated_repository_says_how_to_log_in(monkeypatch, tmp_path):
    stand_in(monkeypatch, error=OSError("401 Client Error: Unauthorized. Access to model meta-llama/Llama-3.2-1B "
                                        "is restricted (gated repo)"))
    with pytest.raises(DownloadError, match="accept its licence.*hf auth login"):
        download("meta-llama/Llama-3.2-1B", out=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_family_folder_with_another_tokenizer_is_refused(monkeypatch, tmp_path):
    stand_in(monkeypatch, files={"config.json": json.dumps({"model_type": "m2m_100"}), "model.safetensors": "w",
                                 "tokenizer.json": "{}", "tokenizer_config.json": json.dumps(
                                     {"tokenizer_class": "M2M100Tokenizer"})})
    with pytest.raises(DownloadError, match="its tokenizer is M2M100Tokenizer"):
        download("facebook/m2m100_418M", out=tmp_path)
    assert list(tmp_path.iterdir()) == []
