"""The decoder-only families on the GPU: ``python -m pytest -m gpu`` on a machine with CUDA (conftest.py's
``gpu_device``; TRANSFORMER_TEST_DEVICE=cpu is a dry run on the CPU).

Each family's whole folder (tests/lm_folders.py: a tiny random float64 model saved by ``transformers`` with its
tokenizer) is loaded on the device: its logits equal ``AutoModelForCausalLM``'s on the same device (float64: both
sides' float32 parts, the norms' statistics, rotary tables and softmax of the Llama family, are computed alike, one
float32 ulp per such step at most), and greedy, beam search, sampling and a recorded trace give on the device what
they give on the CPU.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from lm_folders import NAMES, build_lm_folder

from transformer import load_pretrained

pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore::UserWarning")]
PROMPTS = ["The house is small and the dog is big.", "hello world", "Where is the train station?"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("lm-gpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {name: build_lm_folder(name, root) for name in NAMES}


@pytest.mark.parametrize("name", NAMES)
def test_each_decoder_family_on_the_device(folders: dict[str, Path], name: str, gpu_device: str) -> None:
    from transformers import AutoModelForCausalLM

    folder = folders[name]
    dev = load_pretrained(folder, device=gpu_device, dtype=torch.float64)
    cpu = load_pretrained(folder, dtype=torch.float64)
    theirs = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64, attn_implementation="eager")
    theirs = theirs.to(gpu_device).eval()
    ids = dev.encode_prompt(PROMPTS[0])
    with torch.no_grad():
        want = theirs(ids).logits
    got = dev.lm_logits(ids)
    # float32 steps (norm statistics, rotary tables, softmax) at most one ulp apart per step between kernels:
    # (steps + 1) * eps32 * max|logit|, steps = the norms and attention layers of the model
    steps = sum(1 for m in dev.model.modules() if "Norm" in type(m).__name__) + dev.config.n_decoder_layers
    assert (got - want).abs().max().item() <= (steps + 1) * torch.finfo(torch.float32).eps * want.abs().max().item()
    assert dev.generate(PROMPTS, max_new_tokens=6) == cpu.generate(PROMPTS, max_new_tokens=6)
    assert dev.generate(PROMPTS[1], max_new_tokens=6, beam_size=3) == cpu.generate(PROMPTS[1], max_new_tokens=6,
                                                                                   beam_size=3)
    sampled = dev.generate(PROMPTS[2], max_new_tokens=6, temperature=0.8, seed=3)
    assert sampled == dev.generate(PROMPTS[2], max_new_tokens=6, temperature=0.8, seed=3)
    assert dev.trace(PROMPTS[2], max_new_tokens=6).output_ids == cpu.trace(PROMPTS[2], max_new_tokens=6).output_ids


@pytest.mark.parametrize("name", ["gpt2", "llama3", "qwen3", "gemma2"])
def test_every_method_and_the_head_scores_on_the_device(folders: dict[str, Path], name: str, gpu_device: str) -> None:
    """Every attribution method, the logit lens, the residual stream and the head scores of a decoder-only model:
    the device's answer within 1e-3 of the CPU's largest magnitude (float32 sums run in another order there)."""
    from test_gpu import close

    from transformer.explain import METHODS, attribute, lm_head_summary, lm_pair, logit_lens, residual_stream

    folder = folders[name]
    dev, cpu = load_pretrained(folder, device=gpu_device), load_pretrained(folder)
    prompt = cpu.encode_prompt(PROMPTS[0])
    continuation = torch.tensor([cpu.tokenizer.encode(" the house is", add_special_tokens=False)])
    src, tgt = lm_pair(prompt, continuation)
    on = [t.to(dev.device) for t in (src, tgt)]
    for method in METHODS:
        got, want = attribute(dev.model, *on, method), attribute(cpu.model, src, tgt, method)
        close(got.source, want.source, f"{name} {method}: source")
        if want.target is not None:
            close(got.target, want.target, f"{name} {method}: target")
    close(logit_lens(dev.model, *on), logit_lens(cpu.model, src, tgt), f"{name}: logit lens")
    stream_dev, stream_cpu = residual_stream(dev.model, *on), residual_stream(cpu.model, src, tgt)
    for column in ("update_norm", "stream_norm"):
        close(torch.tensor(stream_dev[column].to_numpy()), torch.tensor(stream_cpu[column].to_numpy()), column)
    heads_dev = lm_head_summary(dev.model, n_prompts=4, repeat_length=8, special=dev.tokenizer.special_ids)
    heads_cpu = lm_head_summary(cpu.model, n_prompts=4, repeat_length=8, special=cpu.tokenizer.special_ids)
    close(torch.tensor(heads_dev["induction"].to_numpy()), torch.tensor(heads_cpu["induction"].to_numpy()), "heads")
