"""Model folders made hostile (issue 43 items 2, 5, 7, 8, 9, 10): each is refused with a ``CheckpointError`` that
names the file and the field, never a server path nor the file's bytes, within 1 s and +100 MB where the failure
used to be an allocation (measured in a child process: its peak resident memory, VmHWM).

Each test builds a tiny folder (our own format, or a Hugging Face family's as ``save_pretrained`` writes it) and
edits one file of it. ``transformers`` is the test-only writer of the family folders.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from transformer.checkpoints.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from transformer.checkpoints.file_caps import MAX_CONFIG_CONTAINERS
from transformer.checkpoints.weights_header import HeaderError, read_header
from transformer.hub import mapping
from transformer.hub.families import bart as hub_bart
from transformer.hub.generation import MAX_BAD_WORDS
from transformer.network.config import TransformerConfig
from transformer.network.model import Transformer
from transformer.pipeline import load_pretrained
from transformer.text.tokenizers import CharTokenizer

pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from family_app_folders import build_family_folder  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEEP = "[" * 100_000 + "]" * 100_000  # Python's parser recurses once per level: RecursionError at ~1,000


@pytest.fixture(scope="module")
def built(family_tokenizers, tmp_path_factory) -> dict[str, Path]:
    """One tiny folder per family (T5 v1.1, BART), built once; each test edits its own copy."""
    root = tmp_path_factory.mktemp("hostile")
    return {layout: build_family_folder(root, layout, family_tokenizers[layout]) for layout in ("t5", "bart")}


def copy_of(built: dict[str, Path], layout: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(built[layout], tmp_path / layout))


def ours(folder: Path) -> Path:
    """A tiny checkpoint of our own format."""
    tokenizer = CharTokenizer.from_texts(["abc", "cab"])
    config = TransformerConfig(src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size, d_model=16,
                               n_heads=2, n_layers=1, d_ff=32, dropout=0.0, max_len=32)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = Transformer(config).eval()
    return save_checkpoint(folder, model, tokenizer, tokenizer, {})


def edit_json(path: Path, **changes) -> None:
    document = json.loads(path.read_text(encoding="utf-8"))
    document.update(changes)
    path.write_text(json.dumps(document), encoding="utf-8")  # json.dumps writes inf as Infinity, nan as NaN


def header_of(path: Path) -> tuple[dict, bytes]:
    data = path.read_bytes()
    length = int.from_bytes(data[:8], "little")
    return json.loads(data[8:8 + length]), data[8 + length:]


def write_safetensors(path: Path, header: dict, data: bytes) -> None:
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def overlapping(shapes: dict[str, tuple[int, ...]]) -> tuple[dict, bytes]:
    """A header in which every tensor of ``shapes`` (float32) points at the same bytes, from 0: the file holds
    only its largest tensor's bytes, the header declares them all."""
    header = {name: {"dtype": "F32", "shape": list(shape), "data_offsets": [0, 4 * torch.Size(shape).numel()]}
              for name, shape in shapes.items()}
    return header, bytes(max(entry["data_offsets"][1] for entry in header.values()))


LOAD_CHILD = """
import json, sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
def kb():
    return next(int(l.split()[1]) for l in Path('/proc/self/status').read_text().splitlines() if l.startswith('VmHWM'))
import tokenizers, torch, transformer.hub.load, transformer.hub.fast_tokenizer  # what a load imports on its way
from transformer.checkpoints.checkpoint import CheckpointError
from transformer.pipeline import load_pretrained
from transformer.network.config import TransformerConfig
from transformer.network.model import Transformer
with torch.device('meta'):  # the first model built on the meta device imports torch._dynamo (70 MB), once
    Transformer(TransformerConfig(src_vocab_size=8, tgt_vocab_size=8, d_model=8, n_heads=2, n_layers=1, d_ff=8))
base, start = kb(), time.perf_counter()
try:
    load_pretrained({folder!r})
    message = None
except CheckpointError as error:
    message = str(error)
print(json.dumps(dict(seconds=time.perf_counter() - start, megabytes=(kb() - base) / 1024, message=message)))
"""


def refused_in_a_child(folder: Path) -> str:
    """``load_pretrained(folder)`` in a child process: its CheckpointError's message, after checking that it came
    within 1 s and +100 MB of peak memory."""
    child = LOAD_CHILD.format(root=str(ROOT), folder=str(folder))
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=300, check=True)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["message"] is not None, f"loaded: {found}"
    assert found["seconds"] < 1.0 and found["megabytes"] < 100, found
    return found["message"]


