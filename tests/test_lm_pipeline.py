"""``load_pretrained`` of a decoder-only Hugging Face folder (GPT-2, Llama, Mistral, Qwen2/3, Gemma-2/3): the
``LMPipeline`` gives the ids, logits and continuations ``transformers`` gives for the same folder.

The folders are whole Hub-like repositories built here (tests/lm_folders.py: a tokenizer folder and a tiny random
float64 model saved with ``save_pretrained``); the reference is ``AutoTokenizer`` and ``AutoModelForCausalLM``
(eager attention) on the same folder. Float64 throughout: the logits agree to a few ulp of values of order 10
(1e-10 leaves a thousand times that), and the greedy and beam choices are then the same tokens.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch
from lm_folders import NAMES, build_lm_folder, reference_model
from lm_tokenizer_folders import TEXTS, reference
from safetensors.torch import load_file, save_file

from transformer import load_pretrained
from transformer.checkpoints.checkpoint import CheckpointError
from transformer.checkpoints.weights_header import MAX_PARAMETERS, caps_problem, parameter_count
from transformer.hub.families import config_of, family_of
from transformer.hub.memory import memory_problem
from transformer.lm_pipeline import LMPipeline

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
TOLERANCE = 1e-10  # float64 logits of order 10: rounding is ~1e-14
PROMPTS = [text for text in TEXTS if text.strip()][:30]
NEW = 6


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("lm")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {name: build_lm_folder(name, root) for name in NAMES}


@pytest.fixture(scope="module")
def loaded(folders: dict[str, Path]) -> dict[str, tuple[LMPipeline, object, object]]:
    """name -> (our pipeline, the reference model, the reference tokenizer)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {name: (load_pretrained(folder, dtype=torch.float64), reference_model(folder), reference(folder))
                for name, folder in folders.items()}


@pytest.mark.parametrize("name", NAMES)
def test_ids_and_logits_equal_transformers(loaded: dict, name: str) -> None:
    pipe, model, tokenizer = loaded[name]
    assert pipe.kind == "decoder" and pipe.meta["model_type"] == model.config.model_type
    for text in PROMPTS:
        ids = pipe.encode_prompt(text)
        assert ids.tolist() == [tokenizer(text)["input_ids"]], text
    ids = pipe.encode_prompt(PROMPTS[3])
    with torch.no_grad():
        expected = model(ids).logits
    assert (pipe.lm_logits(ids) - expected).abs().max().item() < TOLERANCE


@pytest.mark.parametrize("name", NAMES)
def test_greedy_continuations_equal_generate(loaded: dict, name: str) -> None:
    pipe, model, tokenizer = loaded[name]
    outputs = pipe.generate(PROMPTS, max_new_tokens=NEW)  # one left-padded batch
    for text, ours in zip(PROMPTS, outputs, strict=True):
        ids = pipe.encode_prompt(text)
        with torch.no_grad():
            theirs = model.generate(ids, max_new_tokens=NEW, do_sample=False)
        expected = tokenizer.decode(theirs[0, ids.size(1):], skip_special_tokens=True)
        assert ours == expected == pipe.generate(text, max_new_tokens=NEW), text


@pytest.mark.parametrize("name", ["gpt2", "llama3", "mistral", "qwen3", "gemma2"])
def test_beam_search_equals_generate(loaded: dict, name: str) -> None:
    pipe, model, tokenizer = loaded[name]
    for text in PROMPTS[:4]:
        ids = pipe.encode_prompt(text)
        with torch.no_grad():
            theirs = model.generate(ids, max_new_tokens=NEW, num_beams=4, do_sample=False)
        expected = tokenizer.decode(theirs[0, ids.size(1):], skip_special_tokens=True)
        assert pipe.generate(text, max_new_tokens=NEW, beam_size=4) == expected, text


@pytest.mark.parametrize("name", [n for n in NAMES if n != "gpt2"])
def test_chat_prompt_is_the_template_and_continues_as_generate(loaded: dict, name: str) -> None:
    pipe, model, tokenizer = loaded[name]
    assert pipe.has_chat_template
    messages = [{"role": "user", "content": "Where is the train station?"}]
    expected = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    expected = expected["input_ids"] if isinstance(expected, dict) or hasattr(expected, "keys") else expected
    ids = pipe.encode_prompt(messages[0]["content"], chat=True)
    assert ids[0].tolist() == list(expected)
    with torch.no_grad():
        theirs = model.generate(ids, max_new_tokens=NEW, do_sample=False)
    assert pipe.generate(messages[0]["content"], chat=True, max_new_tokens=NEW) == tokenizer.decode(
        theirs[0, ids.size(1):], skip_special_tokens=True)


def test_a_base_model_has_no_chat(loaded: dict) -> None:
    pipe = loaded["gpt2"][0]
    assert not pipe.has_chat_template
    with pytest.raises(ValueError, match="no chat template"):
        pipe.generate("hello", chat=True)


def test_eos_list_and_min_new_tokens(loaded: dict) -> None:
    """Llama-3's generation_config lists two EOS ids: either ends a continuation; min_new_tokens as generate."""
    pipe, model, tokenizer = loaded["llama3"]
    assert len(pipe.eos_ids) == 2
    for text in PROMPTS[:5]:
        ids = pipe.encode_prompt(text)
        with torch.no_grad():
            theirs = model.generate(ids, max_new_tokens=NEW, min_new_tokens=4, do_sample=False)
        assert pipe.generate(text, max_new_tokens=NEW, min_new_tokens=4) == tokenizer.decode(
            theirs[0, ids.size(1):], skip_special_tokens=True)


