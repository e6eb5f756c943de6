"""The Explain page's input on a decoder-only language model: the prompt and its greedy continuation as every
explanation takes them (``transformer.explain.lm_pair``), their readable labels, and the tokens ERASER never removes.

A language model's analysis (``ui.compute.analysis.Analysis`` of ``LMPipeline.trace``) has no encoder: its trace
holds no ``src.ids``. The prompt plays the source and the continuation the target (docs/explain.md, "Decoder-only
language models"): row t explains the continuation's token t + 1 by the prompt and by the tokens generated before
it, so that every map keeps the axes of an encoder-decoder's: ``source`` (rows, P) over the prompt, ``target``
(rows, rows) over the placeholder then c_1 .. c_{rows-1}.

The explained tokens are the continuation c_1 .. c_n and, where the model ended it, the end token it said (one of
its EOS ids, as decoding produced it): "why did it stop here" is a question too. Not where that id is the model's
pad id (GPT-2's <|endoftext|> is its BOS, EOS and pad at once): the explanations read the pad id in a target as
padding and would write its row as 0, a number for a token they never explained; it is left out and the page
says so (``end_left_out``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from transformer.explain.pairs import lm_pair
from ui.models.menu import is_decoder_only

if TYPE_CHECKING:  # the types only
    from ui.compute.analysis import Analysis

END_LEFT_OUT = ("The end token {piece} the model said last is not explained: it is also this model's padding id, "
                "which the explanations read as padding in a continuation.")


def is_lm_analysis(analysis: Analysis) -> bool:
    """Whether a decoder-only model made ``analysis``: its trace has no source (no encoder)."""
    return "src.ids" not in analysis.trace


def _generated(analysis: Analysis) -> list[int]:
    """c_1 .. c_n as decoding produced them, then the EOS id that ended them when the model said one."""
    result = analysis.result
    start = len(result.src_ids)
    return result.steps.ids[0, start:start + len(result.output_ids) + int(result.finished)].tolist()


def end_left_out(analysis: Analysis, pad_id: int) -> bool:
    """Whether the end token the model said is left out of the explained tokens (its id is the pad id)."""
    return bool(analysis.result.finished) and _generated(analysis)[-1] == pad_id


def lm_ids(analysis: Analysis, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``lm_pair`` of the analysed prompt (1, P) and its continuation (1, n): the generated tokens, then the end token
    where the model said one that is not ``pad_id`` (module docstring): ``src_ids`` (1, P), ``tgt_ids`` (1, n + 1)."""
    generated = _generated(analysis)
    if end_left_out(analysis, pad_id):
        generated = generated[:-1]
    prompt = torch.tensor([list(analysis.result.src_ids)])
    return lm_pair(prompt, torch.tensor([generated], dtype=prompt.dtype).reshape(1, len(generated)))


def pieces(pipeline: Any, ids: Sequence[int] | torch.Tensor) -> list[str]:
    """One label per id: a language model's readable pieces (``LMTokenizer.display_pieces``: "␣world" for a
    byte-level "Ġworld"), a translation model's target pieces as they are."""
    ids = [int(i) for i in ids]
    if is_decoder_only(pipeline):
        return pipeline.tokenizer.display_pieces(ids)
    return [pipeline.tgt_tokenizer.id_to_piece(i) for i in ids]


def special_positions(pipeline: Any, src: torch.Tensor) -> torch.Tensor:
    """(1, P) bool: the prompt's tokens that ERASER never removes, those its tokenizer calls special
    (``LMTokenizer.special_ids``: BOS, chat markers, ...): a prompt without them is one the model never saw."""
    special = torch.tensor(sorted(pipeline.tokenizer.special_ids), dtype=src.dtype, device=src.device)
    return torch.isin(src, special)
