"""Our Transformer against torch.nn.Transformer with identical weights (interop.to_torch).

In float64 the logits at real positions, every per-head attention map and every gradient
agree to 1e-10; in float32 they pass torch.testing.assert_close.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from transformer import Trace, Transformer, TransformerConfig
from transformer.network.interop import from_torch, parameter_pairs, to_torch

PAD = 0
# (kind, layer attribute on nn.Transformer's layer) for the three kinds of attention
REFERENCE_ATTENTION = {"encoder": "self_attn", "decoder": "self_attn", "cross": "multihead_attn"}


def make_config(norm_first: bool, tie: bool = False) -> TransformerConfig:
    vocab = 17
    return TransformerConfig(
        src_vocab_size=vocab, tgt_vocab_size=vocab if tie else 19, d_model=24, n_heads=4,
        n_encoder_layers=2, n_decoder_layers=3, d_ff=40, dropout=0.0, max_len=32,
        pad_id=PAD, norm_first=norm_first, tying="all" if tie else "none",
    )


def make_batch(config: TransformerConfig, padded: bool, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(1, config.src_vocab_size, (3, 9), generator=g)
    tgt = torch.randint(1, config.tgt_vocab_size, (3, 7), generator=g)
    if padded:  # different lengths per sentence, padding at the end as a batch has it
        src[0, 6:] = PAD
        src[2, 2:] = PAD
        tgt[1, 3:] = PAD
        tgt[2, 5:] = PAD
    return src, tgt


def make_pair(config: TransformerConfig, dtype: torch.dtype, seed: int = 0) -> tuple[Transformer, nn.Module]:
    torch.manual_seed(seed)
    model = Transformer(config).to(dtype)
    with torch.no_grad():  # non-trivial LayerNorm and bias values, so that every parameter matters
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    return model, to_torch(model)


def reference_attention_maps(
    ref: nn.Module, src: torch.Tensor, tgt: torch.Tensor
) -> dict[tuple[str, int], torch.Tensor]:
    """Per-head weights of every nn.MultiheadAttention in the reference, recomputed on the inputs and
    masks that the reference's own forward passed to it, with need_weights=True, average_attn_weights=False."""
    calls: dict[tuple[str, int], tuple] = {}
    hooks = []
    stacks = {"encoder": ref.transformer.encoder.layers, "decoder": ref.transformer.decoder.layers}
    for kind, attribute in REFERENCE_ATTENTION.items():
        layers = stacks["encoder" if kind == "encoder" else "decoder"]
        for index, layer in enumerate(layers):
            def hook(module, args, kwargs, key=(kind, index)):
                calls[key] = (module, args, kwargs)
            hooks.append(getattr(layer, attribute).register_forward_pre_hook(hook, with_kwargs=True))
    try:
        ref(src, tgt)
    finally:
        for h in hooks:
            h.remove()
    maps = {}
    for key, (module, args, kwargs) in calls.items():
        kwargs = {**kwargs, "need_weights": True, "average_attn_weights": False}
        kwargs.pop("is_causal", None)  # is_causal is only a hint; the explicit attn_mask is what counts
        _, weights = module(*args, **kwargs)
        maps[key] = weights  # (B, H, T_q, T_k)
    return maps


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
@pytest.mark.parametrize("padded", [False, True], ids=["no-padding", "padding"])
def test_float64_logits_attention_and_gradients_match_torch(norm_first: bool, padded: bool) -> None:
    config = make_config(norm_first)
    model, ref = make_pair(config, torch.float64)
    src, tgt = make_batch(config, padded)
    real = tgt != PAD  # positions whose logits a loss would use

    trace = Trace()
    ours = model(src, tgt, trace=trace)
    theirs = ref(src, tgt)
    assert (ours - theirs)[real].abs().max() < 1e-10

    maps = reference_attention_maps(ref, src, tgt)
    assert len(maps) == config.n_encoder_layers + 2 * config.n_decoder_layers
    for (kind, layer), expected in maps.items():
        got = trace.attention(kind, layer)
        assert got.shape == expected.shape
        assert (got - expected).abs().max() < 1e-10, f"{kind} layer {layer}"

    # One backward through a loss over the real positions only; every gradient must agree.
    weights = torch.randn(ours.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    (ours * weights)[real].sum().backward()
    (theirs * weights)[real].sum().backward()
    pairs = parameter_pairs(model, ref, get=lambda p: p.grad)
    assert len(pairs) > 0
    for ours_grad, theirs_grad in pairs:
        assert ours_grad is not None and theirs_grad is not None
        assert (ours_grad - theirs_grad).abs().max() < 1e-10


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_float32_matches_torch(norm_first: bool) -> None:
    config = make_config(norm_first)
    model, ref = make_pair(config, torch.float32)
    src, tgt = make_batch(config, padded=True)
    real = tgt != PAD
    ours, theirs = model(src, tgt), ref(src, tgt)
    torch.testing.assert_close(ours[real], theirs[real])
    ours[real].sum().backward()
    theirs[real].sum().backward()
    for ours_grad, theirs_grad in parameter_pairs(model, ref, get=lambda p: p.grad):
        torch.testing.assert_close(ours_grad, theirs_grad)


def test_tied_embeddings_match_torch() -> None:
    config = make_config(norm_first=False, tie=True)
    model, ref = make_pair(config, torch.float64)
    assert model.generator.weight is model.src_embed.weight is model.tgt_embed.weight
    assert ref.generator.weight is ref.src_embed.weight is ref.tgt_embed.weight
    src, tgt = make_batch(config, padded=True)
    real = tgt != PAD
    ours, theirs = model(src, tgt), ref(src, tgt)
    assert (ours - theirs)[real].abs().max() < 1e-10
    ours[real].sum().backward()
    theirs[real].sum().backward()
    assert (model.src_embed.weight.grad - ref.src_embed.weight.grad).abs().max() < 1e-10


def test_gelu_activation_matches_torch() -> None:
    config = TransformerConfig(src_vocab_size=11, tgt_vocab_size=11, d_model=16, n_heads=2, n_layers=1,
                               d_ff=32, dropout=0.0, activation="gelu")
    model, ref = make_pair(config, torch.float64)
    src, tgt = make_batch(config, padded=False)
    assert (model(src, tgt) - ref(src, tgt)).abs().max() < 1e-10


def test_from_torch_is_the_inverse_of_to_torch() -> None:
    config = make_config(norm_first=True)
    torch.manual_seed(3)
    ref = to_torch(Transformer(config).double())
    with torch.no_grad():  # change the reference so that from_torch has something to copy
        for p in ref.parameters():
            p.add_(0.01 * torch.randn_like(p))
    model = from_torch(ref, config)
    src, tgt = make_batch(config, padded=True)
    real = tgt != PAD
    assert (model(src, tgt) - ref(src, tgt))[real].abs().max() < 1e-10


def test_to_torch_is_made_of_pytorch_modules() -> None:
    ref = to_torch(Transformer(make_config(norm_first=False)))
    assert isinstance(ref.src_embed, nn.Embedding)
    assert isinstance(ref.tgt_embed, nn.Embedding)
    assert isinstance(ref.transformer, nn.Transformer) and ref.transformer.batch_first
    assert isinstance(ref.generator, nn.Linear)


def test_a_float64_model_has_the_float64_positional_table() -> None:
    """Built in float32 and moved with .double() (how make_pair and users do it), the table is rebuilt in
    float64, not cast up from float32 (which was 4e-8 off in the logits), and follows the model back down."""
    from transformer.network.interop import _reference_table

    config = TransformerConfig(src_vocab_size=11, tgt_vocab_size=11, d_model=32, n_heads=2, n_layers=1,
                               d_ff=32, dropout=0.0, max_len=512)
    model = Transformer(config)
    assert model.positional.pe.dtype == torch.float32
    model = model.double()
    independent = _reference_table(512, 32)
    assert model.positional.pe.dtype == torch.float64
    assert (model.positional.pe - independent).abs().max() < 1e-12
    cast_up = independent.float().double()
    assert (cast_up - independent).abs().max() > 1e-9  # what a cast would have given
    assert model.float().positional.pe.dtype == torch.float32


def test_the_reference_keeps_padded_rows_without_touching_the_process_wide_fast_path(monkeypatch) -> None:
    """Under inference_mode (as the app runs it) torch would take the fused encoder-layer kernel, which
    computes padded rows differently; the reference avoids it per instance, and never flips the global flag."""
    def forbidden(*args):
        raise AssertionError("torch.backends.mha.set_fastpath_enabled is process-wide")

    monkeypatch.setattr(torch.backends.mha, "set_fastpath_enabled", forbidden)
    monkeypatch.setattr(torch, "_transformer_encoder_layer_fwd", forbidden)  # the fused kernels themselves
    monkeypatch.setattr(torch, "_native_multi_head_attention", forbidden)
    config = make_config(norm_first=False)
    model, ref = make_pair(config, torch.float32)
    model.eval(), ref.eval()
    src, tgt = make_batch(config, padded=True)
    assert (src == PAD).any()
    with torch.inference_mode():
        ours, theirs = model(src, tgt), ref(src, tgt)
    real = tgt != PAD
    assert (ours - theirs)[real].abs().max() < 1e-4
    assert torch.backends.mha.get_fastpath_enabled()
