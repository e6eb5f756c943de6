"""T5 / BART / mBART-50 / NLLB folders open end to end through their real mappings (``hub.families``).

Each folder is what ``save_pretrained`` writes for a tiny ``transformers`` model of the family (random weights,
``family_folders``) with the family's tokenizer and a generation config of its own; the tests check everything
around the network (which tests/test_families_folders.py and test_families_generate.py compare with
``transformers``): the dispatch, the tokenizers, the language codes, the decoding rules, dtype, the memory check
and the caps.
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path

import pytest
import torch
from family_folders import random_folder
from family_helpers import SENTENCES

from transformer.checkpoints.checkpoint import CheckpointError
from transformer.checkpoints.weights_header import caps_problem
from transformer.decoding.batch import decode_batch
from transformer.hub import memory
from transformer.network.config import TransformerConfig
from transformer.network.model import Transformer
from transformer.pipeline import clean_text, load_pretrained

FAMILY = {"t5": "t5", "bart": "bart", "mbart50": "mbart", "nllb": "m2m_100"}  # tokenizer layout -> model_type
NAME = {"t5": "t5", "bart": "bart", "mbart50": "mbart", "nllb": "m2m100"}  # -> family_models' name
IDS = {"t5": (0, 1, 0), "bart": (1, 2, 2), "mbart50": (1, 2, 2), "nllb": (1, 2, 2)}  # pad, eos, decoder start
GENERATION = {"t5": {"decoder_start_token_id": 0, "max_length": 129},
              "bart": {"forced_bos_token_id": 0, "forced_eos_token_id": 2, "max_length": 9, "num_beams": 4},
              "mbart50": {"forced_eos_token_id": 2, "max_length": 9, "num_beams": 5, "bad_words_ids": [[5], [7, 8]]},
              "nllb": {"max_length": 9}}


def make_folder(root: Path, family_tokenizers: dict[str, Path], layout: str) -> Path:
    """A folder of ``layout``'s family as ``save_pretrained`` writes it, with ``GENERATION[layout]``."""
    folder, _ = random_folder(NAME[layout], family_tokenizers, root, dtype=torch.float32, **GENERATION[layout])
    return folder


def reference(folder: Path, **options):
    from transformers import AutoTokenizer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return AutoTokenizer.from_pretrained(folder, **options)


@pytest.mark.parametrize("layout", list(FAMILY))
def test_a_family_folder_opens_and_reads_its_sources_as_transformers(family_tokenizers, tmp_path, layout):
    folder = make_folder(tmp_path, family_tokenizers, layout)
    pipe = load_pretrained(folder)
    assert pipe.meta["model_type"] == FAMILY[layout] and pipe.config.bos_id == IDS[layout][2]
    assert next(pipe.model.parameters()).dtype == torch.float32
    src_lang = {"mbart50": "en_XX", "nllb": "eng_Latn"}.get(layout)
    theirs = reference(folder, **({"src_lang": src_lang} if src_lang else {}))
    for text in SENTENCES:
        if text.strip():
            assert pipe.source_ids(text, warn=False)[1] == theirs(clean_text(text))["input_ids"], text
    assert pipe.meta["max_output_len"] == min(GENERATION[layout]["max_length"] - 1,  # max_length counts the start
                                              pipe.config.max_len)
    assert pipe.meta["num_beams"] == GENERATION[layout].get("num_beams", 1)


@pytest.mark.parametrize("layout", ["mbart50", "nllb"])
def test_language_codes_default_set_and_forced(family_tokenizers, tmp_path, layout):
    folder = make_folder(tmp_path, family_tokenizers, layout)
    pipe = load_pretrained(folder)
    english, german, french = {"mbart50": ("en_XX", "de_DE", "fr_XX"), "nllb": ("eng_Latn", "deu_Latn",
                                                                                  "fra_Latn")}[layout]
    assert (pipe.src_lang, pipe.tgt_lang) == (english, german) and french in pipe.language_codes
    codes = pipe.tgt_tokenizer.lang_code_ids
    for rows in decoded_by_every_strategy(pipe):
        assert all(row[0] == codes[german] for row in rows)
    pipe.tgt_lang = french
    assert pipe.trace("the house is small.").output_ids[0] == codes[french]
    pipe.src_lang = french
    assert pipe.source_ids("the house")[1][0] == codes[french]
    with pytest.raises(ValueError, match=f"unknown target language code 'xx'; choose one of .*{german}"):
        pipe.tgt_lang = "xx"
    with pytest.raises(ValueError, match="unknown source language code"):
        load_pretrained(folder, src_lang="english")
    other = load_pretrained(folder, src_lang=french, tgt_lang=english)
    assert (other.src_lang, other.tgt_lang) == (french, english)


