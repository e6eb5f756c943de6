"""The Masks page's batch (``ui.compute.analysis.batch``) decodes only what no page translated yet, and stops its
traced forward at the decoder's output (issue 32: at NLLB size its first visit decoded the sidebar's input a second
time, 6 s, and projected every row onto 256,206 pieces that the page never reads)."""

from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from app_helpers import assert_clean, open_page

from transformer.pipeline import load_pretrained
from ui.compute import analysis
from ui.state import settings

EOS = 3


def fresh_key() -> str:
    """A model key no cache has seen: the batch and the analyses are cached per key, process-wide."""
    return f"batch-reuse-{uuid.uuid4().hex}"


@pytest.fixture
def decodings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of sentences of each decoding the batch runs, in order."""
    sizes: list[int] = []
    real = analysis.greedy_decode

    def spy(model, src_ids, **kwargs):
        sizes.append(src_ids.size(0))
        return real(model, src_ids, **kwargs)

    monkeypatch.setattr(analysis, "greedy_decode", spy)
    return sizes


def assert_same_batch(a: analysis.BatchAnalysis, b: analysis.BatchAnalysis) -> None:
    assert torch.equal(a.src_ids, b.src_ids) and torch.equal(a.tgt_ids, b.tgt_ids)
    assert (a.src_pieces, a.tgt_pieces) == (b.src_pieces, b.tgt_pieces)
    assert (a.truncated, a.unfinished, a.output_cap, a.forced_end) == (b.truncated, b.unfinished, b.output_cap,
                                                                       b.forced_end)
    assert set(a.trace.names()) == set(b.trace.names())
    for name in a.trace.names():
        torch.testing.assert_close(a.trace[name], b.trace[name])


def test_translated_sentences_are_read_off_their_translation(tiny_checkpoint: Path, decodings: list[int]) -> None:
    pipe = load_pretrained(tiny_checkpoint)
    texts = ["abc12", "xy", "hello42"]
    fresh = analysis.batch(fresh_key(), "cpu", pipe, texts)
    assert decodings == [3]
    model = fresh_key()
    for text in ("abc12", "hello42"):
        analysis.analyse(model, "cpu", pipe, text)
    decodings.clear()
    assert_same_batch(analysis.batch(model, "cpu", pipe, texts), fresh)
    assert decodings == [1]  # "xy" alone
    analysis.analyse(model, "cpu", pipe, "xy")
    decodings.clear()
    assert_same_batch(analysis.batch(model, "cpu", pipe, texts[::-1]), analysis.batch(fresh_key(), "cpu", pipe,
                                                                                     texts[::-1]))
    assert decodings == [3]  # the fresh key's only


def test_the_batch_never_projects_onto_the_vocabulary(tiny_checkpoint: Path) -> None:
    """The page reads the masks and the attention: the generator's B x T x V logits are neither computed nor kept."""
    pipe = load_pretrained(tiny_checkpoint)
    from transformer.network.trace import Trace

    batch = analysis.batch(fresh_key(), "cpu", pipe, ["abc12", "xy"])
    full = Trace()
    with torch.inference_mode():
        pipe.model(batch.src_ids, batch.tgt_ids, trace=full)
    assert "logits" in full and "logits" not in batch.trace
    assert set(batch.trace.names()) == set(full.names()) - {"logits"}
    for name in batch.trace.names():
        torch.testing.assert_close(batch.trace[name], full[name])


@pytest.mark.parametrize("large", [False, True])
def test_a_forced_end_is_read_off_a_longer_translation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       decodings: list[int], large: bool) -> None:
    """A tiny random Marian model never says </s> and its rules force one at the bound. Large, the batch's bound
    (source + BATCH_EXTRA) lies inside each translation's: the rows are the translations' first ids, </s> forced
    last, nothing decoded. Small, the short sentence's translation stopped at its own, shorter bound: decoded."""
    pytest.importorskip("transformers")
    from marian_helpers import make_marian_folder

    import ui.compute.model_size

    pipe = load_pretrained(make_marian_folder(tmp_path / "marian"))
    if large:
        monkeypatch.setattr(ui.compute.model_size, "LARGE_MODEL", 0)
    texts = ["abc", "hello there"]
    fresh = analysis.batch(fresh_key(), "cpu", pipe, texts)
    assert fresh.forced_end and fresh.unfinished == (0, 1)
    model = fresh_key()
    for text in texts:
        analysis.analyse(model, "cpu", pipe, text)
    decodings.clear()
    assert_same_batch(analysis.batch(model, "cpu", pipe, texts), fresh)
    assert decodings == ([] if large else [1])


def result(ids: list[int], finished: bool, timed_out: bool = False) -> SimpleNamespace:
    return SimpleNamespace(output_ids=ids, finished=finished, timed_out=timed_out)


def test_batch_row_takes_what_both_decodings_share() -> None:
    row = analysis.batch_row
    assert row(result([5, 6, 7, 8], False), 4, 3, False, EOS) == [5, 6, 7]  # the batch's bound is shorter
    assert row(result([5, 6, 7, 8], False), 4, 3, True, EOS) == [5, 6, EOS]  # ... and forces </s> there
    assert row(result([5, 6], True), 9, 3, True, EOS) == [5, 6, EOS]  # said within both bounds
    assert row(result([5], True), 4, 9, True, EOS) == [5, EOS]  # said before its own, shorter bound
    assert row(result([5, 6, 7], True), 4, 9, False, EOS) == [5, 6, 7, EOS]  # said at its bound, unforced
    assert row(result([5, 6, 7], True), 4, 9, True, EOS) is None  # forced at its bound: the batch goes on
    assert row(result([5, 6, 7, 8], False), 4, 9, False, EOS) is None  # cut at its bound
    assert row(result([5], False, timed_out=True), 9, 9, False, EOS) is None  # stopped by the clock


def test_masks_after_another_page_decodes_nothing(tiny_models_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                                  decodings: list[int]) -> None:
    """A session that opened Tokenization (the shared translation of its input) and then Masks, whose batch is
    that input: the Masks page decodes nothing of its own."""
    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(tiny_models_dir))
    text = "cab21"  # a text no other test's batch holds (the batches are cached process-wide)
    at = open_page("2_tokenization", text, mask_batch=text)
    assert_clean(at)
    at.switch_page("pages/8_masks.py").run()
    assert_clean(at)
    assert at.title[0].value == "Masks" and len(at.selectbox(key="mask_row").options) == 1
    assert decodings == []
    at.text_area(key="mask_batch").set_value(f"{text}\nab").run()
    assert_clean(at)
    assert decodings == [1]  # "ab" only
