"""The Heads page's computation for a decoder-only language model: ``lm_head_summary`` over repeated random tokens.

A language model has no task sentences with a known alignment or grammar: its heads are scored, as Olsson et al.
2022 find induction heads, on sequences [BOS] r_1..r_n r_1..r_n of random tokens repeated once
(``transformer/explain/lm_heads.py``). The tokens avoid every id the model's tokenizer calls special (BOS/EOS, pad,
chat markers, Gemma's image tokens: ``LMTokenizer.special_ids``), so a head that parks its weight on a special token
is not mistaken for one that looks back along the repeat. The table is computed once per server and model with a
progress bar (``ui.compute.shared_work``: through the heavy-work pool in public mode, bounded by its time budget) and
never modified after; on a small model the page runs it on opening (under a second for the test folders), on a large
one at a button (``ui.compute.model_size``), as the encoder-decoder statistics of a model without a built-in task.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from transformer.explain.lm_heads import lm_head_summary
from transformer.explain.progress import Progress
from ui.compute.shared_work import shared

if TYPE_CHECKING:  # the type only
    from transformer.lm_pipeline import LMPipeline

N_PROMPTS = 50  # sequences the scores average over (lm_head_summary's default; its intervals are over these)
REPEAT_LENGTH = 20  # tokens per repeat (n): the sequences are 1 + 2n = 41 tokens long
SEED = 0  # the draw of the random tokens: every session sees the same sequences
MIN_REPEAT = 2  # lm_head_summary's least repeat length


def special_ids(pipeline: LMPipeline) -> frozenset[int]:
    """The ids the random sequences avoid: what the tokenizer says is special, and the config's pad, unk, bos and
    eos ids (which ``lm_head_summary`` avoids by itself; named here so that the page counts what is avoided)."""
    c = pipeline.config
    own = {i for i in c.special_ids if 0 <= i < c.tgt_vocab_size}
    return frozenset(pipeline.tokenizer.special_ids) | own


def repeat_length(pipeline: LMPipeline) -> int:
    """``REPEAT_LENGTH``, shortened to fit the model's positions (1 + 2n <= max_len) and its ordinary tokens."""
    c = pipeline.config
    ordinary = c.tgt_vocab_size - len(special_ids(pipeline))
    return min(REPEAT_LENGTH, (c.max_len - 1) // 2, ordinary)


def why_not(pipeline: LMPipeline) -> str | None:
    """Why the scores cannot be computed for this model (too few positions or ordinary tokens), or None."""
    n = repeat_length(pipeline)
    if n < MIN_REPEAT:
        c = pipeline.config
        return (f"a repeated sequence needs at least {2 * MIN_REPEAT + 1} positions and {MIN_REPEAT} ordinary "
                f"tokens; this model has {c.max_len} positions and "
                f"{c.tgt_vocab_size - len(special_ids(pipeline))} tokens that are not special")
    return None


def compute_lm_summary(pipeline: LMPipeline, progress: Progress | None = None) -> pd.DataFrame | str:
    """Every head's row of ``lm_head_summary`` on ``N_PROMPTS`` repeated sequences (seed ``SEED``, the
    tokenizer's special ids avoided), or why there is none (uncached; ``lm_report`` keeps it)."""
    reason = why_not(pipeline)
    if reason is not None:
        return reason
    return lm_head_summary(pipeline.model, n_prompts=N_PROMPTS, repeat_length=repeat_length(pipeline), seed=SEED,
                           special=special_ids(pipeline), progress=progress)


def lm_report(model_key: str, device: str, pipeline: LMPipeline) -> pd.DataFrame | str:
    """``compute_lm_summary`` kept for every session, per model, device and recipe, computed with a progress bar
    (``shared``: the heavy-work pool in public mode; a computation cut by the time budget stops the page with a
    message)."""
    key = (model_key, device, N_PROMPTS, repeat_length(pipeline), SEED)
    return shared("lm_head_reports", key, lambda progress: compute_lm_summary(pipeline, progress),
                  label="Scoring every head on repeated random tokens:", advice="Try a smaller model.")
