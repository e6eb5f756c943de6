"""A Marian folder read by ``transformer.hub`` computes exactly what ``transformers``' MarianMTModel computes.

Tiny models are built in the test with random weights (tests/marian_helpers.py), saved as transformers saves
them, loaded by ``load_pretrained``, and compared in float64 on a padded batch, for each switch a Marian
config has: swish and relu, with and without the embedding scale, unequal depths, shared and separate
embeddings, safetensors and .bin weights.
"""

from __future__ import annotations

import json

import pytest
import torch
from marian_helpers import make_marian_folder

from transformer import load_pretrained
from transformer.checkpoints.checkpoint import CheckpointError
from transformer.hub.families import marian
from transformer.hub.mapping import to_theirs
from transformer.network.positional import sinusoidal_table

transformers = pytest.importorskip("transformers")

CASES = {
    "swish-scaled-shared-safetensors": {},
    "relu-unscaled": {"activation": "relu", "scale_embedding": False},
    "unequal-depths-bin": {"encoder_layers": 3, "decoder_layers": 1, "safetensors": False},
    "separate-embeddings": {"shared": False},
    "gelu-separate-bin": {"activation": "gelu", "shared": False, "safetensors": False},
}


def padded_batch(config, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Source and decoder input ids with right padding, and their attention masks (1 = real)."""
    generator = torch.Generator().manual_seed(seed)
    pad, start = config.pad_id, config.bos_id
    lengths_src, lengths_tgt = [7, 4, 1], [6, 2, 4]
    src = torch.full((3, 7), pad)
    tgt = torch.full((3, 6), pad)
    for row, (s, t) in enumerate(zip(lengths_src, lengths_tgt, strict=True)):
        src[row, : s - 1] = torch.randint(2, config.src_vocab_size - 1, (s - 1,), generator=generator)
        src[row, s - 1] = config.eos_id
        tgt[row, 0] = start
        tgt[row, 1:t] = torch.randint(2, config.tgt_vocab_size - 1, (t - 1,), generator=generator)
    src_mask = torch.tensor([[1] * s + [0] * (7 - s) for s in lengths_src])
    tgt_mask = torch.tensor([[1] * t + [0] * (6 - t) for t in lengths_tgt])
    return src, tgt, src_mask, tgt_mask


@pytest.mark.parametrize("case", list(CASES))
def test_float64_logits_equal_transformers(tmp_path, case):
    folder = make_marian_folder(tmp_path / case, **CASES[case])
    reference = transformers.MarianMTModel.from_pretrained(folder).eval().double()
    pipe = load_pretrained(folder)
    ours = pipe.model.double()
    src, tgt, src_mask, tgt_mask = padded_batch(pipe.config)
    with torch.no_grad():
        expected = reference(input_ids=src, attention_mask=src_mask, decoder_input_ids=tgt,
                             decoder_attention_mask=tgt_mask).logits
        got = ours(src, tgt)
    real = tgt_mask.bool()
    assert got.shape == expected.shape
    assert torch.allclose(got[real], expected[real], atol=1e-10, rtol=0), (got[real] - expected[real]).abs().max()


def test_the_marian_sinusoids_are_transformers_own(tmp_path):
    """The table transformers builds (sines, then cosines, rounded to float32) bit for bit, in every dtype."""
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    for length, width in ((64, 16), (512, 512), (10, 7)):
        theirs = MarianSinusoidalPositionalEmbedding(length, width).create_weight()
        assert torch.equal(sinusoidal_table(length, width, torch.float32, "marian"), theirs)
        assert torch.equal(sinusoidal_table(length, width, torch.float64, "marian"), theirs.double())
    interleaved = sinusoidal_table(64, 16, torch.float64)
    assert not torch.allclose(interleaved, sinusoidal_table(64, 16, torch.float64, "marian"))


def test_the_config_and_special_ids_come_from_the_folder(tmp_path):
    folder = make_marian_folder(tmp_path / "m", shared=False, scale_embedding=False, activation="relu")
    config = load_pretrained(folder).config
    document = json.loads((folder / "config.json").read_text())
    assert (config.pad_id, config.eos_id, config.bos_id) == (document["pad_token_id"], 0, document["pad_token_id"])
    assert config.unk_id == 1 and config.positional == "marian" and not config.final_norm
    assert not config.scale_embedding and config.activation == "relu"
    assert config.tying == "generator"


def test_weights_round_trip_through_both_namings(tmp_path):
    """to_theirs is the inverse of reading: our state dict under transformers' names loads into MarianMTModel."""
    folder = make_marian_folder(tmp_path / "m", shared=False)
    pipe = load_pretrained(folder)
    reference = transformers.MarianMTModel.from_pretrained(folder).eval()
    state = to_theirs(marian.FAMILY, {k: v for k, v in pipe.model.state_dict().items()}, pipe.config)
    theirs = reference.state_dict()
    for name, tensor in state.items():
        assert torch.equal(theirs[name], tensor), name


@pytest.mark.parametrize("model_type", ["pegasus", "fsmt", "longt5", "whisper", "phi3", "mixtral", "bert"])
def test_other_model_types_are_refused_by_name(tmp_path, model_type):
    """Decoder-only, encoder-only and other encoder-decoder types: refused, naming the type and the families read
    (t5, bart, mbart and m2m_100 go further: tests/test_hub_families.py)."""
    folder = make_marian_folder(tmp_path / "m")
    document = json.loads((folder / "config.json").read_text())
    document["model_type"] = model_type
    (folder / "config.json").write_text(json.dumps(document))
    with pytest.raises(CheckpointError, match=rf"model_type '{model_type}' is not supported.*marian, t5, bart, "
                                              "mbart, m2m_100"):
        load_pretrained(folder)


def test_a_missing_file_is_named(tmp_path):
    folder = make_marian_folder(tmp_path / "m")
    (folder / "target.spm").unlink()
    with pytest.raises(CheckpointError, match="target.spm"):
        load_pretrained(folder)
    folder = make_marian_folder(tmp_path / "w")
    (folder / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="model.safetensors or pytorch_model.bin"):
        load_pretrained(folder)


def test_a_shape_that_does_not_fit_the_config_is_named(tmp_path):
    folder = make_marian_folder(tmp_path / "m")
    document = json.loads((folder / "config.json").read_text())
    document["encoder_ffn_dim"] = document["decoder_ffn_dim"] = 48
    (folder / "config.json").write_text(json.dumps(document))
    with pytest.raises(CheckpointError, match=r"fc1.weight is \(32, 16\), the config needs \(48, 16\)"):
        load_pretrained(folder)


def test_a_huge_config_is_refused_before_anything_is_built(tmp_path):
    folder = make_marian_folder(tmp_path / "m")
    document = json.loads((folder / "config.json").read_text())
    document["d_model"] = 65_536
    (folder / "config.json").write_text(json.dumps(document))
    with pytest.raises(CheckpointError, match="parameters; this app loads at most"):
        load_pretrained(folder)
    document["d_model"], document["encoder_layers"] = 16, 10_000
    (folder / "config.json").write_text(json.dumps(document))
    with pytest.raises(CheckpointError, match="10,000 layers in a stack; at most 128"):
        load_pretrained(folder)
    document["encoder_layers"] = 100  # within the caps: the weights say what is wrong
    (folder / "config.json").write_text(json.dumps(document))
    with pytest.raises(CheckpointError, match="the weights lack .* tensors the config needs"):
        load_pretrained(folder)


def test_a_billion_layers_are_refused_by_arithmetic_in_a_blink(tmp_path, monkeypatch):
    """Issue 33: 10^9 layers once listed every layer's shapes before the refusal (10^6 took 49 s and 4 GB)."""
    import time

    import transformer.checkpoints.weights_header as header
    import transformer.hub.mapping as mapping

    folder = make_marian_folder(tmp_path / "m")
    document = json.loads((folder / "config.json").read_text())
    document["encoder_layers"] = document["decoder_layers"] = 10**9
    (folder / "config.json").write_text(json.dumps(document))

    def no_listing(*args, **kwargs):
        raise AssertionError("the caps were checked by listing every layer")

    for module, name in ((header, "expected_shapes"), (mapping, "our_shapes")):
        monkeypatch.setattr(module, name, no_listing)
    monkeypatch.setattr(header, "MAX_LAYERS", 10**10)  # so the parameter count, not the layer cap, refuses it
    start = time.perf_counter()
    with pytest.raises(CheckpointError, match="parameters; this app loads at most"):
        load_pretrained(folder)
    assert time.perf_counter() - start < 1.0


@pytest.mark.parametrize(("name", "limit"), [("config.json", "1.0 MB"), ("vocab.json", "16.0 MB"),
                                             ("source.spm", "16.0 MB"), ("generation_config.json", "1.0 MB"),
                                             ("tokenizer_config.json", "1.0 MB")])
def test_an_oversized_file_is_refused_by_its_size_before_it_is_parsed(tmp_path, monkeypatch, name, limit):
    """Issue 33: a 280 MB config.json, a 10^7-entry vocab.json, a 3 M-piece SentencePiece model were parsed whole."""
    import sentencepiece

    import transformer.hub.tokenizer as hub_tokenizer

    folder = make_marian_folder(tmp_path / "m")
    path = folder / name
    data = path.read_bytes() if path.exists() else b"{}"
    with open(path, "wb") as file:  # a sparse file: larger than the cap without writing it
        file.write(data)
        file.truncate(17 * 2**20)
    count = hub_tokenizer.count_pieces
    monkeypatch.setattr(hub_tokenizer, "count_pieces",
                        lambda data: pytest.fail("counted an oversized file") if len(data) > 2**20 else count(data))
    monkeypatch.setattr(json, "loads", _no_parsing(json.loads, name))  # every reader parses through json.loads
    monkeypatch.setattr(sentencepiece, "SentencePieceProcessor", _no_parsing(None, name)) if name.endswith(".spm") \
        else None
    with pytest.raises(CheckpointError, match=rf"{name} is 17.0 MB; the limit for this file is {limit}"):
        load_pretrained(folder)


def _no_parsing(loads, name):
    """json.loads that refuses the oversized file's text (recognised by its length), else parses."""
    def guarded(text, *args, **kwargs):
        if len(text) > 2**20:
            raise AssertionError(f"{name} was parsed before its size was checked")
        return loads(text, *args, **kwargs)
    return guarded


@pytest.mark.parametrize("shared", [True, False])
def test_a_vocabulary_of_the_wrong_size_is_refused_before_it_is_parsed(tmp_path, monkeypatch, shared):
    """Issue 33: a vocabulary of 10^7 entries was parsed twice, then found not to fit the config."""
    import transformer.hub.tokenizer as hub_tokenizer

    folder = make_marian_folder(tmp_path / "m", shared=shared)
    name = "vocab.json" if shared else "target_vocab.json"
    vocab = json.loads((folder / name).read_text())
    vocab.update({f"piece{i}": len(vocab) + i for i in range(5000)})
    (folder / name).write_text(json.dumps(vocab))
    parse = hub_tokenizer.json.loads
    monkeypatch.setattr(hub_tokenizer.json, "loads",
                        lambda text, *a, **k: pytest.fail("parsed") if len(text) > 50_000 else parse(text, *a, **k))
    with pytest.raises(CheckpointError, match=rf"{name}: holds {len(vocab):,} pieces but config.json says"):
        load_pretrained(folder)


def test_a_shared_vocabulary_is_parsed_once(tmp_path, monkeypatch):
    import transformer.hub.tokenizer as hub_tokenizer

    folder = make_marian_folder(tmp_path / "m")
    calls = []
    parse = hub_tokenizer.check_vocab
    monkeypatch.setattr(hub_tokenizer, "check_vocab", lambda vocab: calls.append(len(vocab)) or parse(vocab))
    pipe = load_pretrained(folder)
    assert len(calls) == 3  # _read_vocab once, then each side's MarianSide copies the parsed dict
    assert pipe.src_tokenizer.vocab_size == pipe.tgt_tokenizer.vocab_size == calls[0]


def test_a_pickle_with_code_is_never_run(tmp_path):
    """pytorch_model.bin goes through torch.load(weights_only=True): an object that would run code is refused."""
    folder = make_marian_folder(tmp_path / "m", safetensors=False)

    class Boom:
        def __reduce__(self):
            return (exec, ("open('" + str(tmp_path / "pwned") + "', 'w').write('x')",))

    torch.save({"model.shared.weight": Boom()}, folder / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match="pytorch_model.bin"):
        load_pretrained(folder)
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("junk", [b"x", b"\x80\x02garbage" * 10, bytes(range(256)) * 4])
def test_a_damaged_bin_is_a_clear_error(tmp_path, junk):
    folder = make_marian_folder(tmp_path / "m", safetensors=False)
    (folder / "pytorch_model.bin").write_bytes(junk)
    with pytest.raises(CheckpointError, match="pytorch_model.bin: not a readable weights file"):
        load_pretrained(folder)


def test_torch_reference_gap_names_what_a_marian_config_has():
    from transformer.network.config import TransformerConfig
    from transformer.network.interop import to_torch, torch_reference_gap
    from transformer.network.model import Transformer

    marian = TransformerConfig(src_vocab_size=10, tgt_vocab_size=10, d_model=8, n_heads=2, n_layers=1, d_ff=16,
                               activation="silu", positional="marian", final_norm=False, pad_id=9, eos_id=0,
                               bos_id=9, tying="all")
    assert torch_reference_gap(marian) == ("torch.nn.Transformer cannot express the silu activation, the marian "
                                           "positional layout, stacks without a final LayerNorm")
    assert torch_reference_gap(TransformerConfig(src_vocab_size=10, tgt_vocab_size=10)) is None
    with pytest.raises(ValueError, match="cannot express"):
        to_torch(Transformer(marian))
