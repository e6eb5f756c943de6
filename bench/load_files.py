"""The hostile files of the load test (bench/bench_load.py, issue 33), written into a folder once:

- ``marian-layers.zip``: a small Marian folder whose config.json says 10**9 encoder and decoder layers;
- ``endless.zip``: one of our checkpoints with max_len 2,097,152 (d_model 16: 2^25, at the cap) whose
  generator never says </s> (its bias for </s> is -10^4), so every decoding runs to the output bound;
- ``vocab-1e7.zip``: a Marian folder whose vocab.json holds 10**7 entries (``"":0,`` each: 48 MB);
- ``config-280mb.json``: a config.json of 280 MB (sent to the upload endpoint, over its 100 MB cap);
- ``pairs-49mb.tsv``: a 49 MB pairs file for the Training page (its cap is 5 MB);
- ``bart-padding.zip``: a tiny BART folder whose tokenizer.json pads every encode to 10**8 tokens (issue 43, case 1:
  it aborted the server when the Tokenization page opened);
- ``bart-overlap.zip``: a tiny BART folder whose model.safetensors header points every tensor at byte 0 (case 2:
  overlapping ranges made an 8.5 MB file a 589 M-parameter model);
- ``t5-pieces.zip``: a tiny T5 folder whose Unigram tokenizer.json holds 3.5 M pieces, 59 MB, under the 64 MB cap
  (case 3: 3.9 M pieces made a 9.3 s stall with the GIL held, 3.1 GB kept);
- the 20 MB of Pharaoh links are built in memory (``pharaoh_text``).
"""

from __future__ import annotations

import json
import shutil
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

MB = 2**20


def _zip(folder: Path, target: Path) -> Path:
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(folder.parent))
    return target


def _marian(folder: Path) -> Path:
    from marian_helpers import make_marian_folder  # tests/marian_helpers.py: a small Marian folder in seconds

    if folder.exists():
        shutil.rmtree(folder)
    return make_marian_folder(folder)


def _endless(folder: Path) -> Path:
    import torch

    from transformer.checkpoints.checkpoint import save_checkpoint
    from transformer.network.config import TransformerConfig
    from transformer.network.model import Transformer
    from transformer.text.tasks import make_task
    from transformer.text.tokenizers import EOS_ID, build_tokenizers

    src, tgt = build_tokenizers(make_task("reverse", n_train=200, n_valid=0, n_test=0, seed=0), kind="char")
    config = TransformerConfig(src_vocab_size=src.vocab_size, tgt_vocab_size=tgt.vocab_size, d_model=16, n_heads=2,
                               n_layers=1, n_encoder_layers=1, n_decoder_layers=1, d_ff=32, dropout=0.0,
                               max_len=2_097_152, tying="none")
    generator = torch.Generator().manual_seed(0)
    model = Transformer(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.1)
        model.generator.bias[EOS_ID] = -1e4  # never </s>
    meta = {"task": "reverse", "task_options": {}, "src_lang": "en", "tgt_lang": "de", "step": 0,
            "parameters": model.num_parameters()}  # no max_output_len: the app's own bound applies
    return save_checkpoint(folder, model, src, tgt, meta)


def _family(folder: Path, layout: str) -> Path:
    """A tiny saved folder of ``layout``'s family (tests/family_app_folders.py), with its tokenizer's files."""
    from family_app_folders import build_family_folder
    from family_helpers import build_family_tokenizers

    if folder.exists():
        shutil.rmtree(folder)
    tokenizers = build_family_tokenizers(folder.parent / f"{folder.name}-tokenizers")
    return build_family_folder(folder.parent, layout, tokenizers[layout], name=folder.name)


def _overlapping(weights: Path) -> None:
    """Rewrite ``weights`` (safetensors) so that every tensor's byte range starts at 0 (they all overlap)."""
    data = weights.read_bytes()
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + size])
    body = data[8 + size:]
    for name, entry in header.items():
        if name != "__metadata__":
            start, end = entry["data_offsets"]
            entry["data_offsets"] = [0, end - start]
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    weights.write_bytes(len(text).to_bytes(8, "little") + text + body)