def decoded_by_every_strategy(pipe, max_len: int = 5) -> list[list[list[int]]]:
    """The output ids (EOS cut) of two sources by greedy decoding, beam search and sampling, with the pipeline's
    decoding rules."""
    src = pipe.encode_source(["the house is small.", "hello world"], warn=False)
    found = []
    for strategy in ({}, {"beam_size": 2}, {"temperature": 0.7, "seed": 1}):
        outputs, _ = decode_batch(pipe.model, src, beam_size=strategy.get("beam_size"), length_penalty=0.6,
                                  early_stopping=False, temperature=strategy.get("temperature"), top_k=None,
                                  top_p=None, seed=strategy.get("seed"), max_len=max_len, ablate=None,
                                  time_budget=None, rules=pipe.generation_rules)
        found.append(outputs)
    return found


def test_bart_rules_in_every_strategy(family_tokenizers, tmp_path):
    pipe = load_pretrained(make_folder(tmp_path, family_tokenizers, "bart"))
    rules = pipe.generation_rules
    assert (rules.forced_bos_id, rules.forced_eos_id) == (0, 2)
    for rows in decoded_by_every_strategy(pipe):
        for row in rows:
            assert row[0] == 0 and len(row) <= 4  # <s> forced first; </s> forced by the 5th token at the latest
    assert pipe.translate("the house", max_new_tokens=3) == pipe.translate("the house", max_len=3)
    with pytest.raises(ValueError, match="not both"):
        pipe.translate("the house", max_len=3, max_new_tokens=4)


def test_mbart_bad_words_are_never_generated(family_tokenizers, tmp_path):
    pipe = load_pretrained(make_folder(tmp_path, family_tokenizers, "mbart50"))
    for text in SENTENCES[:8]:
        if text.strip():
            ids = pipe.trace(text, warn=False).output_ids
            assert 5 not in ids and (7, 8) not in set(zip(ids, ids[1:], strict=False))


def test_half_weights(family_tokenizers, tmp_path):
    folder = make_folder(tmp_path, family_tokenizers, "nllb")
    for dtype in (torch.float16, torch.bfloat16):
        pipe = load_pretrained(folder, dtype=dtype)
        assert {p.dtype for p in pipe.model.parameters()} == {dtype}
        assert isinstance(pipe.translate("the house"), str)
    with pytest.raises(CheckpointError, match="dtype torch.int8"):
        load_pretrained(folder, dtype=torch.int8)


def test_a_model_that_would_not_fit_is_refused_with_the_figures(family_tokenizers, tmp_path, monkeypatch):
    folder = make_folder(tmp_path, family_tokenizers, "nllb")
    built = []
    monkeypatch.setattr(memory, "available_memory", lambda: 1000)
    monkeypatch.setattr(Transformer, "__init__", lambda *a, **k: built.append(1))
    with pytest.raises(CheckpointError, match=r"parameters: in float32 it needs about .* GB .* but 0.0 GB is free"):
        load_pretrained(folder)
    assert built == []


def test_memory_reads_meminfo(tmp_path, monkeypatch):
    (tmp_path / "meminfo").write_text("MemTotal: 100 kB\nMemAvailable:   2048 kB\n", encoding="ascii")
    monkeypatch.setattr(memory, "MEMINFO", tmp_path / "meminfo")
    monkeypatch.setitem(__import__("sys").modules, "psutil", None)
    assert memory.available_memory() == 2048 * 1024
    assert memory.memory_problem(100, torch.float32, available=800) is None
    assert "needs about" in memory.memory_problem(101, torch.float32, available=800)


@pytest.mark.parametrize("layout", list(FAMILY))
def test_each_family_opens_through_its_own_mapping(family_tokenizers, tmp_path, layout):
    """No stand-in: the family's config_of / expected_shapes / weights_of read the folder's config and tensors."""
    folder = make_folder(tmp_path, family_tokenizers, layout)
    pipe = load_pretrained(folder)
    document = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    assert (pipe.config.pad_id, pipe.config.eos_id, pipe.config.bos_id) == IDS[layout]
    assert pipe.config.tgt_vocab_size == document["vocab_size"] and pipe.config.d_model == document["d_model"]
    assert pipe.config.positional == {"t5": "relative", "nllb": "fairseq"}.get(layout, "learned")
    assert isinstance(pipe.translate("the house", max_new_tokens=4), str)


