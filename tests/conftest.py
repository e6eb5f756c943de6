"""Shared fixtures: tiny checkpoints built in seconds, so no test depends on training.

- ``tiny_models_dir``: a folder of two checkpoint folders, as ``pretrained/`` holds them
  (point ``TRANSFORMER_APP_MODELS_DIR`` at it to run the app on them):
  ``tiny-reverse`` (character tokenizer, shared vocabulary, tied embeddings, 2+2 layers,
  2 heads) and ``tiny-numbers`` (BPE, separate vocabularies, 1 encoder and 2 decoder
  layers, 4 heads).
- ``tiny_checkpoint``: the ``tiny-reverse`` folder; ``tiny_pipeline``: it loaded.
- ``make_app(model, text)``: an AppTest of app.py on those checkpoints, with a model and input chosen.
- ``family_tokenizers``: tokenizer folders of the T5, BART, mBART-50 and NLLB families (``family_helpers``),
  built once per session with ``transformers``' own classes; skipped without ``transformers``.
- ``trained_family_folder(name)``: a Hugging Face folder of family ``name`` (``family_models.NAMES``) whose tiny
  model learnt to copy short texts (``family_folders.trained_folder``), built the first time a test asks for it
  and kept for the session.
- ``gpu_device``: the device the ``gpu``-marked tests (tests/test_gpu.py) run on, $TRANSFORMER_TEST_DEVICE or
  "cuda"; those tests are skipped when it names CUDA and CUDA is not available (``python -m pytest -m gpu`` on a
  GPU machine; TRANSFORMER_TEST_DEVICE=cpu dry-runs them anywhere).

The weights are random (seeded): the outputs are nonsense, but every shape, name and
code path is the real one.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from transformer.checkpoints.checkpoint import save_checkpoint
from transformer.network.config import TransformerConfig
from transformer.network.model import Transformer
from transformer.text.tasks import make_task
from transformer.text.tokenizers import build_tokenizers

# One thread: on a shared machine with few cores, torch's default (one thread per core) makes the
# same test take from 2 s to 40 s depending on what else runs; with one it takes the same time every run.
torch.set_num_threads(1)

GPU_DEVICE_ENV = "TRANSFORMER_TEST_DEVICE"  # where the gpu-marked tests run: "cuda" unless it says otherwise
TINY_MAX_OUTPUT = 10  # decoding stops here: random weights rarely produce </s>


def make_tiny_checkpoint(
    folder: Path,
    *,
    task: str = "reverse",
    kind: str = "char",
    vocab_size: int = 60,
    shared: bool = True,
    n_encoder_layers: int = 2,
    n_decoder_layers: int = 2,
    n_heads: int = 2,
    d_model: int = 16,
    seed: int = 0,
) -> Path:
    """Write a checkpoint folder with a random model and tokenizers trained on a small task corpus."""
    splits = make_task(task, n_train=200, n_valid=0, n_test=0, seed=seed)
    src_tok, tgt_tok = build_tokenizers(splits, kind=kind, vocab_size=vocab_size, shared=shared)
    torch.manual_seed(seed)
    config = TransformerConfig(
        src_vocab_size=src_tok.vocab_size, tgt_vocab_size=tgt_tok.vocab_size, d_model=d_model, n_heads=n_heads,
        n_layers=n_encoder_layers, n_encoder_layers=n_encoder_layers, n_decoder_layers=n_decoder_layers,
        d_ff=2 * d_model, dropout=0.0, max_len=48, tying="all" if shared else "none",
    )
    model = Transformer(config).eval()
    meta = {"task": task, "task_options": {}, "src_lang": "en", "tgt_lang": "de",
            "max_output_len": TINY_MAX_OUTPUT, "step": 0, "parameters": model.num_parameters()}
    return save_checkpoint(folder, model, src_tok, tgt_tok, meta)


@pytest.fixture(scope="session")
def tiny_models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("models")
    make_tiny_checkpoint(root / "tiny-reverse")
    make_tiny_checkpoint(root / "tiny-numbers", task="numbers", kind="bpe", vocab_size=80, shared=False,
                         n_encoder_layers=1, n_decoder_layers=2, n_heads=4, seed=1)
    return root


@pytest.fixture(scope="session")
def lm_models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every decoder-only folder of tests/lm_folders.py (GPT-2, SmolLM2, Llama 2 and 3, Mistral, Qwen2 and 3,
    Gemma-2 and 3) in one models folder, built once for the session's app tests."""
    pytest.importorskip("transformers")
    from lm_folders import NAMES, build_lm_folder

    root = tmp_path_factory.mktemp("lm-models")
    for name in NAMES:
        build_lm_folder(name, root)
    return root


@pytest.fixture
def lm_app_models_dir(lm_models_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``lm_models_dir`` as the app's models folder (``settings.MODELS_DIR_ENV``) for one test."""
    from ui.state import settings

    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(lm_models_dir))
    return lm_models_dir


@pytest.fixture(scope="session")
def tiny_checkpoint(tiny_models_dir: Path) -> Path:
    return tiny_models_dir / "tiny-reverse"


@pytest.fixture(scope="session")
def tiny_pipeline(tiny_checkpoint: Path):
    from transformer.pipeline import load_pretrained

    return load_pretrained(tiny_checkpoint)


@pytest.fixture
def make_app(tiny_models_dir: Path, monkeypatch: pytest.MonkeyPatch):
    """``make_app(model, text)``: an AppTest of app.py on the tiny checkpoints, with that model and input
    chosen as another page would (plain session_state keys), not run yet."""
    from streamlit.testing.v1 import AppTest

    from ui.state import settings

    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(tiny_models_dir))

    def make(model: str = "tiny-reverse", text: str | None = None) -> AppTest:
        at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=60)
        at.session_state[settings.MODEL] = model
        if text is not None:
            at.session_state[settings.TEXT] = text
        return at

    return make


def gpu_test_device() -> str:
    """The device of the ``gpu``-marked tests: $TRANSFORMER_TEST_DEVICE, default "cuda"."""
    return os.environ.get(GPU_DEVICE_ENV) or "cuda"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the ``gpu``-marked tests when their device is CUDA and this machine has none."""
    if torch.device(gpu_test_device()).type != "cuda" or torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason=f"needs CUDA (or {GPU_DEVICE_ENV}=cpu for a dry run)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def gpu_device() -> str:
    return gpu_test_device()


@pytest.fixture(scope="session")
def family_tokenizers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pytest.importorskip("transformers")
    from family_helpers import build_family_tokenizers

    return build_family_tokenizers(tmp_path_factory.mktemp("family-tokenizers"))


@pytest.fixture(scope="session")
def trained_family_folder(family_tokenizers: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    from family_folders import trained_folder

    root, built = tmp_path_factory.mktemp("family-folders"), {}

    def folder(name: str) -> Path:
        if name not in built:
            built[name] = trained_folder(name, family_tokenizers, root)
        return built[name]
    return folder
