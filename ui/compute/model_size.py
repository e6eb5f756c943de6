"""Which models are large (opus-mt size), where the costly work and the costliest charts wait to be asked for.

Imports nothing heavy: the Attention and Decoding pages ask it, and importing ``ui.compute.explain`` for it
loaded Captum (seconds: docs/benchmarks.md, "importing Captum") on their first visit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the type only: importing the pipeline module here would load torch for nothing
    from transformer.pipeline import Pipeline

LARGE_MODEL = 20_000_000  # parameters: above this, one ablation per head costs minutes (opus-mt: 144 heads, 74 M)


def is_large(pipeline: Pipeline) -> bool:
    """A model over ``LARGE_MODEL`` parameters."""
    return pipeline.model.num_parameters() > LARGE_MODEL
