"""Each family decodes from its folder as ``generate()`` does: a tiny model trained briefly to copy short texts
(``family_folders.trained_folder``, so that its outputs end), saved by ``save_pretrained``, opened by
``load_pretrained``. Greedy translations of 32 texts, and their ids, equal ``generate(num_beams=1,
do_sample=False)``'s with the folder's generation config (the target language's code forced for mBART-50 and
NLLB); beam search of 4 equals ``generate(num_beams=4)`` (length_penalty 0, where both rank by the summed
log-probability); a folder asking for ``no_repeat_ngram_size`` and ``min_length`` decodes as ``generate`` does.
Then every attribution method, ``head_summary``, the pruning curve and activation patching run on each
folder-loaded pipeline (a smoke test: the methods' own references are tests/test_explain_*.py).
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from family_folders import LANGUAGES, generated, texts
from family_models import NAMES

from transformer.explain import METHODS, activation_patching, attribute, head_summary, pruning_curve
from transformer.pipeline import load_pretrained
from transformer.text.ids import pad

pytest.importorskip("transformers")
pytestmark = pytest.mark.filterwarnings("ignore::transformer.pipeline.UnknownCharactersWarning")  # 'δ' of Ελλάδα
SENTENCES = texts(32, seed=11, high=2)


def pipeline(folder, name: str):  # noqa: ANN001, ANN201
    src_lang, tgt_lang = LANGUAGES.get(name, (None, None))
    return load_pretrained(folder, src_lang=src_lang, tgt_lang=tgt_lang)


@pytest.mark.parametrize("name", NAMES)
def test_greedy_translations_and_ids_equal_generate(name, trained_family_folder) -> None:
    folder = trained_family_folder(name)
    pipe = pipeline(folder, name)
    theirs, their_ids = generated(folder, name, SENTENCES, num_beams=1)
    assert pipe.translate(SENTENCES) == theirs
    ours = [pipe.trace(text, warn=False) for text in SENTENCES]
    assert [trace.output_ids for trace in ours] == their_ids
    assert all(trace.finished for trace in ours)  # every output ended, within both bounds
    assert len(set(theirs)) > 20  # the outputs differ from text to text


@pytest.mark.parametrize("name", NAMES)
def test_beam_search_equals_generate(name, trained_family_folder) -> None:
    folder = trained_family_folder(name)
    sentences = SENTENCES[:8]
    theirs, _ = generated(folder, name, sentences, num_beams=4, length_penalty=0.0)
    assert pipeline(folder, name).translate(sentences, beam_size=4, length_penalty=0.0) == theirs


def test_no_repeat_ngram_and_min_length_of_a_folder_decode_as_generate(trained_family_folder, tmp_path) -> None:
    folder = tmp_path / "bart-rules"
    shutil.copytree(trained_family_folder("bart"), folder)
    settings = json.loads((folder / "generation_config.json").read_text(encoding="utf-8"))
    settings.update(no_repeat_ngram_size=2, min_length=6)  # no pair of pieces twice, 5 tokens at least before </s>
    (folder / "generation_config.json").write_text(json.dumps(settings), encoding="utf-8")
    pipe = pipeline(folder, "bart")
    assert (pipe.generation_rules.no_repeat_ngram_size, pipe.generation_rules.min_length) == (2, 6)
    theirs, their_ids = generated(folder, "bart", SENTENCES, num_beams=1)
    assert [pipe.trace(text, warn=False).output_ids for text in SENTENCES] == their_ids
    assert pipe.translate(SENTENCES) == theirs
    assert theirs != generated(trained_family_folder("bart"), "bart", SENTENCES, num_beams=1)[0]  # the rules bite
    assert pipe.translate(SENTENCES[:8], beam_size=4, length_penalty=0.0) == generated(
        folder, "bart", SENTENCES[:8], num_beams=4, length_penalty=0.0)[0]


@pytest.mark.parametrize("name", NAMES)
def test_every_method_head_summary_pruning_and_patching_run_on_each_folder(name, trained_family_folder) -> None:
    pipe = pipeline(trained_family_folder(name), name)
    texts_ = ["the house", "hello world"]
    src = pipe.encode_source(texts_, warn=False)  # (2, S)
    tgt = pad([[pipe.config.bos_id, *pipe.trace(text, warn=False).output_ids, pipe.config.eos_id]
               for text in texts_], pipe.device, pipe.config.pad_id)  # (2, T)
    for method in METHODS:
        result = attribute(pipe.model, src, tgt, method)
        assert result.source.shape == (2, tgt.size(1) - 1, src.size(1)), method
        assert torch.isfinite(result.source).all() or method == "alti", method  # ALTI marks undefined rows NaN
    summary = head_summary(pipe.model, src, tgt)
    assert len(summary) == 3 * 2 * (4 if name.startswith("t5") else 2)  # kinds x layers x heads
    assert summary["importance"].notna().all()
    curve = pruning_curve(pipe.model, src, tgt, summary)
    assert len(curve) == len(summary) + 1
    corrupt = src[:1].clone()
    corrupt[0, -2] = 5  # another piece before </s>
    patched = activation_patching(pipe.model, src[:1], corrupt, tgt[:1], position=0)
    assert {"layer_output", "head"} <= set(patched["component"])
