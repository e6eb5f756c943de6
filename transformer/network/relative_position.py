"""T5's relative position bias (Raffel et al. 2020, "Exploring the Limits of Transfer Learning", section 2.1;
the bucketing of Mesh TensorFlow, as ``transformers``' ``T5Attention`` computes it).

T5 adds no positions to the embeddings. Instead each head adds a learned scalar to every score, chosen by the
distance from query i to key j (j - i), put into one of ``relative_buckets`` buckets: exact distances up to
half the buckets, then logarithmically wider ones up to ``relative_max_distance``, beyond which all distances
share a bucket. The encoder is bidirectional (half the buckets for keys after the query, half for before);
the decoder's self-attention is causal (keys after the query never occur, so every bucket is for the past).

    scores = Q K^T + B,   B[h, i, j] = table[bucket(j - i), h]        (no 1 / sqrt(d_k) in T5)

One table per stack (the first layer's ``relative_attention_bias``), computed once per call and added to the
scores of every self-attention layer of the stack; cross-attention has none.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def relative_bucket(relative_position: Tensor, bidirectional: bool, num_buckets: int, max_distance: int) -> Tensor:
    """The bucket of each distance j - i (int64 tensor of any shape -> same shape, values in [0, num_buckets)),
    with the very operations of ``T5Attention._relative_position_bucket`` (the logarithm in float32)."""
    buckets = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (relative_position > 0).to(torch.long) * num_buckets  # keys after the query
        distance = torch.abs(relative_position)
    else:
        distance = -torch.min(relative_position, torch.zeros_like(relative_position))  # the past only
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    large = max_exact + (
        torch.log(distance.float() / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    ).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return buckets + torch.where(is_small, distance, large)


class RelativePositionBias(nn.Module):
    """The (num_buckets, H) table of one stack and the bias it gives: (1, H, T_q, T_k)."""

    def __init__(self, n_heads: int, num_buckets: int, max_distance: int, bidirectional: bool) -> None:
        super().__init__()
        self.table = nn.Embedding(num_buckets, n_heads)  # transformers: relative_attention_bias
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.bidirectional = bidirectional

    def forward(self, t_q: int, t_k: int, offset: int = 0) -> Tensor:
        """The bias of queries at positions offset..offset+t_q-1 over keys 0..t_k-1: (1, H, T_q, T_k)."""
        device = self.table.weight.device
        query = torch.arange(t_q, dtype=torch.long, device=device)[:, None] + offset  # (T_q, 1)
        key = torch.arange(t_k, dtype=torch.long, device=device)[None, :]  # (1, T_k)
        bucket = relative_bucket(key - query, self.bidirectional, self.num_buckets, self.max_distance)  # (T_q, T_k)
        return self.table(bucket).permute(2, 0, 1).unsqueeze(0)  # (T_q, T_k, H) -> (1, H, T_q, T_k)
