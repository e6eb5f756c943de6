"""The one configuration object of the model, with the paper's names.

Table 3 of "Attention Is All You Need" calls the base model
N=6, d_model=512, d_ff=2048, h=8, P_drop=0.1; those are the defaults here.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

ACTIVATIONS = ("relu", "gelu")


@dataclass(frozen=True)
class TransformerConfig:
    """Sizes and switches of an encoder-decoder Transformer.

    ``n_layers`` sets both stacks; ``n_encoder_layers`` / ``n_decoder_layers``
    override one stack each. After construction both are always ints.
    """

    src_vocab_size: int  # number of source token ids
    tgt_vocab_size: int  # number of target token ids
    d_model: int = 512  # width of every residual stream vector
    n_heads: int = 8  # h: attention heads per attention sub-layer
    n_layers: int = 6  # N: layers per stack (unless overridden below)
    n_encoder_layers: int | None = None  # encoder depth, defaults to n_layers
    n_decoder_layers: int | None = None  # decoder depth, defaults to n_layers
    d_ff: int = 2048  # inner width of the position-wise feed-forward network
    dropout: float = 0.1  # P_drop: after every sub-layer, on attention weights, after embeddings
    max_len: int = 512  # longest sequence the positional table covers
    pad_id: int = 0  # token id that masks treat as padding
    norm_first: bool = False  # False: post-LN as in the paper; True: pre-LN
    activation: str = "relu"  # feed-forward non-linearity: "relu" (paper) or "gelu"
    tie_embeddings: bool = False  # share source/target embeddings and the generator (needs one vocabulary)
    layer_norm_eps: float = 1e-5  # epsilon of every LayerNorm (torch's default)

    def __post_init__(self) -> None:
        if self.n_encoder_layers is None:
            object.__setattr__(self, "n_encoder_layers", self.n_layers)
        if self.n_decoder_layers is None:
            object.__setattr__(self, "n_decoder_layers", self.n_layers)
        self._validate()

    @property
    def d_k(self) -> int:
        """Width of one head's queries, keys and values: d_model / h."""
        return self.d_model // self.n_heads

    def _validate(self) -> None:
        for name in ("src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "n_layers",
                     "n_encoder_layers", "n_decoder_layers", "d_ff", "max_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.d_model % self.n_heads != 0:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads}): "
                "each head gets d_model / n_heads dimensions"
            )
        if not isinstance(self.dropout, (int, float)) or not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {self.activation!r}")
        if not isinstance(self.pad_id, int) or not 0 <= self.pad_id < min(self.src_vocab_size, self.tgt_vocab_size):
            raise ValueError(f"pad_id must be a valid id in both vocabularies, got {self.pad_id!r}")
        if self.tie_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(
                "tie_embeddings needs one shared vocabulary, but src_vocab_size "
                f"({self.src_vocab_size}) != tgt_vocab_size ({self.tgt_vocab_size})"
            )
        if not self.layer_norm_eps > 0:
            raise ValueError(f"layer_norm_eps must be positive, got {self.layer_norm_eps!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TransformerConfig:
        """Build a config from JSON data, rejecting unknown keys with a clear message."""
        if not isinstance(data, dict):
            raise ValueError(f"a config must be a JSON object, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown config keys: {', '.join(unknown)}")
        try:
            return cls(**data)
        except TypeError as error:  # a missing required field
            raise ValueError(f"incomplete config: {error}") from None

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)
