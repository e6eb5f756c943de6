"""Every explanation method, head statistic and decoding strategy on a Marian model, whose special ids differ
from ours (eos 0, unk 1, pad = the decoder's start = the last id): rows of padding stay empty, real rows do
not, and a sentence explained in a padded batch gets what it gets alone."""

from __future__ import annotations

import pytest
import torch
from marian_helpers import make_marian_folder

from transformer import load_pretrained
from transformer.explain import METHODS, activation_patching, attribute, head_summary, logit_lens, pruning_curve
from transformer.text.ids import pad, target_ids

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def pipe(tmp_path_factory):
    pipe = load_pretrained(make_marian_folder(tmp_path_factory.mktemp("m") / "marian"))
    pipe.model.double()
    return pipe


def ids(pipe, pairs):
    """Source and target ids of (source, target) pairs, padded with the model's pad id."""
    p = pipe.config.pad_id
    return (pad([pipe.source_ids(s, warn=False)[1] for s, _ in pairs], pad_id=p),
            pad([target_ids(pipe.tgt_tokenizer, t) for _, t in pairs], pad_id=p))


PAIRS = [("abc12xyz", "zyx21cba"), ("q1", "1q"), ("hello42", "24olleh")]


def test_special_ids_are_marians(pipe):
    c = pipe.config
    assert (c.eos_id, c.unk_id, c.bos_id) == (0, 1, c.pad_id) and c.pad_id == c.tgt_vocab_size - 1
    src, tgt = ids(pipe, PAIRS)
    assert (tgt[:, 0] == c.pad_id).all() and (src[:, -1] != c.eos_id).any()  # the start id is the pad id


@pytest.mark.parametrize("method", METHODS)
def test_every_method_on_a_padded_batch_equals_each_sentence_alone(pipe, method):
    src, tgt = ids(pipe, PAIRS)
    options = {"n_steps": 16} if method == "integrated_gradients" else {}
    batched = attribute(pipe.model, src, tgt, method, **options)
    assert torch.isfinite(batched.source).all()
    for b, pair in enumerate(PAIRS):
        s, t = ids(pipe, [pair])
        alone = attribute(pipe.model, s, t, method, **options)
        rows, columns = t.size(1) - 1, s.size(1)
        torch.testing.assert_close(batched.source[b, :rows, :columns], alone.source[0], atol=1e-8, rtol=1e-6)
        assert (batched.source[b, rows:] == 0).all() and (batched.source[b, :, columns:] == 0).all()
        assert alone.source[0].abs().sum(-1).gt(0).all()  # every real row explains something
        if alone.target is not None:  # the start token (the pad id) is a real column of the prefix
            assert alone.target[0, :, 0].abs().sum() > 0


def test_logit_lens_and_head_statistics_run_on_marian_ids(pipe):
    src, tgt = ids(pipe, PAIRS)
    lens = logit_lens(pipe.model, src, tgt)
    assert lens.shape[:3] == (pipe.config.n_decoder_layers, 3, tgt.size(1) - 1) and torch.isfinite(lens).all()
    for importance, column in (("ablation", "importance"), ("gradient", "importance_gradient")):
        summary = head_summary(pipe.model, src, tgt, importance=importance)
        assert summary[["entropy", column, "special"]].notna().all().all()
        decoder = summary[summary.kind == "decoder"]
        assert ((decoder.special >= 0) & (decoder.special <= 1)).all()  # the weight on the start token
    curve = pruning_curve(pipe.model, src, tgt, summary, by="gradient")
    assert curve.exact_match.between(0, 1).all()


def test_patching_and_decoding_strategies(pipe):
    clean, corrupt = (torch.tensor([pipe.source_ids(t, warn=False)[1]]) for t in ("abc12xyz", "abd12xyz"))
    _, tgt = ids(pipe, [PAIRS[0]])
    frame = activation_patching(pipe.model, clean, corrupt, tgt, position=1)
    assert len(frame) and frame.effect.notna().all()
    texts = [s for s, _ in PAIRS]
    greedy = pipe.translate(texts, max_len=12)
    assert pipe.translate(texts, beam_size=1, max_len=12) == greedy  # beam 1 is greedy
    assert len(pipe.translate(texts, beam_size=3, max_len=12)) == 3
    assert pipe.translate(texts, temperature=0.7, seed=3, max_len=12) == pipe.translate(texts, temperature=0.7,
                                                                                          seed=3, max_len=12)
    traced = pipe.trace("abc12xyz", max_len=12)
    assert traced.decoder_ids[0] == pipe.config.pad_id and pipe.config.pad_id not in traced.output_ids
