"""No explanation hooks a module: one model serves every session of the app, and a hook on it would act on
their calls too. Methods read the trace and write through intervention sites (network/interventions.py)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from transformer import Transformer, TransformerConfig
from transformer.explain import activation_patching, attribute, residual_stream


def model_and_inputs() -> tuple[Transformer, torch.Tensor, torch.Tensor]:
    config = TransformerConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=16, n_heads=2, n_layers=1, d_ff=32,
                               dropout=0.0, tying="all")
    model = Transformer(config).eval()
    generator = torch.Generator().manual_seed(0)
    return model, torch.randint(4, 20, (1, 5), generator=generator), torch.cat(
        [torch.tensor([[1]]), torch.randint(4, 20, (1, 4), generator=generator)], dim=1)


@pytest.fixture
def hooked(monkeypatch: pytest.MonkeyPatch) -> list[nn.Module]:
    """Every module a forward hook or pre-hook is registered on, from here on."""
    modules: list[nn.Module] = []
    for name in ("register_forward_hook", "register_forward_pre_hook"):
        original = getattr(nn.Module, name)

        def record(self, *args, _original=original, **kwargs):
            modules.append(self)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(nn.Module, name, record)
    return modules


def test_no_explanation_hooks_any_module(hooked: list[nn.Module]) -> None:
    model, src, tgt = model_and_inputs()
    own = {id(m) for m in model.modules()}
    for method in ("saliency", "input_x_gradient", "integrated_gradients"):
        attribute(model, src, tgt, method)
    residual_stream(model, src, tgt)
    activation_patching(model, src, src.flip(1), tgt, position=1)
    assert not hooked, [type(m).__name__ for m in hooked]
    assert not [m for m in hooked if id(m) in own]
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())