def no_leak(message: str, folder: Path) -> None:
    """The message names no server path (the app replaces the folder's own path by its upload name)."""
    assert str(folder.parent) not in message.replace(str(folder), "<folder>"), message


# --- item 2: byte ranges that overlap ---------------------------------------------------------------------------


def test_a_bart_header_whose_tensors_share_their_bytes_is_refused_without_reading_them(built, tmp_path):
    """An 8.5 MB file declared a 589 M-parameter BART (every tensor at byte 0): 7.9 s and 3.3 GB to load. Here a
    4 MB file declares 40 M parameters (160 MB): refused from the header."""
    folder = copy_of(built, "bart", tmp_path)
    edit_json(folder / "config.json", d_model=512, encoder_ffn_dim=2048, decoder_ffn_dim=2048, encoder_layers=6,
              decoder_layers=6, encoder_attention_heads=8, decoder_attention_heads=8)
    config = hub_bart.config_of(json.loads((folder / "config.json").read_text()))
    header, data = overlapping(mapping.expected_shapes(hub_bart.FAMILY, config))
    write_safetensors(folder / "model.safetensors", header, data)
    assert (folder / "model.safetensors").stat().st_size < 5 * 2**20
    with pytest.raises(Exception, match="(?i)offset|incomplete|invalid"):  # the reference library refuses it too
        from safetensors import safe_open

        with safe_open(folder / "model.safetensors", "pt") as file:
            file.keys()
    message = refused_in_a_child(folder)
    assert "model.safetensors: the byte range of" in message and "overlaps the tensor before it" in message
    no_leak(message, folder)


