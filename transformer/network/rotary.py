"""Rotary position embeddings (RoPE: Su et al. 2021, "RoFormer: Enhanced Transformer with Rotary Position
Embedding"), as Llama, Mistral, Qwen and Gemma use them.

Nothing is added to the embeddings. Instead each head's query and key at position m are turned, plane by plane:
dimensions i and i + d_k/2 (the "rotate half" layout of GPT-NeoX and ``transformers``' Llama) form a plane turned
by the angle m * theta_i,

    theta_i = rope_theta^(-2i / d_k),   i = 0 .. d_k/2 - 1
    RoPE(x, m) = x * cos(m theta) + rotate_half(x) * sin(m theta),    rotate_half(x) = (-x[d_k/2:], x[:d_k/2])

so that the score q_m . k_n depends on the positions only through m - n (section 3.4.2 of the paper).

Scalings for a context longer than the one trained (``rope_scaling``):

- ``"linear"`` (Chen et al. 2023, "Extending Context Window of Large Language Models via Positional
  Interpolation"): every theta_i divided by ``rope_factor``, i.e. the positions squeezed;
- ``"llama3"`` (Llama 3.1): by wavelength lambda_i = 2 pi / theta_i against the original context L: kept where
  lambda_i < L / high_freq_factor, divided by the factor where lambda_i > L / low_freq_factor, and in between
  s theta_i + (1 - s) theta_i / factor with s = (L / lambda_i - low) / (high - low).

Gemma-3 gives its sliding-window layers a base of their own (``rope_local_theta``), unscaled. Frequencies,
angles, cosines and sines are computed in float32 with the very operations of ``transformers``'
``LlamaRotaryEmbedding`` (the models were trained with those values), then cast to the model's dtype.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def inverse_frequencies(d_k: int, theta: float, scaling: str = "default", factor: float = 1.0,
                        low_freq_factor: float = 1.0, high_freq_factor: float = 4.0,
                        original_max_len: int = 8192) -> Tensor:
    """theta_i of the module docstring, scaled: (d_k / 2,) float32."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, d_k, 2, dtype=torch.int64).to(dtype=torch.float) / d_k))
    if scaling == "linear":
        return inv_freq / factor
    if scaling == "llama3":
        low_wavelength, high_wavelength = original_max_len / low_freq_factor, original_max_len / high_freq_factor
        wavelength = 2 * math.pi / inv_freq
        scaled = torch.where(wavelength > low_wavelength, inv_freq / factor, inv_freq)
        smooth = (original_max_len / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelength < high_wavelength) * ~(wavelength > low_wavelength)
        return torch.where(medium, smoothed, scaled)
    return inv_freq


def rotate_half(x: Tensor) -> Tensor:
    """(x_1, x_2) -> (-x_2, x_1), the halves of the last dimension: a quarter turn of every plane."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """RoPE(x, m): x (B, H, L, d_k), cos and sin (B|1, L, d_k) of the positions -> (B, H, L, d_k)."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # (B|1, 1, L, d_k): the same turn for every head
    return (x * cos) + (rotate_half(x) * sin)


class RotaryEmbedding(nn.Module):
    """The angles of one base and scaling: positions -> (cos, sin), each (B|1, L, d_k). No parameters."""

    def __init__(self, d_k: int, theta: float, scaling: str = "default", factor: float = 1.0,
                 low_freq_factor: float = 1.0, high_freq_factor: float = 4.0, original_max_len: int = 8192) -> None:
        super().__init__()
        self.settings = (d_k, theta, scaling, factor, low_freq_factor, high_freq_factor, original_max_len)
        # Not a parameter and not saved: a pure function of the config, kept in float32 (_apply).
        self.register_buffer("inv_freq", inverse_frequencies(*self.settings), persistent=False)

    def _apply(self, fn, recurse: bool = True):  # noqa: ANN001, ANN202  (nn.Module's own signature)
        """``.double()``, ``.half()`` cast buffers; the frequencies stay the float32 values (module docstring)."""
        super()._apply(fn, recurse)
        self.inv_freq = inverse_frequencies(*self.settings).to(self.inv_freq.device)
        return self

    def forward(self, positions: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        """positions (B|1, L) int64 -> cos, sin (B|1, L, d_k) in ``dtype``."""
        angles = positions[..., None].float() * self.inv_freq.float()  # (B|1, L, d_k / 2): m theta_i
        angles = torch.cat((angles, angles), dim=-1)  # (B|1, L, d_k): plane i is dimensions i and i + d_k / 2
        return angles.cos().to(dtype), angles.sin().to(dtype)