@pytest.mark.parametrize(("layout", "tokenizer_class"), [("mbart50", "MBartTokenizer"), ("nllb", "M2M100Tokenizer")])
def test_another_tokenizer_of_the_family_is_refused(family_tokenizers, tmp_path, layout, tokenizer_class):
    folder = make_folder(tmp_path, family_tokenizers, layout)
    settings = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    (folder / "tokenizer_config.json").write_text(json.dumps({**settings, "tokenizer_class": tokenizer_class}))
    with pytest.raises(CheckpointError, match=f"its tokenizer is {tokenizer_class}"):
        load_pretrained(folder)
    (folder / "tokenizer.json").unlink()
    (folder / "tokenizer_config.json").write_text(json.dumps(settings))
    with pytest.raises(CheckpointError, match="needs tokenizer.json"):
        load_pretrained(folder)


def test_the_caps_admit_nllb_600m_and_mbart_50():
    def config(vocab: int) -> TransformerConfig:
        return TransformerConfig(vocab, vocab, d_model=1024, n_heads=16, n_layers=12, d_ff=4096, max_len=1024,
                                 tying="all")
    assert caps_problem(config(256_206)) is None  # NLLB-200 distilled 600M: 615 M parameters
    assert caps_problem(config(250_054)) is None  # mBART-50: 611 M
    assert "parameters" in caps_problem(dataclasses.replace(config(256_206), n_layers=48, n_encoder_layers=48,
                                                            n_decoder_layers=48))  # 1.7 B: past the cap


@pytest.mark.parametrize("layout", list(FAMILY))
def test_the_teacher_forced_target_is_what_generate_starts_with_and_transformers_labels(family_tokenizers,
                                                                                        tmp_path, layout):
    """``target_ids``: the decoder start, then the labels ``transformers`` makes of a target text (BART ``<s>``,
    mBART-50 / NLLB the target code, then the tokens and ``</s>``); and the first ids greedy decoding writes."""
    folder = make_folder(tmp_path, family_tokenizers, layout)
    pipe = load_pretrained(folder)
    tgt_lang = {"mbart50": "fr_XX", "nllb": "fra_Latn"}.get(layout)
    view = pipe.with_languages(tgt_lang=tgt_lang) if tgt_lang else pipe
    theirs = reference(folder, **({"tgt_lang": tgt_lang} if tgt_lang else {}))
    for text in ("The house is small.", "Über 12 Straßen, 345 Häuser?"):
        assert view.target_ids(text) == [IDS[layout][2], *theirs(text_target=text)["input_ids"]], text
    output = view.trace("the house", warn=False).output_ids
    prefix = view.target_prefix
    assert [view.config.bos_id, *output][: len(prefix)] == prefix and len(prefix) == (1 if layout == "t5" else 2)


@pytest.mark.parametrize("layout", ["mbart50", "nllb"])
def test_a_language_view_shares_the_model_and_leaves_the_pipeline_alone(family_tokenizers, tmp_path,
                                                                         layout):
    pipe = load_pretrained(make_folder(tmp_path, family_tokenizers, layout))
    english, german, french = {"mbart50": ("en_XX", "de_DE", "fr_XX"), "nllb": ("eng_Latn", "deu_Latn",
                                                                                  "fra_Latn")}[layout]
    codes = pipe.tgt_tokenizer.lang_code_ids
    to_french, from_french = pipe.with_languages(english, french), pipe.with_languages(src_lang=french)
    assert (pipe.src_lang, pipe.tgt_lang) == (english, german)  # the original is unchanged
    assert to_french.model is pipe.model and to_french.src_tokenizer is pipe.src_tokenizer
    assert (from_french.src_lang, from_french.tgt_lang) == (french, german)
    assert to_french.trace("the house", warn=False).output_ids[0] == codes[french]
    assert pipe.trace("the house", warn=False).output_ids[0] == codes[german]
    assert from_french.source_ids("the house")[1][0] == codes[french] != pipe.source_ids("the house")[1][0]
    assert pipe.generation_rules.forced_bos_id == codes[german]
    with pytest.raises(ValueError, match="unknown target language code"):
        pipe.with_languages(tgt_lang="xx")
