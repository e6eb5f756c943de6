"""The Decoding page on decoder-only models (issue 41 item 7): a continuation step by step (greedy, beam search with
its tree, sampling), each method's tokens equal to ``pipe.generate``'s with the same settings, each step's model input
the prompt and the tokens chosen before it, its top-k the model's next-token distribution; the folder's
generation_config.json's recommended sampling offered (``meta["generation"]``)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from app_helpers import assert_clean, chart_figure, open_page
from lm_folders import build_lm_folder

from transformer import load_pretrained
from transformer.hub.generation import generation_settings

MODELS = ("gpt2", "qwen3", "mistral", "gemma2")
TEXT = "the cat sat on the mat because"
INSTRUCT = "qwen3-sampling"  # a Qwen3 folder whose generation_config.json recommends sampling, as Qwen3's does
RECOMMENDED = {"do_sample": True, "temperature": 0.7, "top_k": 30, "top_p": 0.9}


@pytest.fixture(scope="module")
def lm_models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lm-models")
    for name in MODELS:
        build_lm_folder(name, root)
    shutil.copytree(root / "qwen3", root / INSTRUCT)
    path = root / INSTRUCT / "generation_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text(encoding="utf-8")), **RECOMMENDED}), encoding="utf-8")
    return root


def outputs(at) -> list[str]:
    """The three output boxes: greedy, beam search's best hypothesis, the sample."""
    return [code.value for code in at.code][:3]


@pytest.mark.parametrize("name", MODELS)
def test_each_method_continues_the_prompt_as_generate_does(lm_app_models_dir: Path, name: str) -> None:
    at = open_page("9_decoding", TEXT, name)
    assert_clean(at)
    assert "continues its prompt" in " ".join(m.value for m in at.markdown)
    pipe = load_pretrained(lm_app_models_dir / name)
    beam_size = at.slider(key="dec_beam_size").value
    expected = [pipe.generate(TEXT), pipe.generate(TEXT, beam_size=beam_size),
                pipe.generate(TEXT, temperature=1.0, seed=0)]  # the page's sampling: T = 1, all tokens, seed 0
    assert outputs(at) == [text or "(empty)" for text in expected]
    assert "dec_tree" in [c.key for c in at.get("plotly_chart")]  # the beam search tree


@pytest.mark.parametrize("name", ["gpt2", "gemma2"])
def test_every_step_reads_the_prompt_and_the_tokens_before_it(lm_app_models_dir: Path, name: str) -> None:
    pipe = load_pretrained(lm_app_models_dir / name)
    prompt = pipe.prompt_ids(TEXT)
    result = pipe.trace(TEXT, warn=False)
    tokens = result.output_ids + ([pipe.eos_ids[0]] if result.finished else [])  # the steps, the EOS included
    for method in ("Greedy", "Beam search"):
        at = open_page("9_decoding", TEXT, name, dec_method=method)
        at.slider(key="dec_beam_size").set_value(1).run()  # k = 1: greedy's tokens (the model's k at first)
        assert_clean(at)
        assert at.slider(key="dec_step").max == len(tokens)
        for step in (1, len(tokens)):
            at.slider(key="dec_step").set_value(step).run()
            assert_clean(at)
            chips = next(m.value for m in at.markdown if "token-chips" in m.value)
            assert [int(i) for i in re.findall(r'title="id (\d+)"', chips)] == [*prompt, *tokens[: step - 1]]
            chose = next(m.value for m in at.markdown if m.value.startswith("→ chose"))
            assert f"(id {tokens[step - 1]})" in chose
            with torch.inference_mode():  # the top-k bars: the model's next-token distribution at that step
                logits = pipe.lm_logits(torch.tensor([[*prompt, *tokens[: step - 1]]]))[0, -1]
            p = torch.softmax(logits.double(), dim=-1)
            bars = chart_figure(at, "dec_topk").data[0]
            top = p.topk(len(bars.x))
            # float32 logits by two routes (the KV cache step by step, one pass here): a few float32 ulps of the
            # logits apart (|logit| < 16 here: ~1e-6), and a probability moves by at most about as much
            np.testing.assert_allclose(np.asarray(bars.x, dtype=float), top.values.numpy(), atol=1e-5, rtol=0)


def test_the_folders_recommended_sampling_is_offered(lm_app_models_dir: Path) -> None:
    at = open_page("9_decoding", TEXT, INSTRUCT)
    assert_clean(at)
    assert (at.slider(key="dec_temperature").value, at.slider(key="dec_top_k").value,
            at.slider(key="dec_top_p").value) == (0.7, 30, 0.9)
    assert at.radio(key="dec_method").value == "Sampling"  # the folder samples by default
    assert "recommends do_sample = True, temperature = 0.7, top_k = 30, top_p = 0.9" in " ".join(
        c.value for c in at.caption)
    pipe = load_pretrained(lm_app_models_dir / INSTRUCT)
    assert outputs(at)[2] == (pipe.generate(TEXT, temperature=0.7, top_k=30, top_p=0.9, seed=0) or "(empty)")
    plain = open_page("9_decoding", TEXT, "qwen3")  # a folder that recommends nothing: T = 1, every token, greedy
    assert (plain.slider(key="dec_temperature").value, plain.slider(key="dec_top_k").value,
            plain.slider(key="dec_top_p").value, plain.radio(key="dec_method").value) == (1.0, 0, 1.0, "Greedy")


def test_generation_settings_keep_well_typed_sampling_only() -> None:
    assert generation_settings(RECOMMENDED, {}) == RECOMMENDED
    bad = {"do_sample": "yes", "temperature": -1.0, "top_k": True, "top_p": 1.5}
    assert generation_settings(bad, {}) == {}
    assert generation_settings({"temperature": 0, "top_p": 0.0, "top_k": 0}, {}) == {"top_k": 0}


def test_beam_search_and_sampling_read_the_chat_prompt(lm_models_dir: Path) -> None:
    """With the chat switch on, the page's searches continue the prompt its analysis read: the chat template's."""
    from ui.compute import analysis as analysis_module
    from ui.compute import decoding

    pipe = load_pretrained(lm_models_dir / "qwen3")
    analysis = analysis_module.analyse("folder:qwen3|chat", "cpu", pipe, TEXT, chat=True)
    assert analysis.src_ids == pipe.prompt_ids(TEXT, chat=True) != pipe.prompt_ids(TEXT)
    beam = decoding.beam("folder:qwen3|chat", "cpu", pipe, analysis, 2, 1.0, False)
    assert pipe.tokenizer.decode(list(beam.best.tokens)) == pipe.generate(TEXT, chat=True, beam_size=2)
    sampled = decoding.sampled("folder:qwen3|chat", "cpu", pipe, analysis, 0.8, None, None, 3)
    assert pipe.tokenizer.decode(sampled.tokens[0]) == pipe.generate(TEXT, chat=True, temperature=0.8, seed=3)
