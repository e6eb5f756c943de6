"""Decoding: turning the model's next-token distributions into output sentences.

Greedy (with a KV cache), beam search (with its search tree) and sampling, all batched. One
module per job:

- ``records``: what decoding returns (``DecodeStep``/``DecodeResult``; ``Hypothesis``,
  ``BeamState``, ``BeamCandidate``, ``BeamStep``, ``BeamResult``);
- ``common``: the next-token distribution without PAD, input checks, and ``pick_strategy``
  (which strategy a caller's options ask for; beam search and sampling together are refused);
- ``generate``: the token-by-token loop greedy decoding and sampling share;
- ``fast``: a decoding step, the generator computed as W x^T for the few rows of a step;
- ``greedy``, ``sampling``, ``beam``: the three strategies;
- ``context``: what a decoding conditions on (an encoder-decoder's source, a decoder-only model's prompt), behind
  the one interface the loops share;
- ``lm``: a decoder-only model's continuation of a prompt (``lm_greedy``, ``lm_beam_search``, ``lm_sample``,
  ``lm_generate``), exact to ``transformers``' ``generate()``;
- ``processors``: a model's forced and forbidden tokens (forced BOS / EOS, bad words), as ``transformers``'
  logits processors, applied by all three (``GenerationRules``).

Imports only the network and ``text.ids`` (and the package's argument checks); nothing from
training or the app.

The decoder input starts with BOS; at every step the model gives a distribution over the
next token given the source and the tokens so far, and generation stops at EOS or after
``max_len`` tokens. Every function here is batched: ``src_ids`` is (B, S), padded with the
model's ``pad_id``, and each row is decoded independently of the others.

Conventions shared by the three strategies (a decoder-only model's continuation, ``lm``, starts from its prompt
instead of BOS, keeps PAD a candidate and takes a list of EOS ids, as ``transformers``' ``generate()`` does):

- PAD is never generated: its logit is set to -inf before the softmax, so every
  probability and log-probability reported here is that of the model's distribution over
  the other tokens (``next_token_log_probs``). This keeps generated prefixes free of
  padding, which the cached decoder (no self-attention mask) relies on.
- Output ``tokens`` hold neither BOS nor EOS; ``finished`` says whether EOS was produced.
  A row that produced EOS is fed PAD afterwards and its output is ignored.
- ``log_prob`` of an output is the sum of log p(token) over the generated tokens
  *including* the final EOS when there is one, under the model's own (temperature 1)
  distribution.
- The model must be in eval mode (dropout off); the functions run under
  ``torch.inference_mode`` and never modify the model, so one model can serve many threads.

With a ``KVCache`` the decoder is fed only the newest token each step; the keys and values
of earlier positions (self-attention) and of the encoder output (cross-attention) are
reused rather than recomputed, which makes a step O(t) instead of O(t^2).
"""

from .beam import beam_search, gnmt_length_penalty, length_penalty_of
from .common import next_token_log_probs, pick_strategy
from .greedy import greedy_decode
from .lm import lm_beam_search, lm_generate, lm_greedy, lm_sample
from .processors import ForcedBOS, ForcedEOS, GenerationRules, MinLength, NoBadWords, NoRepeatNGram
from .records import BeamCandidate, BeamResult, BeamState, BeamStep, DecodeResult, DecodeStep, Hypothesis
from .sampling import sample, sampling_distribution

__all__ = ["BeamCandidate", "BeamResult", "BeamState", "BeamStep", "DecodeResult", "DecodeStep", "ForcedBOS",
           "ForcedEOS", "GenerationRules", "Hypothesis", "MinLength", "NoBadWords", "NoRepeatNGram",
           "beam_search", "gnmt_length_penalty", "greedy_decode", "length_penalty_of", "lm_beam_search", "lm_generate",
           "lm_greedy", "lm_sample", "next_token_log_probs",
           "pick_strategy", "sample", "sampling_distribution"]
