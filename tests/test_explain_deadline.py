"""A costly attribution method is stoppable: ``attribute(..., progress=...)`` tells the progress between the
method's steps (batched backwards, integrated gradients' chunks of points, occlusion's forwards, value zeroing's
layers), so a ``with_deadline`` progress stops it there with ``OutOfTime`` (issue 43: "Compute gradient methods" on a
large model ran past 555 s in public mode, its 180 s budget never checked). No timing here: a fake clock moves only
when the work tells its progress."""

from __future__ import annotations

import pytest
import torch
from explain_helpers import batch, tiny_model

import transformer.explain.occlusion as occlusion_module
from transformer.explain import REGISTRY, attribute
from transformer.explain.progress import OutOfTime, with_deadline

COSTLY = tuple(name for name, method in REGISTRY.items() if method.cost != "forward")


@pytest.fixture(scope="module")
def model():
    return tiny_model()


def test_the_costly_methods_are_the_gradient_methods_and_the_per_token_ones() -> None:
    assert set(COSTLY) == {"relevancy", "saliency", "input_x_gradient", "integrated_gradients", "occlusion",
                           "value_zeroing"}


class Ticking:
    """A clock that moves one second each time the work tells its progress (read by ``with_deadline``)."""

    def __init__(self) -> None:
        self.now, self.told = 0.0, []

    def __call__(self) -> float:
        return self.now

    def progress(self, share: float, what: str) -> None:
        self.told.append((share, what))
        self.now += 1.0


@pytest.mark.parametrize("method", COSTLY)
def test_a_costly_method_tells_its_progress_between_its_steps(model, method: str) -> None:
    """Told at the start and at least once inside the method (before a step), its share never falling."""
    clock = Ticking()
    src, tgt = batch()
    result = attribute(model, src, tgt, method, progress=clock.progress)
    assert torch.isfinite(result.source).all()
    shares = [share for share, _ in clock.told]
    assert len(shares) >= 2, clock.told  # the start, then each step: sentences, backwards, points, forwards, layers
    assert all(0.0 <= a <= b <= 1.0 for a, b in zip(shares, shares[1:], strict=False)), shares


@pytest.mark.parametrize("method", COSTLY)
def test_a_costly_method_past_its_deadline_stops_at_its_next_step(model, method: str) -> None:
    """The deadline passes after the start is told: the method raises OutOfTime at its next step, inside the work
    (the model keeps no hook or edit: it answers as before)."""
    clock = Ticking()
    src, tgt = batch()
    before = model(src, tgt[:, :-1])
    with pytest.raises(OutOfTime, match="cut after 0 s"):
        attribute(model, src, tgt, method, progress=with_deadline(clock.progress, 0.5, clock=clock))
    assert len(clock.told) == 1  # told once (the start); the next step found the deadline past
    torch.testing.assert_close(model(src, tgt[:, :-1]), before, rtol=0, atol=0)


def test_integrated_gradients_is_stopped_between_chunks_of_points(model) -> None:
    """The adaptive rule's many forwards and backwards each come after a check: a deadline of a few steps cuts it
    part-way, not at the end."""
    clock = Ticking()
    src, tgt = batch()
    full = Ticking()
    attribute(model, src, tgt, "integrated_gradients", internal_batch_size=2, progress=full.progress)
    assert len(full.told) > 6
    with pytest.raises(OutOfTime):
        attribute(model, src, tgt, "integrated_gradients", internal_batch_size=2,
                  progress=with_deadline(clock.progress, 4.5, clock=clock))
    assert len(clock.told) == 5 < len(full.told)


def test_occlusion_in_chunks_of_copies_equals_one_forward(model, monkeypatch) -> None:
    """Occlusion runs its copies a chunk to a forward (a deadline is checked between): the same drops as all copies
    in one forward, to float64 rounding of the same sums in another batch (torch's default float64 tolerance)."""
    src, tgt = batch()
    whole = attribute(model, src, tgt, "occlusion").source
    monkeypatch.setattr(occlusion_module, "COPIES_PER_FORWARD", 3)
    clock = Ticking()
    chunked = attribute(model, src, tgt, "occlusion", progress=clock.progress).source
    torch.testing.assert_close(chunked, whole)
    assert len(clock.told) == 1 + 4  # the start, then 10 copies (2 sentences x 5 tokens) 3 to a forward


def test_activation_patching_is_stopped_between_its_forwards() -> None:
    """Activation patching runs a forward per ``chunk_size`` patched copies (thousands at the largest sizes a model
    may have): each is told first, so a deadline stops it part-way."""
    from transformer.explain import activation_patching

    CLEAN, CORRUPT = torch.tensor([[5, 6, 7, 8, 3]]), torch.tensor([[9, 6, 4, 8, 3]])  # noqa: N806
    TGT, POSITION = torch.tensor([[2, 8, 7, 6, 5, 3]]), 2  # noqa: N806  (as in test_explain_patching.py)
    full = Ticking()
    activation_patching(tiny_model(), CLEAN, CORRUPT, TGT, POSITION, chunk_size=7, progress=full.progress)
    assert len(full.told) == 12  # 80 sites, 7 a forward
    clock = Ticking()
    with pytest.raises(OutOfTime):
        activation_patching(tiny_model(), CLEAN, CORRUPT, TGT, POSITION, chunk_size=7,
                            progress=with_deadline(clock.progress, 2.5, clock=clock))
    assert len(clock.told) == 3
