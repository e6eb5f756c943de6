"""A checkpoint's sizes are checked from its safetensors header before any model is built."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from transformer.checkpoints import weights_header
from transformer.checkpoints.checkpoint import CheckpointError, load_checkpoint, save_checkpoint, weights_of
from transformer.network import model as model_module
from transformer.network.config import TransformerConfig
from transformer.network.model import Transformer
from transformer.text.tokenizers import CharTokenizer

TEXTS = ["abc", "cab", "bca"]

# the switches of the other families, each a config's options (both tests below take them all): T5 v1.0 / v1.1,
# BART / mBART, M2M100
FAMILY_SWITCHES = [
    dict(n_layers=2, tying="all", positional="relative", norm="rms", bias=False, scale_attention=False,
         d_head=3, rescale_output=True),
    dict(n_layers=1, tying="embeddings", positional="relative", norm="rms", gated_ff=True,
         activation="gelu_new", bias=False),
    dict(n_layers=2, tying="all", positional="learned", position_offset=2, embedding_norm=True),
    dict(n_layers=1, tying="all", positional="fairseq", norm_first=True),
    # decoder-only: GPT-2 (learned positions, tied), Llama / Mistral (GQA, SwiGLU), Qwen2 (q/k/v biases), Qwen3 and
    # Gemma (q/k norms, sandwich norms, (1 + w))
    dict(n_layers=2, decoder_only=True, positional="learned", norm_first=True, tying="generator"),
    dict(n_layers=2, decoder_only=True, positional="rotary", n_kv_heads=1, norm="rms_float32", norm_first=True,
         gated_ff=True, bias=False, d_head=2),
    dict(n_layers=1, decoder_only=True, positional="rotary", n_kv_heads=1, norm="rms_float32", norm_first=True,
         bias=False, qkv_bias=True, tying="generator"),
    dict(n_layers=2, decoder_only=True, positional="rotary", norm="rms_unit_offset", norm_first=True, bias=False,
         qk_norm=True, sandwich_norm=True, sliding_window=2, layer_types=("sliding", "full")),
]


@pytest.mark.parametrize("options", [
    dict(n_layers=1),
    dict(n_encoder_layers=3, n_decoder_layers=2, d_ff=24),
    dict(n_layers=2, tying="all", norm_first=True, activation="gelu"),
    *FAMILY_SWITCHES,
])
def test_expected_shapes_are_exactly_the_stored_tensors_of_the_model(options: dict) -> None:
    vocab = 13
    shared = options.get("tying") in ("all", "embeddings") or options.get("decoder_only")
    config = TransformerConfig(src_vocab_size=vocab, tgt_vocab_size=vocab if shared else 11,
                               d_model=8, n_heads=2, d_ff=options.pop("d_ff", 16), **options)
    stored = {name: tuple(t.shape) for name, t in weights_of(Transformer(config)).items()}
    assert weights_header.expected_shapes(config) == stored


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    tokenizer = CharTokenizer.from_texts(TEXTS)
    torch.manual_seed(0)
    config = TransformerConfig(src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size, d_model=16,
                               n_heads=2, n_layers=2, d_ff=32, dropout=0.0, max_len=64)
    save_checkpoint(tmp_path, Transformer(config).eval(), tokenizer, tokenizer, {})
    return tmp_path


def edit_config(folder: Path, **changes) -> None:
    document = json.loads((folder / "config.json").read_text())
    document["model"].update(changes)
    (folder / "config.json").write_text(json.dumps(document))


@pytest.mark.parametrize(("changes", "message"), [
    (dict(src_vocab_size=10**9, tgt_vocab_size=10**9, d_model=8192, n_heads=8), "src_vocab_size is 1000000000"),
    (dict(d_model=8192, n_heads=8), "d_model is 8192 in config.json but 16"),
    (dict(d_model=65536, n_heads=8), "d_model is 65536"),
    (dict(n_layers=1000, n_encoder_layers=1000, n_decoder_layers=1000), "n_encoder_layers is 1000"),
    (dict(n_decoder_layers=10**9), "n_decoder_layers is 1000000000"),
    (dict(d_ff=10**6), "d_ff is 1000000"),
])
def test_hostile_configs_are_refused_by_field_before_any_model_is_built(saved, monkeypatch, changes, message):
    edit_config(saved, **changes)

    def no_building(*args, **kwargs):
        raise AssertionError("a model was built from an unchecked config")

    monkeypatch.setattr(model_module.Transformer, "__init__", no_building)
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(saved)


def test_caps_on_parameters_and_on_the_positional_table(saved, monkeypatch):
    monkeypatch.setattr(weights_header, "MAX_PARAMETERS", 1000)
    with pytest.raises(CheckpointError, match="parameters; this app loads at most 1,000"):
        load_checkpoint(saved)
    monkeypatch.undo()
    edit_config(saved, max_len=10**8)  # not stored in the weights: the table would be 10^8 x 16 values
    with pytest.raises(CheckpointError, match="positional table"):
        load_checkpoint(saved)
    edit_config(saved, max_len=64)
    assert load_checkpoint(saved).config.max_len == 64


def test_a_damaged_header_is_refused_without_reading_the_weights(saved):
    weights = saved / "model.safetensors"
    data = weights.read_bytes()
    length = int.from_bytes(data[:8], "little")
    cases = {
        "huge header length": (2**62).to_bytes(8, "little") + data[8:],
        "header not JSON": data[:8] + b"{" * length + data[8 + length:],
        "shorter than 8 bytes": b"\x01\x02",
    }
    header = json.loads(data[8:8 + length])
    name = next(k for k in header if k != "__metadata__")
    header[name]["shape"] = [10**6, 10**6]  # a shape that does not fit its byte range
    text = json.dumps(header).encode()
    cases["shape beyond its bytes"] = len(text).to_bytes(8, "little") + text + data[8 + length:]
    for case, payload in cases.items():
        weights.write_bytes(payload)
        with pytest.raises(CheckpointError, match="safetensors|byte range"):
            load_checkpoint(saved)
        assert case  # every case refused


def test_a_snapshot_is_checked_the_same_way(saved):
    from transformer.checkpoints.checkpoint import SNAPSHOT_DIR, save_snapshot

    model = load_checkpoint(saved).model
    save_snapshot(saved, model, 5)
    assert load_checkpoint(saved, step=5).step == 5
    edit_config(saved, d_ff=64)
    with pytest.raises(CheckpointError, match="d_ff is 64 in config.json but 32 in step_0000005.safetensors"):
        load_checkpoint(saved, step=5)
    assert (saved / SNAPSHOT_DIR).is_dir()


@pytest.mark.parametrize("options", [
    dict(n_layers=1),
    dict(n_encoder_layers=3, n_decoder_layers=2, d_ff=24, final_norm=False),
    dict(n_layers=2, tying="all", norm_first=True),
    dict(n_layers=1, tying="none"),
    *FAMILY_SWITCHES,
])
def test_parameter_count_is_the_sum_of_the_expected_shapes(options: dict) -> None:
    vocab = 13
    shared = options.get("tying") in ("all", "embeddings") or options.get("decoder_only")
    config = TransformerConfig(src_vocab_size=vocab, tgt_vocab_size=vocab if shared else 11,
                               d_model=8, n_heads=2, d_ff=options.pop("d_ff", 16), **options)
    total = sum(torch.Size(shape).numel() for shape in weights_header.expected_shapes(config).values())
    assert weights_header.parameter_count(config) == total == sum(t.numel() for t in weights_of(Transformer(config))
                                                                  .values())


def test_caps_are_checked_by_arithmetic_before_any_layer_is_listed(saved, monkeypatch):
    """Issue 33: the caps come before ``expected_shapes``, which lists every layer."""
    import time

    monkeypatch.setattr(weights_header, "expected_shapes", lambda config: pytest.fail("listed every layer"))
    config = TransformerConfig(src_vocab_size=7, tgt_vocab_size=7, d_model=16, n_heads=2, n_layers=10**9, d_ff=32)
    start = time.perf_counter()
    assert "1,000,000,000 layers in a stack; at most 128" in weights_header.caps_problem(config)
    monkeypatch.setattr(weights_header, "MAX_LAYERS", 10**10)
    assert "parameters; this app loads at most" in weights_header.caps_problem(config)
    assert time.perf_counter() - start < 0.1
    monkeypatch.undo()
    monkeypatch.setattr(weights_header, "MAX_LAYERS", 1)  # the saved model has 2 layers a stack
    with pytest.raises(CheckpointError, match="2 layers in a stack; at most 1"):
        load_checkpoint(saved)


@pytest.mark.parametrize("name", ["config.json", "src.chars.json"])
def test_an_oversized_file_of_our_format_is_refused_by_its_size(saved, monkeypatch, name):
    """Issue 33: a 280 MB config.json was parsed whole (+630 MB) before anything looked at it."""
    path = saved / name
    data = path.read_bytes()
    with open(path, "wb") as file:  # sparse: over the cap without writing it
        file.write(data)
        file.truncate(17 * 2**20)
    loads = json.loads
    monkeypatch.setattr(json, "loads", lambda text, *a, **k: pytest.fail("parsed an oversized file")
                        if len(text) > 2**20 else loads(text, *a, **k))
    with pytest.raises(CheckpointError, match=rf"{name} is 17.0 MB; the limit for this file is"):
        load_checkpoint(saved)


def test_a_vocabulary_beyond_every_real_models_is_refused_by_arithmetic() -> None:
    """Issue 43: the tokenizer's caps grow with the vocabulary a config declares, so a model of d_model 1 declaring
    4 M ids (16 MB of weights) let a tokenizer.json of 3.9 M pieces through. Gemma-3's 262,144 ids still open."""
    tiny = dict(d_model=2, n_heads=1, n_layers=1, d_ff=2)
    huge = TransformerConfig(src_vocab_size=7, tgt_vocab_size=4_000_000, **tiny)
    assert weights_header.caps_problem(huge) == ("the config asks for a vocabulary of 4,000,000 ids; at most "
                                                 f"{weights_header.MAX_VOCAB:,} are read")
    gemma = TransformerConfig(src_vocab_size=262_144, tgt_vocab_size=262_144, **tiny)
    assert weights_header.caps_problem(gemma) is None
