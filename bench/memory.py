"""What the benchmarks of Hugging Face-sized stand-ins (bench_families.py, bench_lm.py) measure of memory: this
process's peak and resident figures, and a folder's load in a fresh process (its peak against the bytes of its
weights, the imports a load makes on its way taken before the baseline)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def status_kb(field: str) -> int:
    """A field of /proc/self/status in kB (VmHWM: peak resident memory, VmRSS: now)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def reset_peak() -> None:
    """Start VmHWM again from the resident memory now (Linux's clear_refs 5), so a peak is one step's."""
    Path("/proc/self/clear_refs").write_text("5")


LOAD_CHILD = """
import json, sys, time, torch
sys.path.insert(0, {root!r})
torch.set_num_threads({threads})
from pathlib import Path
def kb(field):
    return next(int(l.split()[1]) for l in Path('/proc/self/status').read_text().splitlines() if l.startswith(field))
if {theirs}:
    from transformers import {auto_class}
else:
    import tokenizers, jinja2  # what a load imports on its way
    import transformer.hub.load, transformer.hub.fast_tokenizer, transformer.lm_pipeline
    from transformer.pipeline import load_pretrained
    from transformer.network.config import TransformerConfig
    from transformer.network.model import Transformer
    with torch.device('meta'):  # the first model built on the meta device imports torch._dynamo (70 MB), once
        Transformer(TransformerConfig(src_vocab_size=8, tgt_vocab_size=8, d_model=8, n_heads=2, n_layers=1, d_ff=8,
                                      decoder_only={decoder_only}))
base = kb('VmHWM')
start = time.perf_counter()
if {theirs}:
    model = {auto_class}.from_pretrained({folder!r}, dtype={dtype}).eval()
else:
    model = load_pretrained({folder!r}, dtype={dtype}).model
seconds = time.perf_counter() - start
print(json.dumps(dict(base=base, peak=kb('VmHWM'), rss=kb('VmRSS'), seconds=seconds,
                      parameters=sum(p.numel() for p in model.parameters()))))
"""


def load_peak(folder: Path, threads: int, *, theirs: bool = False, dtype: str = "torch.float32",
              decoder_only: bool = False) -> dict:
    """The load of ``folder`` in a fresh process (ours, or ``theirs``: ``transformers``' Auto class of its kind):
    baseline and peak VmHWM (kB), RSS after, seconds, parameters."""
    auto_class = "AutoModelForCausalLM" if decoder_only else "AutoModelForSeq2SeqLM"
    code = LOAD_CHILD.format(root=str(ROOT), threads=threads, theirs=theirs, folder=str(folder), dtype=dtype,
                             auto_class=auto_class, decoder_only=decoder_only)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])
