"""A training run killed at any moment (SIGKILL: no cleanup code runs) leaves a folder that loads: the
previous checkpoint or the new one, and every snapshot it lists."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from transformer.checkpoints.checkpoint import CONFIG_FILE, list_snapshots, load_checkpoint, read_log

REPO = Path(__file__).resolve().parent.parent
KILLS = 20
# Saving after every step (evaluation every step): most of a run's time is spent writing files.
ARGS = ["--task", "copy", "--task-option", "max_len=5", "--n-train", "300", "--tokenizer", "char", "--d-model", "16",
        "--n-heads", "2", "--n-layers", "1", "--d-ff", "32", "--max-steps", "100000", "--max-seconds", "600",
        "--eval-every-steps", "1", "--eval-sentences", "2", "--log-every", "1", "--threads", "1", "--quiet"]


@pytest.mark.slow
def test_a_run_killed_at_random_moments_always_leaves_a_loadable_folder(tmp_path: Path) -> None:
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    rng = random.Random(0)
    loaded = 0
    for _ in range(KILLS):
        where = ["--resume", str(out)] if (out / CONFIG_FILE).exists() else ["--out", str(out), "--overwrite"]
        process = subprocess.Popen([sys.executable, "-m", "transformer.train", *ARGS, *where], cwd=REPO, env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        started = time.monotonic()
        while time.monotonic() - started < 60 and not (out / CONFIG_FILE).exists() and process.poll() is None:
            time.sleep(0.05)  # the first kill waits for a first checkpoint
        time.sleep(rng.uniform(0.05, 1.5))
        process.send_signal(signal.SIGKILL)
        _, stderr = process.communicate(timeout=30)
        assert process.returncode == -signal.SIGKILL, stderr.decode()[-2000:]
        if not (out / CONFIG_FILE).exists():
            continue
        checkpoint = load_checkpoint(out)  # raises if the folder were half-written
        logged = {record["step"] for record in read_log(out)}  # a line cut short at the end is dropped, never an error
        assert checkpoint.meta["step"] == 0 or checkpoint.meta["step"] in logged  # a step the run really reached
        with torch.no_grad():
            logits = checkpoint.model(torch.tensor([[5, 6, 3]]), torch.tensor([[2, 5]]))
        assert torch.isfinite(logits).all()  # weights that compute, not a half-copied file
        loaded += 1
        for step in list_snapshots(out):
            load_checkpoint(out, step=step)
    assert loaded >= KILLS - 2


def test_a_save_cut_between_the_weights_and_the_config_loads_the_previous_checkpoint(tmp_path, monkeypatch):
    """The one window a random kill rarely hits, made certain: the new weights are in place, the old
    config.json still is. The folder loads the previous checkpoint, weights and config together."""
    import torch

    from transformer.checkpoints import checkpoint
    from transformer.network.config import TransformerConfig
    from transformer.network.model import Transformer
    from transformer.text.tokenizers import CharTokenizer

    tokenizer = CharTokenizer.from_texts(["abc"])
    config = TransformerConfig(src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size, d_model=8,
                               n_heads=2, n_layers=1, d_ff=16, dropout=0.0)
    first, second = Transformer(config).eval(), Transformer(config).eval()
    checkpoint.save_checkpoint(tmp_path, first, tokenizer, tokenizer, {"step": 1})
    real_replace = os.replace

    def killed_before_the_config(source, destination):
        if Path(destination).name == CONFIG_FILE:
            raise KeyboardInterrupt("killed")  # nothing after this line of the save runs
        real_replace(source, destination)

    monkeypatch.setattr(checkpoint.os, "replace", killed_before_the_config)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save_checkpoint(tmp_path, second, tokenizer, tokenizer, {"step": 2})
    monkeypatch.undo()
    loaded = load_checkpoint(tmp_path)
    assert loaded.meta["step"] == 1
    assert all(torch.equal(p, q) for p, q in zip(loaded.model.parameters(), first.parameters(), strict=True))