def _many_pieces(tokenizer_json: Path, pieces: int) -> None:
    """Replace the Unigram pieces of ``tokenizer_json`` by ``pieces`` made-up ones (the special ones kept first)."""
    document = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    kept = document["model"]["vocab"][:3]
    document["model"]["vocab"] = "@PIECES@"
    head, tail = json.dumps(document).split('"@PIECES@"')
    with open(tokenizer_json, "w", encoding="utf-8") as out:
        out.write(head + "[" + ",".join(json.dumps(piece) for piece in kept))
        for start in range(0, pieces, 100_000):  # ~17 bytes a piece
            out.write("".join(f',["p{i}",-9.0]' for i in range(start, min(pieces, start + 100_000))))
        out.write("]" + tail)


def write_files(out: Path) -> dict[str, Path]:
    """Every hostile file in ``out`` (kept between runs: built only when missing)."""
    out.mkdir(parents=True, exist_ok=True)
    files = {name: out / name for name in ("marian-layers.zip", "endless.zip", "vocab-1e7.zip",
                                           "config-280mb.json", "pairs-49mb.tsv", "bart-padding.zip",
                                           "bart-overlap.zip", "t5-pieces.zip")}
    work = out / "work"
    if not files["marian-layers.zip"].exists():
        folder = _marian(work / "marian-layers")
        config = json.loads((folder / "config.json").read_text())
        config.update(encoder_layers=10**9, decoder_layers=10**9, num_hidden_layers=10**9)
        (folder / "config.json").write_text(json.dumps(config))
        _zip(folder, files["marian-layers.zip"])
    if not files["endless.zip"].exists():
        _zip(_endless(work / "endless"), files["endless.zip"])
    if not files["vocab-1e7.zip"].exists():
        folder = _marian(work / "vocab-1e7")
        with open(folder / "vocab.json", "wb") as vocab:  # 10**7 entries of 5 bytes: 47.7 MB
            vocab.write(b"{" + b'"":0,' * (10**7 - 1) + b'"":0}')
        _zip(folder, files["vocab-1e7.zip"])
    if not files["config-280mb.json"].exists():
        with open(files["config-280mb.json"], "wb") as config:
            config.write(b'{"model_type": "marian", "pad": "')
            for _ in range(280):
                config.write(b"x" * MB)
            config.write(b'"}')
    if not files["pairs-49mb.tsv"].exists():
        line = b"the dog sleeps\tder Hund schlaeft\n"
        with open(files["pairs-49mb.tsv"], "wb") as pairs:
            pairs.write(line * (49 * MB // len(line)))
    if not files["bart-padding.zip"].exists():
        folder = _family(work / "bart-padding", "bart")
        document = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
        document["padding"] = {"strategy": {"Fixed": 10**8}, "direction": "Right", "pad_to_multiple_of": None,
                               "pad_id": 1, "pad_type_id": 0, "pad_token": "<pad>"}
        (folder / "tokenizer.json").write_text(json.dumps(document), encoding="utf-8")
        _zip(folder, files["bart-padding.zip"])
    if not files["bart-overlap.zip"].exists():
        folder = _family(work / "bart-overlap", "bart")
        _overlapping(folder / "model.safetensors")
        _zip(folder, files["bart-overlap.zip"])
    if not files["t5-pieces.zip"].exists():
        folder = _family(work / "t5-pieces", "t5")
        _many_pieces(folder / "tokenizer.json", 3_500_000)
        _zip(folder, files["t5-pieces.zip"])
    shutil.rmtree(work, ignore_errors=True)
    return files


def pharaoh_text(megabytes: int = 20) -> str:
    """``megabytes`` MB of Pharaoh links ("0-0 1-1 ..."), one line per sentence."""
    line = " ".join(f"{i}-{i}" for i in range(40)) + "\n"
    return line * (megabytes * MB // len(line))


if __name__ == "__main__":
    for name, path in write_files(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/load-files")).items():
        print(f"{name}: {path.stat().st_size / MB:.1f} MB")