def test_a_sharded_t5_is_refused_before_any_shard_is_read(built, tmp_path, monkeypatch):
    """Two shards, the second with its tensors all at byte 0: refused from the headers, before any shard is read."""
    from safetensors.torch import load_file

    from transformer.checkpoints import weights_files

    folder = copy_of(built, "t5", tmp_path)
    tensors = load_file(folder / "model.safetensors")
    names = sorted(tensors)
    halves = (names[: len(names) // 2], names[len(names) // 2:])
    shards = [f"model-0000{i}-of-00002.safetensors" for i in (1, 2)]
    for shard, part in zip(shards, halves, strict=True):
        save_file({name: tensors[name] for name in part}, folder / shard)
    (folder / "model.safetensors").unlink()
    index = {"metadata": {}, "weight_map": {name: shard for shard, part in zip(shards, halves, strict=True)
                                            for name in part}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    assert load_pretrained(folder).model is not None  # the shards as written load
    header, data = header_of(folder / shards[1])
    for name, entry in header.items():
        if name != "__metadata__":
            entry["data_offsets"] = [0, entry["data_offsets"][1] - entry["data_offsets"][0]]
    write_safetensors(folder / shards[1], header, data)
    monkeypatch.setattr(weights_files, "_read_safetensors", lambda *a: pytest.fail("read a shard"))
    with pytest.raises(CheckpointError, match=f"{shards[1]}: the byte range of .* overlaps the tensor before it"):
        load_pretrained(folder)


def test_a_bin_whose_tensors_view_one_storage_is_refused(built, tmp_path):
    """A pickle can make every tensor a view of the same bytes: the copies may not exceed the file's size (tied
    names, views of one storage with the same shape, are copied once, as an old Marian .bin stores them)."""
    folder = copy_of(built, "bart", tmp_path)
    config = hub_bart.config_of(json.loads((folder / "config.json").read_text()))
    shapes = mapping.expected_shapes(hub_bart.FAMILY, config)
    storage = torch.zeros(max(torch.Size(shape).numel() for shape in shapes.values()))
    (folder / "model.safetensors").unlink()
    torch.save({name: storage[: torch.Size(shape).numel()].view(shape) for name, shape in shapes.items()},
               folder / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match="pytorch_model.bin: its tensors view more bytes than the file holds"):
        load_pretrained(folder)


@pytest.mark.parametrize("case", ["overlap", "gap", "short of the end"])
def test_our_header_must_tile_the_data_as_the_safetensors_library_requires(tmp_path, case):
    folder = ours(tmp_path / "ours")
    path = folder / "model.safetensors"
    header, data = header_of(path)
    entries = sorted((k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"][0])
    if case == "overlap":  # the last tensor moved onto the bytes of the one before it
        start, end = header[entries[-1]]["data_offsets"]
        header[entries[-1]]["data_offsets"] = [start - 4, end - 4]
        data = data[:-4]
    elif case == "gap":
        for name in entries[1:]:
            header[name]["data_offsets"] = [n + 4 for n in header[name]["data_offsets"]]
        data = data + bytes(4)
    else:
        data = data + bytes(8)
    write_safetensors(path, header, data)
    message = {"overlap": "overlaps the tensor before it", "gap": "leaves a gap before it",
               "short of the end": "end at .* but the file holds"}[case]
    with pytest.raises(HeaderError, match=message):
        read_header(path)
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(folder)


# --- item 5: bad_words_ids ----------------------------------------------------------------------------------------


def test_a_megabyte_of_bad_words_is_refused_before_it_is_parsed(built, tmp_path):
    """160 k sequences in generation_config.json made every decoding run to its 30 s budget; parsing them alone
    took 1.5 s beside torch (the garbage collector's passes over 160 k new lists): the arrays are counted first."""
    folder = copy_of(built, "bart", tmp_path)
    words = [[4 + i % 50] for i in range(160_000)]  # "[NN], ": 6 bytes a sequence, under the file's 1 MB cap
    edit_json(folder / "generation_config.json", bad_words_ids=words)
    assert (folder / "generation_config.json").stat().st_size < 2**20
    message = refused_in_a_child(folder)
    assert f"generation_config.json holds 160,002 JSON arrays and objects; at most {MAX_CONFIG_CONTAINERS:,}" \
        in message


@pytest.mark.parametrize(("words", "message"), [
    ([[5]] * (MAX_BAD_WORDS + 1), f"{MAX_BAD_WORDS + 1:,} sequences; at most {MAX_BAD_WORDS:,}"),
    ([list(range(4, 40))], "a sequence of 36 ids; at most 32"),
    ([[5, 6, 7, 8] * 8] * 300, "9,600 ids; at most 8,192"),
])
def test_bad_words_over_their_caps_are_refused(built, tmp_path, words, message):
    folder = copy_of(built, "bart", tmp_path)
    edit_json(folder / "generation_config.json", bad_words_ids=words)
    with pytest.raises(CheckpointError, match=f"generation_config.json: bad_words_ids holds {message}"):
        load_pretrained(folder)


# --- item 7: T5's relative buckets, and no traceback in the browser ------------------------------------------------


@pytest.mark.parametrize(("buckets", "distance", "field"), [
    (2, 128, "relative_attention_num_buckets must be an integer >= 4, got 2"),
    (3, 128, "relative_attention_num_buckets must be an integer >= 4, got 3"),
    (8, 4, r"relative_attention_max_distance \(4\) must be more than relative_attention_num_buckets // 2 \(4\)"),
    (32, 16, r"relative_attention_max_distance \(16\) must be more than"),
])
def test_t5_buckets_that_divide_by_zero_are_refused_at_load(built, tmp_path, buckets, distance, field):
    """They loaded, and translate raised ZeroDivisionError (2, 3 buckets) or IndexError (max distance = the exact
    buckets)."""
    folder = copy_of(built, "t5", tmp_path)
    edit_json(folder / "config.json", relative_attention_num_buckets=buckets, relative_attention_max_distance=distance)
    with pytest.raises(CheckpointError, match=f"config.json: {field}"):
        load_pretrained(folder)
    with pytest.raises(ValueError, match="relative_"):  # our own config.json is checked by the network's config
        TransformerConfig(src_vocab_size=8, tgt_vocab_size=8, d_model=8, n_heads=2, n_layers=1, d_ff=8,
                          positional="relative", relative_buckets=buckets, relative_max_distance=distance)


def test_the_server_shows_no_traceback_and_the_apps_own_errors_still_show(monkeypatch):
    """``client.showErrorDetails = "none"`` (.streamlit/config.toml): Streamlit 1.67 takes "full", "stacktrace",
    "type" or "none"; ``false`` is the deprecated spelling of "stacktrace", which still shows the traceback. An
    uncaught error shows Streamlit's generic sentence only (the log keeps the trace); ``st.error`` is ours."""
    import tomllib

    from streamlit import config
    from streamlit.testing.v1 import AppTest

    setting = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["client"]["showErrorDetails"]
    assert setting == config.ShowErrorDetailsConfigOptions.NONE
    monkeypatch.setattr(config, "get_option", lambda key, get=config.get_option:
                        setting if key == "client.showErrorDetails" else get(key))
    script = "import streamlit as st\nst.error('our message')\nraise ZeroDivisionError('/srv/models/secret')\n"
    at = AppTest.from_string(script).run()
    assert [e.value for e in at.error] == ["our message"]
    shown = at.exception[0]
    assert "secret" not in shown.message and not shown.stack_trace and not shown.proto.type


# --- item 8: malformed values escape as other errors ---------------------------------------------------------------


@pytest.mark.parametrize(("layout", "file"), [
    ("t5", "config.json"), ("bart", "generation_config.json"), ("bart", "model.safetensors.index.json"),
    ("bart", "model.safetensors"), ("bart", "tokenizer_config.json"), ("ours", "config.json"),
    ("ours", "model.safetensors"), ("ours", "src.chars.json"),
])
def test_json_nested_a_hundred_thousand_deep_is_a_checkpoint_error_naming_the_file(built, tmp_path, layout, file):
    folder = ours(tmp_path / "ours") if layout == "ours" else copy_of(built, layout, tmp_path)
    if file == "model.safetensors.index.json":
        (folder / "model.safetensors").unlink()
        (folder / file).write_text(DEEP)
    elif file == "model.safetensors":
        _, data = header_of(folder / file)
        (folder / file).write_bytes(struct.pack("<Q", len(DEEP)) + DEEP.encode() + data)
    else:
        (folder / file).write_text(DEEP)
    # refused by the parser's depth, or before parsing by the count of arrays (config files, headers)
    with pytest.raises(CheckpointError, match=f"{file}.*(nests deeper than the parser goes|holds 100,000 JSON arrays)"):
        load_pretrained(folder)


def test_a_deep_json_file_of_another_reader_is_still_a_checkpoint_error(tmp_path):
    """A Marian tokenizer_config.json is read by hub/tokenizer.py's own reader: the loader turns its RecursionError
    into a CheckpointError (naming the folder only)."""
    from marian_helpers import make_marian_folder

    folder = make_marian_folder(tmp_path / "marian")
    (folder / "tokenizer_config.json").write_text(DEEP)
    with pytest.raises(CheckpointError, match="nests deeper than the parser goes"):
        load_pretrained(folder)


@pytest.mark.parametrize(("layout", "change", "field"), [
    ("t5", {"n_positions": float("inf")}, "n_positions must be an integer >= 1, got inf"),
    ("t5", {"n_positions": [512]}, r"n_positions must be an integer >= 1, got \[512\]"),
    ("t5", {"dropout_rate": {}}, r"dropout_rate must be a number in \[0, 1\), got \{\}"),
    ("t5", {"layer_norm_epsilon": float("inf")}, r"layer_norm_epsilon must be a number in \(0, 1\], got inf"),
    ("t5", {"layer_norm_epsilon": float("nan")}, r"layer_norm_epsilon must be a number in \(0, 1\], got nan"),
    ("t5", {"d_model": 1e999}, "d_model must be an integer >= 1, got inf"),
    ("t5", {"feed_forward_proj": ["relu"] * 10**4}, r"feed_forward_proj must be a string, got \['relu', .*\.\.\.$"),
    ("bart", {"dropout": {}}, r"dropout must be a number in \[0, 1\), got \{\}"),
    ("bart", {"max_position_embeddings": float("inf")}, "max_position_embeddings must be an integer >= 1, got inf"),
    ("bart", {"scale_embedding": "yes"}, "scale_embedding must be true or false, got 'yes'"),
    ("bart", {"encoder_layers": 2.0}, "encoder_layers must be an integer >= 1, got 2.0"),
])
def test_a_malformed_value_is_a_checkpoint_error_naming_the_file_and_the_field(built, tmp_path, layout, change,
                                                                               field):
    folder = copy_of(built, layout, tmp_path)
    edit_json(folder / "config.json", **change)
    with pytest.raises(CheckpointError, match=f"config.json: {field}"):
        load_pretrained(folder)


def test_a_malformed_marian_value_is_named(tmp_path):
    from marian_helpers import make_marian_folder

    folder = make_marian_folder(tmp_path / "marian")
    for change, field in (({"dropout": {}}, r"dropout must be a number in \[0, 1\), got \{\}"),
                          ({"d_model": float("inf")}, "d_model must be an integer >= 1, got inf"),
                          ({"share_encoder_decoder_embeddings": "no"},
                           "share_encoder_decoder_embeddings must be true or false, got 'no'")):
        original = (folder / "config.json").read_text()
        edit_json(folder / "config.json", **change)
        with pytest.raises(CheckpointError, match=f"config.json: {field}"):
            load_pretrained(folder)
        (folder / "config.json").write_text(original)


def test_our_config_with_an_infinite_epsilon_is_refused(tmp_path):
    folder = ours(tmp_path / "ours")
    document = json.loads((folder / "config.json").read_text())
    document["model"]["layer_norm_eps"] = float("inf")
    (folder / "config.json").write_text(json.dumps(document))
    with pytest.raises(CheckpointError, match="config.json: invalid model config: layer_norm_eps must be a positive "
                                              "finite number, got inf"):
        load_checkpoint(folder)


# --- item 9: links out of the folder -------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["model.safetensors", "a shard"])
def test_a_weight_file_that_links_out_of_the_folder_is_not_opened(built, tmp_path, monkeypatch, which):
    """A shard linked to /etc/passwd: the message gave its first 8 bytes as the header's length (root:x:0)."""
    import builtins

    folder = copy_of(built, "bart", tmp_path)
    secret = tmp_path / "outside" / "passwd"
    secret.parent.mkdir()
    secret.write_bytes(b"root:x:0:0:root:/root:/bin/bash\n" * 100)
    (folder / "model.safetensors").unlink()
    if which == "model.safetensors":
        (folder / "model.safetensors").symlink_to(secret)
    else:
        (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "model-1.safetensors"}}))
        (folder / "model-1.safetensors").symlink_to(secret)
    real_open = builtins.open

    def guarded(file, *args, **kwargs):  # noqa: ANN001, ANN202
        if isinstance(file, str | Path) and Path(file).resolve() == secret:
            pytest.fail("opened the link's target")
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded)
    with pytest.raises(CheckpointError, match="is a link to a file outside the model folder: it is not read") as error:
        load_pretrained(folder)
    message = str(error.value)
    assert str(secret) not in message and "outside/" not in message
    assert str(int.from_bytes(b"root:x:0", "little")) not in message and f"{int.from_bytes(b'root:x:0', 'little'):,}" \
        not in message


def test_a_header_never_quotes_the_files_first_bytes(tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"root:x:0:0:root:/root:/bin/bash\n" * 100)
    with pytest.raises(HeaderError) as error:
        read_header(path)
    length = int.from_bytes(b"root:x:0", "little")
    assert str(length) not in str(error.value) and f"{length:,}" not in str(error.value)
    assert "past the end of the file" in str(error.value)


def test_the_hugging_face_cache_layout_of_links_still_opens(built, tmp_path):
    """``snapshots/<revision>/`` files link to ``../../blobs/``: the one layout of links out of a folder allowed."""
    cache = tmp_path / "models--x--tiny"
    snapshot = cache / "snapshots" / "abc123"
    (cache / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for path in built["bart"].iterdir():
        blob = cache / "blobs" / f"blob-{path.name}"
        shutil.copy(path, blob)
        (snapshot / path.name).symlink_to(Path("../../blobs") / blob.name)
    assert load_pretrained(snapshot).model is not None


# --- item 10: an index over its cap, non-finite weights -------------------------------------------------------------


def test_an_index_over_its_cap_is_refused_naming_the_cap(built, tmp_path):
    from transformer.hub.folder import missing_files

    folder = copy_of(built, "bart", tmp_path)
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {}, "pad": "x" * 2**20}))
    expected = r"model.safetensors.index.json is 1.0 MB; the limit for this file is 1.0 MB"
    with pytest.raises(CheckpointError, match=expected) as error:
        load_pretrained(folder)
    assert "needs" not in str(error.value)
    with pytest.raises(ValueError, match=expected):
        missing_files(folder, hub_bart.FAMILY)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("layout", ["bart", "ours"])
def test_non_finite_weights_are_refused_naming_the_tensor(built, tmp_path, layout, value):
    """They loaded, and every translation came out empty."""
    from safetensors.torch import load_file

    folder = ours(tmp_path / "ours") if layout == "ours" else copy_of(built, layout, tmp_path)
    path = folder / "model.safetensors"
    header, _ = header_of(path)
    tensors = load_file(path)
    name = next(name for name in sorted(tensors) if name.endswith(("fc1.weight", "w_1.weight")))
    tensors[name].view(-1)[-1] = value
    save_file(tensors, path, metadata=header.get("__metadata__"))
    with pytest.raises(CheckpointError, match=f"model.safetensors: the tensor {name} holds NaN or infinite values"):
        load_pretrained(folder)
