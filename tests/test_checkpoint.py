"""Checkpoint folders: round trips, atomic saves, and clear errors for damaged files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import transformer.checkpoints.checkpoint as ckpt
from transformer.checkpoints.checkpoint import (
    CheckpointError,
    append_log,
    list_snapshots,
    load_checkpoint,
    load_optimizer_state,
    prune_snapshots,
    read_log,
    save_checkpoint,
    save_snapshot,
    thin_steps,
)
from transformer.network.config import TransformerConfig
from transformer.network.model import Transformer
from transformer.text.tokenizers import CharTokenizer

TEXTS = ["hello world", "forty-two", "zweiundvierzig"]


def tiny_model(vocab: int, *, tie: bool = False, d_ff: int = 32, seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    config = TransformerConfig(src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=16, n_heads=2, n_layers=1,
                               d_ff=d_ff, dropout=0.0, max_len=64, tying="all" if tie else "none")
    return Transformer(config).eval()


def logits_of(model: Transformer) -> torch.Tensor:
    src = torch.tensor([[5, 6, 7, 3], [8, 9, 3, 0]])
    tgt = torch.tensor([[2, 5, 6], [2, 7, 0]])
    with torch.no_grad():
        return model(src, tgt)


@pytest.fixture
def tokenizer() -> CharTokenizer:
    return CharTokenizer.from_texts(TEXTS)


@pytest.mark.parametrize("tie", [False, True])
def test_round_trip_gives_identical_logits(tmp_path: Path, tokenizer: CharTokenizer, tie: bool) -> None:
    model = tiny_model(tokenizer.vocab_size, tie=tie)
    save_checkpoint(tmp_path / "ck", model, tokenizer, tokenizer, {"task": "copy", "step": 7})
    loaded = load_checkpoint(tmp_path / "ck")
    assert torch.equal(logits_of(loaded.model), logits_of(model))
    assert loaded.config == model.config
    assert (tmp_path / "ck" / "model.safetensors").stat().st_mode & 0o044  # readable by others, not just 0600
    assert loaded.meta["task"] == "copy" and loaded.meta["step"] == 7
    assert not loaded.model.training
    assert loaded.src_tokenizer.encode("hello") == tokenizer.encode("hello")
    if tie:  # the tied matrix is stored once and shared again after loading
        assert loaded.model.generator.weight is loaded.model.src_embed.weight
        assert loaded.model.tgt_embed.weight is loaded.model.src_embed.weight


def test_snapshots_are_listed_and_loaded(tmp_path: Path, tokenizer: CharTokenizer) -> None:
    first = tiny_model(tokenizer.vocab_size, seed=1)
    final = tiny_model(tokenizer.vocab_size, seed=2)
    save_snapshot(tmp_path, first, 100)
    save_snapshot(tmp_path, final, 5)
    save_checkpoint(tmp_path, final, tokenizer, tokenizer, {})
    assert (tmp_path / "snapshots" / "step_0000100.safetensors").is_file()
    assert list_snapshots(tmp_path) == [5, 100]
    assert torch.equal(logits_of(load_checkpoint(tmp_path, step=100).model), logits_of(first))
    assert torch.equal(logits_of(load_checkpoint(tmp_path).model), logits_of(final))
    with pytest.raises(CheckpointError, match="no snapshot at step 7"):
        load_checkpoint(tmp_path, step=7)
    assert list_snapshots(tmp_path / "nowhere") == []


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_snapshots_load_as_float32(tmp_path: Path, tokenizer: CharTokenizer, dtype: str) -> None:
    model = tiny_model(tokenizer.vocab_size, tie=True, d_ff=64)
    save_checkpoint(tmp_path, model, tokenizer, tokenizer, {})
    full = save_snapshot(tmp_path, model, 1)
    half = save_snapshot(tmp_path, model, 2, dtype=dtype)
    assert half.stat().st_size < 0.6 * full.stat().st_size
    from safetensors import safe_open

    with safe_open(half, "pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {ckpt.STORAGE_DTYPES[dtype]}
    loaded = load_checkpoint(tmp_path, step=2).model
    assert {p.dtype for p in loaded.parameters()} == {torch.float32}
    assert loaded.generator.weight is loaded.src_embed.weight  # still tied
    tolerance = 1e-2 if dtype == "float16" else 5e-2
    torch.testing.assert_close(logits_of(loaded), logits_of(model), atol=tolerance, rtol=tolerance)
    assert torch.equal(logits_of(load_checkpoint(tmp_path, step=1).model), logits_of(model))
    with pytest.raises(ValueError, match="unknown snapshot dtype"):
        save_snapshot(tmp_path, model, 3, dtype="int8")


def test_integer_weights_are_refused(tmp_path: Path, tokenizer: CharTokenizer) -> None:
    model = tiny_model(tokenizer.vocab_size)
    save_checkpoint(tmp_path, model, tokenizer, tokenizer, {})
    from safetensors.torch import load_file, save_file

    weights = load_file(tmp_path / "model.safetensors")
    weights["generator.weight"] = weights["generator.weight"].to(torch.int32)
    save_file(weights, tmp_path / "model.safetensors")
    with pytest.raises(CheckpointError, match="generator.weight has dtype torch.int32, expected float32, float16"):
        load_checkpoint(tmp_path)


def test_thin_steps_spreads_snapshots_on_a_log_scale() -> None:
    steps = [0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 2400]
    assert thin_steps(steps, 6) == [0, 5, 50, 200, 500, 2400]
    assert thin_steps(steps, 2) == [0, 2400]
    assert thin_steps(steps, 20) == steps
    assert thin_steps([5, 0, 5], 3) == [0, 5]
    for keep in range(2, len(steps) + 1):
        kept = thin_steps(steps, keep)
        assert len(kept) == keep and kept[0] == 0 and kept[-1] == 2400 and set(kept) <= set(steps)
    with pytest.raises(ValueError, match="at least 2"):
        thin_steps(steps, 1)


def test_prune_snapshots_removes_the_files(tmp_path: Path, tokenizer: CharTokenizer) -> None:
    model = tiny_model(tokenizer.vocab_size)
    for step in (0, 1, 2, 5, 10, 20, 37):
        save_snapshot(tmp_path, model, step, dtype="float16")
    removed = prune_snapshots(tmp_path, 4)
    assert list_snapshots(tmp_path) == thin_steps([0, 1, 2, 5, 10, 20, 37], 4)
    assert sorted(removed + list_snapshots(tmp_path)) == [0, 1, 2, 5, 10, 20, 37]
    assert len(list((tmp_path / "snapshots").iterdir())) == 4
    assert prune_snapshots(tmp_path / "nowhere", 4) == []


def test_interrupted_save_keeps_the_previous_checkpoint(
    tmp_path: Path, tokenizer: CharTokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = tiny_model(tokenizer.vocab_size, seed=1)
    save_checkpoint(tmp_path, old, tokenizer, tokenizer, {"step": 1})
    before = sorted(p.name for p in tmp_path.iterdir())

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(ckpt, "save_file", crash)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(tmp_path, tiny_model(tokenizer.vocab_size, seed=2), tokenizer, tokenizer, {"step": 2})
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no temporary junk left
    loaded = load_checkpoint(tmp_path)
    assert loaded.meta["step"] == 1
    assert torch.equal(logits_of(loaded.model), logits_of(old))


def test_damaged_files_raise_checkpoint_error(tmp_path: Path, tokenizer: CharTokenizer) -> None:
    model = tiny_model(tokenizer.vocab_size)
    save_checkpoint(tmp_path, model, tokenizer, tokenizer, {})
    weights = tmp_path / "model.safetensors"
    data = weights.read_bytes()

    weights.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated or damaged"):
        load_checkpoint(tmp_path)
    weights.write_bytes(b"")
    with pytest.raises(CheckpointError, match="not a valid safetensors"):
        load_checkpoint(tmp_path)
    weights.unlink()
    with pytest.raises(CheckpointError, match="missing model.safetensors"):
        load_checkpoint(tmp_path)

    weights.write_bytes(data)
    (tmp_path / "config.json").write_text('{"model": {"src_vocab_size": 3', encoding="utf-8")
    with pytest.raises(CheckpointError, match="not readable JSON"):
        load_checkpoint(tmp_path)
    (tmp_path / "config.json").write_text('{"model": {"d_model": 16}}', encoding="utf-8")
    with pytest.raises(CheckpointError, match="invalid model config"):
        load_checkpoint(tmp_path)
    (tmp_path / "config.json").unlink()
    with pytest.raises(CheckpointError, match="missing config.json"):
        load_checkpoint(tmp_path)
    with pytest.raises(CheckpointError, match="no checkpoint folder"):
        load_checkpoint(tmp_path / "absent")


def test_config_that_does_not_match_the_weights(tmp_path: Path, tokenizer: CharTokenizer) -> None:
    save_checkpoint(tmp_path, tiny_model(tokenizer.vocab_size, d_ff=32), tokenizer, tokenizer, {})
    document = json.loads((tmp_path / "config.json").read_text())
    document["model"]["d_ff"] = 48
    (tmp_path / "config.json").write_text(json.dumps(document))
    with pytest.raises(CheckpointError, match="d_ff is 48 in config.json but 32 in model.safetensors"):
        load_checkpoint(tmp_path)

    document["model"]["d_ff"] = 32
    document["model"]["tying"] = "all"  # one stored matrix expected, three found
    (tmp_path / "config.json").write_text(json.dumps(document))
    with pytest.raises(CheckpointError,
                       match="shared_embeddings is True in config.json but False in model.safetensors"):
        load_checkpoint(tmp_path)

    document["model"]["tying"] = "none"
    document["model"]["n_decoder_layers"] = 2
    (tmp_path / "config.json").write_text(json.dumps(document))
    with pytest.raises(CheckpointError, match="n_decoder_layers is 2 in config.json but 1 in model.safetensors"):
        load_checkpoint(tmp_path)


def test_tokenizer_that_does_not_match(tmp_path: Path, tokenizer: CharTokenizer) -> None:
    other = CharTokenizer.from_texts(["abc"])
    save_checkpoint(tmp_path, tiny_model(tokenizer.vocab_size), other, tokenizer, {})
    with pytest.raises(CheckpointError, match="src tokenizer has 7 tokens but the model expects"):
        load_checkpoint(tmp_path)
    (tmp_path / "src.chars.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="cannot load the tokenizers"):
        load_checkpoint(tmp_path)


def test_loading_never_unpickles(tmp_path: Path, tokenizer: CharTokenizer, monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    config = TransformerConfig(src_vocab_size=64, tgt_vocab_size=64, d_model=128, n_heads=4, n_layers=3,
                               d_ff=512, dropout=0.0)  # ~1.5M parameters, the size of a shipped model
    big = CharTokenizer([chr(ord("a") + i) for i in range(60)])
    model = Transformer(config)
    save_checkpoint(tmp_path, model, big, big, {})

    def forbidden(*args, **kwargs):
        raise AssertionError("torch.load must not be used")

    monkeypatch.setattr(torch, "load", forbidden)
    loaded = load_checkpoint(tmp_path)
    assert loaded.config == config
    saved, read = model.state_dict(), loaded.model.state_dict()
    assert saved.keys() == read.keys()
    assert all(torch.equal(saved[name], read[name]) for name in saved)


def test_optimizer_state_round_trip(tmp_path: Path, tokenizer: CharTokenizer) -> None:
    model = tiny_model(tokenizer.vocab_size, tie=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)
    model(torch.tensor([[5, 6, 3]]), torch.tensor([[2, 5, 6]])).logsumexp(-1).sum().backward()
    optimizer.step()
    save_checkpoint(tmp_path, model, tokenizer, tokenizer, {}, optimizer=optimizer)

    loaded = load_checkpoint(tmp_path)
    fresh = torch.optim.Adam(loaded.model.parameters(), lr=5.0, betas=(0.9, 0.98), eps=1e-9)
    assert load_optimizer_state(tmp_path, fresh)
    expected, got = optimizer.state_dict(), fresh.state_dict()
    assert got["param_groups"] == expected["param_groups"]
    for index, state in expected["state"].items():
        for key, value in state.items():
            assert torch.equal(got["state"][index][key], value)

    save_checkpoint(tmp_path, model, tokenizer, tokenizer, {})  # no optimizer: stale state removed
    assert not load_optimizer_state(tmp_path, fresh)


def test_switching_tokenizer_kind_removes_stale_files(tmp_path: Path, tokenizer: CharTokenizer) -> None:
    model = tiny_model(tokenizer.vocab_size)
    save_checkpoint(tmp_path, model, tokenizer, tokenizer, {})
    (tmp_path / "src.model").write_bytes(b"an earlier sentencepiece model")
    save_checkpoint(tmp_path, model, tokenizer, tokenizer, {})
    assert not (tmp_path / "src.model").exists()
    load_checkpoint(tmp_path)


def test_log_lines_and_a_cut_last_line(tmp_path: Path) -> None:
    assert read_log(tmp_path) == []
    append_log(tmp_path, {"step": 1, "loss": 2.5})
    append_log(tmp_path, {"step": 2, "loss": 2.0})
    with open(tmp_path / "train_log.jsonl", "a") as f:
        f.write('{"step": 3, "lo')  # killed mid-write
    assert read_log(tmp_path) == [{"step": 1, "loss": 2.5}, {"step": 2, "loss": 2.0}]
    (tmp_path / "train_log.jsonl").write_text('garbage\n{"step": 2}\n')
    with pytest.raises(CheckpointError, match="line 1 is not valid JSON"):
        read_log(tmp_path)