def test_trace_records_prompt_and_continuation(loaded: dict) -> None:
    pipe = loaded["qwen3"][0]
    result = pipe.trace(PROMPTS[0], max_new_tokens=NEW)
    prompt = pipe.encode_prompt(PROMPTS[0])[0].tolist()
    assert result.src_ids == prompt and len(result.src_pieces) == len(prompt)
    assert result.output_text == pipe.generate(PROMPTS[0], max_new_tokens=NEW)
    assert result.trace["tgt.ids"][0].tolist() == prompt + result.output_ids
    assert len(result.steps.steps) == len(result.output_ids) + int(result.finished)


def test_bad_prompts_are_refused(loaded: dict) -> None:
    pipe = loaded["gpt2"][0]
    with pytest.raises(ValueError, match="empty"):
        pipe.generate("   ")
    with pytest.raises(ValueError, match="at most"):
        pipe.generate("word " * 200)  # the tiny model has 64 positions
    with pytest.raises(ValueError, match="max_new_tokens"):
        pipe.generate("hello", max_new_tokens=0)


def test_gpt2_original_file_names(folders: dict[str, Path], loaded: dict, tmp_path: Path) -> None:
    """The original GPT-2 repositories store GPT2Model's names (no ``transformer.`` prefix, no lm_head) and the
    attention's causal-mask buffers: the same weights load, to the same logits."""
    folder = tmp_path / "gpt2"
    folder.mkdir()
    for path in folders["gpt2"].iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    state = load_file(folder / "model.safetensors")
    renamed = {k.removeprefix("transformer."): v for k, v in state.items() if k != "lm_head.weight"}
    renamed["h.0.attn.bias"] = torch.ones(1, 1, 64, 64)
    save_file(renamed, folder / "model.safetensors")
    pipe = load_pretrained(folder, dtype=torch.float64)
    ids = pipe.encode_prompt(PROMPTS[1])
    assert torch.equal(pipe.lm_logits(ids), loaded["gpt2"][0].lm_logits(ids))


@pytest.mark.parametrize(("model_type", "words"), [
    ("mixtral", "mixture-of-experts"), ("qwen3_moe", "mixture-of-experts"), ("phi3", "phi3"), ("bert", "encoder-only")])
def test_other_types_are_refused_by_name(model_type: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        family_of(model_type)


@pytest.mark.parametrize(("change", "words"), [
    ({"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4}}, "yarn"),
    ({"attention_bias": True}, "attention_bias"), ({"hidden_act": "relu"}, "relu"),
    ({"eos_token_id": 10**6}, "eos_token_id")])
def test_settings_this_network_lacks_are_refused(folders: dict[str, Path], tmp_path: Path, change: dict,
                                                 words: str) -> None:
    folder = tmp_path / "llama3"
    folder.mkdir()
    for path in folders["llama3"].iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    document = json.loads((folder / "config.json").read_text()) | change
    (folder / "config.json").write_text(json.dumps(document))
    with pytest.raises(CheckpointError, match=words):
        load_pretrained(folder)


LLAMA_32_1B = {"model_type": "llama", "vocab_size": 128256, "hidden_size": 2048, "intermediate_size": 8192,
               "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64,
               "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "tie_word_embeddings": True,
               "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu",
               "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
               "rope_theta": 500000.0}


def test_llama_32_1b_is_within_the_caps_and_its_memory_is_checked() -> None:
    config = config_of(LLAMA_32_1B)
    # the published count, 1,235,814,400, and our generator's bias of zeros (one per id)
    assert parameter_count(config) == 1_235_814_400 + 128_256 <= MAX_PARAMETERS
    assert caps_problem(config) is None
    problem = memory_problem(parameter_count(config), torch.bfloat16, available=2 * 10**9)
    assert problem is not None and "1,235,942,656 parameters" in problem and "2.0 GB is free" in problem
    assert memory_problem(parameter_count(config), torch.bfloat16, available=10 * 10**9) is None


@pytest.mark.parametrize("name", NAMES)
def test_the_pad_id_is_no_token_a_prompt_holds(loaded: dict, name: str) -> None:
    """Qwen's and SmolLM2's EOS is <|im_end|>, which every chat prompt holds: the pad id (what the explanations read
    as padding) is another id wherever the folder has one to spare."""
    pipe = loaded[name][0]
    pad, tokenizer = pipe.config.pad_id, pipe.tokenizer
    written = tokenizer.id_to_piece(pad)  # a special token typed into the text is that token: left out
    prompts = [pipe.prompt_ids(text) for text in PROMPTS if written not in text]
    if pipe.has_chat_template:
        prompts.append(pipe.prompt_ids(PROMPTS[0], chat=True))
    assert all(pad not in ids for ids in prompts)
    if name == "gpt2":  # one special token, its EOS: generate pads with it too
        assert pad == tokenizer.eos_id
    else:
        assert pad not in pipe.eos_ids
    if tokenizer.own_size < tokenizer.vocab_size:  # Qwen: rows past the tokenizer's ids
        assert pad == tokenizer.own_size or pad == tokenizer.pad_id
