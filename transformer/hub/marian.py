"""Marian (opus-mt) under the three names every family module exposes (``config_of``, ``weights_of``,
``expected_shapes``), so that a dispatch over families treats it as it treats t5.py, bart.py and m2m100.py.

The work is hub/config.py's and hub/weights.py's (``load_marian`` keeps using them directly). A Marian
config.json does not hold the ``<unk>`` id: it is the vocabulary's (vocab.json), 1 in every opus-mt model,
which ``config_of`` assumes (family_config.py); a reader that has the tokenizer replaces it (``dataclasses.replace``).
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import Tensor

from ..network.config import TransformerConfig
from .family_config import marian_config_of
from .weights import expected_marian_shapes, to_ours

MODEL_TYPES = ("marian",)
config_of = marian_config_of  # config.json -> TransformerConfig, torch-free (family_config.py)


def weights_of(tensors: Mapping[str, Tensor], config: TransformerConfig) -> dict[str, Tensor]:
    """``MarianMTModel``'s state dict -> ours (hub/weights.py's ``to_ours``)."""
    return to_ours(dict(tensors), config)


def expected_shapes(config: TransformerConfig) -> dict[str, tuple[int, ...]]:
    """Their name -> shape, of every tensor ``weights_of`` may read, from the config alone."""
    return expected_marian_shapes(config)
