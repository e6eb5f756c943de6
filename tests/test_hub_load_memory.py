"""Opening a Hugging Face folder holds its weights once (issue 32: loading peaks at <= 1.3x the weights' size).

The weights used to be memory-mapped (``safe_open``) and copied into the model: the mapped file's pages and the
model both counted in the process's memory, twice the weights at the peak. Now each tensor is read into memory of
its own and becomes the parameter (``load_weights(take=True)``). ``transformers`` is the test-only writer.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from transformer.pipeline import load_pretrained

pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from family_app_folders import build_family_folder  # noqa: E402

PEAK_CHILD = """
import json, sys
from pathlib import Path
sys.path.insert(0, {root!r})
def kb(field):
    return next(int(l.split()[1]) for l in Path('/proc/self/status').read_text().splitlines() if l.startswith(field))
import tokenizers, torch, transformer.hub.load, transformer.hub.fast_tokenizer  # what a load imports on its way
from transformer.pipeline import load_pretrained
from transformer.network.config import TransformerConfig
from transformer.network.model import Transformer
with torch.device('meta'):  # the first model built on the meta device imports torch._dynamo (70 MB), once
    Transformer(TransformerConfig(src_vocab_size=8, tgt_vocab_size=8, d_model=8, n_heads=2, n_layers=1, d_ff=8))
base = kb('VmHWM')
model = load_pretrained({folder!r}, dtype={dtype}).model
print(json.dumps(dict(base=base, peak=kb('VmHWM'), parameters=sum(p.numel() for p in model.parameters()))))
"""


def nllb_folder(root: Path, tokenizer_folder: Path) -> Path:
    """An NLLB (m2m_100) folder whose weights are mostly its 200,000 x 64 embedding (51 MB)."""
    from transformers import AutoModelForSeq2SeqLM, M2M100Config

    config = M2M100Config(vocab_size=200_000, d_model=64, encoder_layers=1, decoder_layers=1,
                          encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                          decoder_ffn_dim=64, max_position_embeddings=64, scale_embedding=True, pad_token_id=1,
                          bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = AutoModelForSeq2SeqLM.from_config(config)
    folder = root / "nllb-wide"
    model.save_pretrained(folder, safe_serialization=True)
    for path in tokenizer_folder.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    return folder


@pytest.fixture(scope="module")
def wide_nllb(family_tokenizers, tmp_path_factory) -> Path:
    return nllb_folder(tmp_path_factory.mktemp("wide"), family_tokenizers["nllb"])


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads VmHWM of /proc")
@pytest.mark.parametrize(("dtype", "bound"), [("torch.float32", 1.3), ("torch.float16", 0.8)])
def test_loading_holds_the_weights_once(wide_nllb, dtype, bound):
    # float16: the model is half the file; each tensor is cast as it is read, never all of them float32 at once
    weights = (wide_nllb / "model.safetensors").stat().st_size
    child = PEAK_CHILD.format(root=str(ROOT), folder=str(wide_nllb), dtype=dtype)
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["parameters"] * 4 > 0.95 * weights  # the file is the weights, nearly all of them float32
    peak = (found["peak"] - found["base"]) * 1024
    assert peak <= bound * weights, f"loading peaked at {peak / weights:.2f}x the weights' {weights:,} bytes"


def test_a_tensor_read_once_serves_two_untied_parameters_as_two(family_tokenizers, tmp_path):
    # transformers 5 saves a v1.1 T5 (untied generator) without lm_head: the shared matrix fills both
    # src_embed and generator, which must not become one tensor when the read tensors are taken as parameters.
    folder = build_family_folder(tmp_path, "t5", family_tokenizers["t5"])
    model = load_pretrained(folder).model
    assert not model.config.generator_tied
    embedding, generator = model.src_embed.weight, model.generator.weight
    assert torch.equal(embedding, generator)
    assert embedding.untyped_storage().data_ptr() != generator.untyped_storage().data_ptr()
    with torch.no_grad():
        generator.add_(1.0)
    assert not torch.equal(embedding, generator)
