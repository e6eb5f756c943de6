"""Beam search on each family's folder gives what ``transformers``' ``generate(num_beams=4)`` gives, with a length
penalty and each ``early_stopping``: the same best hypothesis (texts and ids) and its score, for 32 texts.

A Hugging Face folder's pipeline ranks finished hypotheses as ``generate`` does, log P / |Y| ** length_penalty
(|Y|: the generated tokens, ``</s>`` included, the decoder's start not), and stops as its heuristics stop
(``decoding.beam``, ``length_norm="hf"``); GNMT's ((5 + |Y|) / 6) ** length_penalty, our models' default, gives
other outputs for some texts of these settings. The same ``max_new_tokens`` is given to both (``generate``'s
"never" bound is its ``max_length``). The folders are ``family_folders.trained_folder``'s:
tiny models trained to copy texts of one or two words.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from family_folders import LANGUAGES, generated_with_scores, texts
from family_models import NAMES

from transformer.decoding import beam_search
from transformer.hub.generation import OUR_BEAM_DEFAULTS, beam_options, generation_settings
from transformer.pipeline import load_pretrained

pytest.importorskip("transformers")
pytestmark = pytest.mark.filterwarnings("ignore::transformer.pipeline.UnknownCharactersWarning")
SENTENCES = texts(32, seed=11, high=2)
# (length_penalty, early_stopping, max_new_tokens: generated tokens after the decoder's start, </s> included); a
# bound of 5 makes a search end there with live beams at times, which then compete with the finished hypotheses
SETTINGS = [(1.0, False, 12), (2.0, False, 12), (1.0, True, 5), (2.0, True, 5), (2.0, "never", 12), (-1.0, False, 12)]


def pipeline(folder, name: str):  # noqa: ANN001, ANN201
    src_lang, tgt_lang = LANGUAGES.get(name, (None, None))
    return load_pretrained(folder, src_lang=src_lang, tgt_lang=tgt_lang)


def largest_logit(pipe, src: torch.Tensor, hypotheses: list[list[int]]) -> float:  # noqa: ANN001
    """The largest |logit| the model gives along ``hypotheses`` (teacher-forced after the decoder's start)."""
    config = pipe.model.config
    width = 1 + max(len(h) for h in hypotheses)
    tgt = torch.full((len(hypotheses), width), config.pad_id)  # (B, 1 + T)
    tgt[:, 0] = config.bos_id
    for row, tokens in enumerate(hypotheses):
        tgt[row, 1:1 + len(tokens)] = torch.tensor(tokens)
    with torch.no_grad():
        return pipe.model(src, tgt).abs().max().item()


@pytest.mark.parametrize("name", NAMES)
def test_beam_search_equals_generate_with_a_length_penalty_and_each_early_stopping(name, trained_family_folder):
    folder = trained_family_folder(name)
    pipe = pipeline(folder, name)
    src = pipe.encode_source(SENTENCES, warn=False)  # (32, S)
    for alpha, early, bound in SETTINGS:
        options = {"length_penalty": alpha, "early_stopping": early}
        theirs, their_ids, their_scores = generated_with_scores(folder, name, SENTENCES, num_beams=4,
                                                                max_new_tokens=bound, **options)
        assert pipe.translate(SENTENCES, beam_size=4, max_new_tokens=bound, **options) == theirs, (options, bound)
        best = [result.best for result in beam_search(pipe.model, src, beam_size=4, max_len=bound, length_norm="hf",
                                                      rules=pipe.generation_rules, **options)]
        assert [list(h.tokens) for h in best] == their_ids, options
        # The same distribution as generate's (PAD included, decoding.common.excluded_pad): the scores differ by
        # float32 rounding only. A score sums at most `bound` log-probs, each a float32 log-softmax of logits that
        # the two networks compute in a different order: a few ulp of the largest logit. 4 ulp of the largest logit
        # along the best hypotheses, per token, summed over the tokens, bounds the difference.
        rounding = bound * 4 * largest_logit(pipe, src, their_ids) * torch.finfo(torch.float32).eps
        assert [h.score for h in best] == pytest.approx(their_scores, rel=0, abs=rounding), options


def test_the_folders_own_settings_are_the_pipelines_defaults(trained_family_folder, tmp_path):
    """``translate(beam_size=4)`` alone takes the folder's length_penalty and early_stopping, as ``generate`` does;
    our own checkpoints keep GNMT's (0.6, no early stopping)."""
    folder = tmp_path / "t5-settings"
    shutil.copytree(trained_family_folder("t5"), folder)
    settings = json.loads((folder / "generation_config.json").read_text(encoding="utf-8"))
    settings.update(length_penalty=2.0, early_stopping=True, num_beams=4)
    (folder / "generation_config.json").write_text(json.dumps(settings), encoding="utf-8")
    pipe = pipeline(folder, "t5")
    assert beam_options(pipe.meta) == {"length_penalty": 2.0, "early_stopping": True, "length_norm": "hf"}
    theirs, _, _ = generated_with_scores(folder, "t5", SENTENCES, max_new_tokens=12)  # num_beams=4: its own
    assert pipe.translate(SENTENCES, beam_size=4, max_new_tokens=12) == theirs
    gnmt = pipe.translate(SENTENCES, beam_size=4, max_new_tokens=12, **OUR_BEAM_DEFAULTS)
    assert sum(a != b for a, b in zip(gnmt, theirs, strict=True)) >= 3  # our models' defaults would differ
    assert beam_options({"task": "reverse"}) == OUR_BEAM_DEFAULTS
    assert beam_options({"task": "reverse"}, length_penalty=1.0, early_stopping=None)["length_penalty"] == 1.0


@pytest.mark.parametrize(("written", "read"), [("never", "never"), (True, True), ("sometimes", False), (1, False)])
def test_a_folders_early_stopping_is_read_as_generate_reads_it(written, read) -> None:
    generation_config = {"early_stopping": written, "length_penalty": 2}  # generation_config.json's object
    meta = {"source": "huggingface", "generation": generation_settings(generation_config, {})}
    assert beam_options(meta) == {"length_penalty": 2.0, "early_stopping": read, "length_norm": "hf"}
    assert beam_options(meta, early_stopping=False, length_norm="gnmt")["early_stopping"] is False
    with pytest.raises(TypeError, match="num_beams"):
        beam_options(meta, num_beams=4)
