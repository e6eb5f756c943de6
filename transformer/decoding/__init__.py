"""Decoding: turning the model's next-token distributions into output sentences.

Greedy (with a KV cache), beam search (with its search tree) and sampling, all batched. Imports
the network and ``text.ids``; nothing from training or the app.
"""

from .search import (
    BeamCandidate,
    BeamResult,
    BeamState,
    BeamStep,
    DecodeResult,
    DecodeStep,
    Hypothesis,
    beam_search,
    gnmt_length_penalty,
    greedy_decode,
    next_token_log_probs,
    sample,
    sampling_distribution,
)

__all__ = ["BeamCandidate", "BeamResult", "BeamState", "BeamStep", "DecodeResult", "DecodeStep", "Hypothesis",
           "beam_search", "gnmt_length_penalty", "greedy_decode", "next_token_log_probs", "sample",
           "sampling_distribution"]
