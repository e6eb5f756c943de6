"""The shipped models, where the issue asks for them: reverse's anti-diagonal, and IG's
convergence delta against each row's own |f(x) - f(baseline)|."""

from __future__ import annotations

import pytest
import torch

from transformer.explain import alignment_accuracy, attribute, true_alignment
from transformer.explain.gradients import within_tolerance
from transformer.pipeline import load_pretrained
from transformer.text.ids import pad, target_ids

REVERSE_INPUTS = ["abc123xyz", "hello42world", "q8w7e6r5t4", "k3j4h5g6f7d8s9"]
IG_INPUTS = {"reverse": ["abc123xyz0987qwerty1", "abcdefghij0123456789", "q0w9e8"], "dates-de": ["2026-11-21"],
             "numbers-en-de": ["forty-seven thousand"]}


def encode(pipe, texts):
    outputs = pipe.translate(texts)
    src = pad([pipe.source_ids(t)[1] for t in texts])
    tgt = pad([target_ids(pipe.tgt_tokenizer, o) for o in outputs])
    return src, tgt, outputs


@pytest.fixture(scope="module")
def reverse():
    return load_pretrained("reverse")


# rollout through every decoder layer (not only the last cross-attention, as before) also carries the first
# layer's diffuse cross-attention: 0.80 of the rows' top source token on the anti-diagonal (measured).
@pytest.mark.parametrize(("method", "share"), [("attention", 0.9), ("rollout", 0.75), ("norm", 0.9),
                                               ("relevancy", 0.7)])
def test_reverse_anti_diagonal(reverse, method, share):
    src, tgt, outputs = encode(reverse, REVERSE_INPUTS)
    assert outputs == [t[::-1] for t in REVERSE_INPUTS]
    result = attribute(reverse.model, src, tgt, method).source
    hits = total = 0
    for b, text in enumerate(REVERSE_INPUTS):
        n = len(text)
        top = result[b, :n].argmax(-1)  # every source column, </s> included; the </s> row left out
        hits += int((top == torch.arange(n - 1, -1, -1)).sum())
        total += n
    assert hits / total >= share


def test_reverse_alignment_accuracy_of_attention(reverse):
    text = "hello42world"
    src, tgt, (output,) = encode(reverse, [text])
    pieces = [*text, "</s>"]
    truth = true_alignment("reverse", text, output, pieces, [*output, "</s>"])
    accuracy = alignment_accuracy(attribute(reverse.model, src, tgt, "attention").source[0], truth)
    assert accuracy >= 0.9


@pytest.mark.parametrize("name", list(IG_INPUTS))
def test_integrated_gradients_every_row_converges_on_shipped_models(name):
    """Issue 35: at the default n_steps every row's |delta| is within 5% of its own |f(x) - f(baseline)| (plus
    the floor), not only the sentence's sum: on reverse, rows of 20-character inputs missed theirs by 17-30% at
    128 intervals while the sentence's sum was within 5%, and are refined further."""
    pipe = load_pretrained(name)
    for text in IG_INPUTS[name]:
        src, tgt, _ = encode(pipe, [text])
        result = attribute(pipe.model, src, tgt, "integrated_gradients")
        real = tgt[:, 1:] != 0
        difference = (result.source.sum(-1) - result.delta)[real]  # f(x) - f(baseline) per row, by completeness
        assert within_tolerance(result.delta[real], difference).all(), (text, (result.delta[real] / difference))


def test_integrated_gradients_128_intervals_leave_rows_off_on_reverse(reverse):
    """Why the rows above are refined past 128 intervals: there a row misses its own gap while the sentence is
    within 5% as a whole (what the rule stopped at before)."""
    src, tgt, _ = encode(reverse, ["abc123xyz0987qwerty1"])
    fixed = attribute(reverse.model, src, tgt, "integrated_gradients", n_steps=129)
    gap = fixed.source.sum(-1) - fixed.delta  # (1, T-1)
    assert not within_tolerance(fixed.delta, gap).all()
    assert fixed.delta.abs().sum() <= 0.05 * gap.abs().sum()


def anti_diagonal_hits(result, texts):
    """How many output characters (the </s> row left out) have their mirrored source character on top."""
    hits = total = 0
    for b, text in enumerate(texts):
        n = len(text)
        top = result[b, :n].argmax(-1)
        hits += int((top == torch.arange(n - 1, -1, -1)).sum())
        total += n
    return hits, total


def test_reverse_value_zeroing_of_the_last_layer_finds_the_mirrored_character(reverse):
    """The last decoder layer's own mixing reads the mirrored character (the roll-out through the encoder ends on
    </s>, its sink, instead)."""
    src, tgt, _ = encode(reverse, REVERSE_INPUTS)
    hits, total = anti_diagonal_hits(attribute(reverse.model, src, tgt, "value_zeroing", layer=-1).source,
                                     REVERSE_INPUTS)
    assert hits / total >= 0.9


def test_reverse_alti_rows_sum_to_one_or_are_undefined(reverse):
    src, tgt, _ = encode(reverse, REVERSE_INPUTS)
    real = tgt[:, 1:] != 0
    for layer in (None, 0, -1):
        result = attribute(reverse.model, src, tgt, "alti", layer=layer)
        sums = (result.source.sum(-1) + result.target.sum(-1))[real]
        defined = ~sums.isnan()
        torch.testing.assert_close(sums[defined], torch.ones_like(sums[defined]))
        undefined_rows = result.source.isnan().any(-1) | result.target.isnan().any(-1)  # (B, T-1)
        assert (undefined_rows[real] == ~defined).all()  # a row is NaN whole, or not at all
        assert not undefined_rows[~real].any()  # padding rows stay 0
