"""The one configuration object of the model, with the paper's names.

Table 3 of "Attention Is All You Need" calls the base model
N=6, d_model=512, d_ff=2048, h=8, P_drop=0.1; those are the defaults here.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, NamedTuple

# silu = swish, x * sigmoid(x) (Marian, Llama's SwiGLU); gelu_new = GELU's tanh approximation term by term (T5 v1.1 /
# Flan-T5's gated-gelu, GPT-2); gelu_tanh = torch's own tanh GELU (Gemma's GeGLU)
ACTIVATIONS = ("relu", "gelu", "gelu_new", "gelu_tanh", "silu")
# interleaved: the paper's sinusoid; marian: sines then cosines; fairseq: M2M100/NLLB's sinusoid, positions from
# pad_id + 1; learned: a table per stack (BART, mBART, GPT-2); relative: T5's bucketed bias per head; rotary: q and k
# rotated by their position (RoPE: Llama, Mistral, Qwen, Gemma). positional.position_scheme says what each does.
POSITIONAL_LAYOUTS = ("interleaved", "marian", "fairseq", "learned", "relative", "rotary")
# layer: LayerNorm (paper); rms: RMSNorm with its statistic in float32 (T5); rms_float32: all of RMSNorm in float32,
# cast back before the weight (Llama, Mistral, Qwen); rms_unit_offset: weight applied as (1 + w), all in float32 (Gemma)
NORMS = ("layer", "rms", "rms_float32", "rms_unit_offset")
ROPE_SCALINGS = ("default", "linear", "llama3")  # rotary.inverse_frequencies
LAYER_TYPES = ("full", "sliding")  # a decoder layer's self-attention: every earlier key, or the last sliding_window
# Which of the three vocabulary matrices are one: "none"; "generator": the generator is the target embedding
# (Marian with two vocabularies); "embeddings": source and target embedding are one, the generator its own
# (T5 v1.1, Flan-T5); "all": all three, one vocabulary (section 3.4 of the paper).
TYINGS = ("none", "generator", "embeddings", "all")
# The booleans that said the same before ``tying`` (config.json files written then): read by ``from_dict``.
_OLD_TYING = ("tie_embeddings", "tie_generator", "untied_generator")


class SpecialIds(NamedTuple):
    """The reserved ids of a model's vocabulary (``TransformerConfig.special_ids``)."""

    pad: int  # padding; masked out of attention
    unk: int  # a piece outside the vocabulary
    bos: int  # the decoder's start id (Marian: the pad id)
    eos: int  # ends a sequence


@dataclass(frozen=True)
class TransformerConfig:
    """Sizes and switches of an encoder-decoder Transformer, or of a decoder-only one (``decoder_only``).

    ``n_layers`` sets both stacks; ``n_encoder_layers`` / ``n_decoder_layers``
    override one stack each. After construction both are always ints (a decoder-only model: 0 encoder layers).
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
    activation: str = "relu"  # feed-forward non-linearity: "relu" (paper), "gelu" or "silu" (Marian's "swish")
    tying: str = "none"  # which of source embedding, target embedding and generator are one matrix (TYINGS)
    layer_norm_eps: float = 1e-5  # epsilon of every LayerNorm (torch's default)
    # The special ids belong to the vocabulary the model was trained with. Ours: pad 0, unk 1, bos 2, eos 3.
    # Marian: eos 0, unk 1, pad = the last id, and the decoder starts with the pad id (it has no bos).
    bos_id: int = 2  # the decoder's start id: the first decoder input of every target (Marian: = pad_id)
    eos_id: int = 3  # ends every source and target; generation stops there
    unk_id: int = 1  # what a piece outside the vocabulary becomes
    # Switches that real translation models need (the paper's choices are the defaults):
    positional: str = "interleaved"  # "interleaved": sin/cos alternate (paper); "marian": sines then cosines
    scale_embedding: bool = True  # multiply embeddings by sqrt(d_model) (section 3.4)
    final_norm: bool = True  # a LayerNorm after each stack (as torch.nn.Transformer); post-LN Marian has none
    # Switches of other families (docs/architecture.md has the table of which family sets which):
    d_head: int | None = None  # width of one head (T5's d_kv); None: d_model / n_heads
    position_offset: int = 0  # learned positions: the table row of position 0 (BART, mBART: 2)
    relative_buckets: int = 32  # relative positions: buckets of the bias table (T5)
    relative_max_distance: int = 128  # relative positions: distances beyond this share a bucket (T5)
    norm: str = "layer"  # "layer": LayerNorm (paper); "rms": RMSNorm, no mean and no bias (T5)
    embedding_norm: bool = False  # a norm right after embeddings + positions, per stack (BART, mBART)
    gated_ff: bool = False  # FFN(x) = (act(x W_1) * x W_3) W_2 (T5 v1.1 / Flan-T5) instead of act(x W_1) W_2
    scale_attention: bool = True  # divide the scores by sqrt(d_k) (paper); T5 does not
    bias: bool = True  # biases in the attention and feed-forward linears (T5 has none)
    rescale_output: bool = False  # the decoder's final norm output times d_model^-0.5 (T5 v1.0's tied generator)
    # Switches of decoder-only language models (docs/architecture.md has their table too):
    decoder_only: bool = False  # one stack, no encoder and no cross-attention (GPT-2, Llama, ...): model.lm(ids)
    n_kv_heads: int | None = None  # key/value heads (grouped-query attention; 1: multi-query); None: n_heads
    rope_theta: float = 10000.0  # rotary: the base of the wavelengths (RoFormer's 10000)
    rope_scaling: str = "default"  # rotary: "default", "linear" (positions / rope_factor) or "llama3" (per band)
    rope_factor: float = 1.0  # rotary scaling "linear" and "llama3": how much longer the context became
    rope_low_freq_factor: float = 1.0  # "llama3": wavelengths above original_max_len / this are divided by the factor
    rope_high_freq_factor: float = 4.0  # "llama3": wavelengths below original_max_len / this are kept
    rope_original_max_len: int = 8192  # "llama3": the context length the model was first trained for
    rope_local_theta: float | None = None  # rotary base of the sliding-window layers, unscaled (Gemma-3); None: same
    qk_norm: bool = False  # a norm of each head's queries and keys over d_k, before rotary (Qwen3, Gemma-3)
    qkv_bias: bool = False  # biases on W^Q, W^K, W^V even where ``bias`` is false (Qwen2)
    sandwich_norm: bool = False  # a norm of each sub-layer's output too, before the residual sum (Gemma-2, -3)
    sliding_window: int | None = None  # a query of a "sliding" layer sees its last sliding_window keys (itself too)
    layer_types: tuple[str, ...] | None = None  # per decoder layer, LAYER_TYPES; None: all "sliding" with a window
    attn_softcap: float | None = None  # scores -> cap * tanh(scores / cap) before the mask (Gemma-2)
    logit_softcap: float | None = None  # logits -> cap * tanh(logits / cap) (Gemma-2)
    query_pre_attn_scalar: float | None = None  # scores times this^-0.5 instead of d_k^-0.5 (Gemma-2, -3)
    softmax_float32: bool = False  # attention's softmax in float32 whatever the dtype, as transformers' Llama family
    embedding_scale_rounded: bool = False  # sqrt(d_model) rounded to the model's dtype before the product (Gemma)

    def __post_init__(self) -> None:
        if self.decoder_only and self.n_encoder_layers in (None, 0):
            object.__setattr__(self, "n_encoder_layers", 0)
        if self.n_encoder_layers is None:
            object.__setattr__(self, "n_encoder_layers", self.n_layers)
        if isinstance(self.layer_types, list):  # as JSON gives it
            object.__setattr__(self, "layer_types", tuple(self.layer_types))
        if self.n_decoder_layers is None:
            object.__setattr__(self, "n_decoder_layers", self.n_layers)
        self._validate()

    @property
    def special_ids(self) -> SpecialIds:
        """pad, unk, bos (decoder start) and eos of the model's vocabulary."""
        return SpecialIds(self.pad_id, self.unk_id, self.bos_id, self.eos_id)

    @property
    def shared_embeddings(self) -> bool:
        """Whether source and target embedding are one matrix (``tying`` "embeddings" or "all")."""
        return self.tying in ("embeddings", "all")

    @property
    def generator_tied(self) -> bool:
        """Whether the generator's weight is the target embedding (``tying`` "generator" or "all")."""
        return self.tying in ("generator", "all")

    @property
    def singular_at_zero_embeddings(self) -> bool:
        """Whether the network, as a function of its token embeddings, is not smooth at zero: no absolute positions
        are added to them (``positional`` "relative", T5, or "rotary", Llama, Qwen, Gemma: both act inside
        attention), and a norm reads them first (pre-LN, or an embedding norm) or reads them plus sub-layers that
        add nothing at zero (post-LN without biases). A norm divides by sqrt(mean(x²) + ε) (RMSNorm; LayerNorm
        about the mean), so norm(αx) jumps from 0 to x / rms(x) within α rms(x) ≲ √ε: a method that moves the
        embeddings towards zero (integrated gradients' zero baseline) meets that jump. Where positions are added,
        zero embeddings leave the position table, where the norm is smooth."""
        return self.positional in ("relative", "rotary") and (self.norm_first or self.embedding_norm or not self.bias)

    @property
    def d_k(self) -> int:
        """Width of one head's queries, keys and values: d_model / h, or ``d_head`` where set (T5's d_kv)."""
        return self.d_head if self.d_head is not None else self.d_model // self.n_heads

    @property
    def kv_heads(self) -> int:
        """Heads of keys and values: ``n_kv_heads``, or n_heads (the paper: one key/value head per query head)."""
        return self.n_kv_heads if self.n_kv_heads is not None else self.n_heads

    def layer_type(self, layer: int) -> str:
        """"full" or "sliding": what decoder layer ``layer``'s self-attention sees (``layer_types``)."""
        if self.layer_types is not None:
            return self.layer_types[layer]
        return "sliding" if self.sliding_window is not None else "full"

    @property
    def d_inner(self) -> int:
        """Width of the heads side by side, h * d_k: the rows of W^Q, W^K, W^V (d_model unless ``d_head``)."""
        return self.n_heads * self.d_k

    def _validate(self) -> None:
        for name in ("src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "n_layers",
                     *(() if self.decoder_only else ("n_encoder_layers",)), "n_decoder_layers", "d_ff", "max_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.d_head is not None and (isinstance(self.d_head, bool) or not isinstance(self.d_head, int)
                                        or self.d_head <= 0):
            raise ValueError(f"d_head must be a positive integer or null, got {self.d_head!r}")
        if self.d_head is None and self.d_model % self.n_heads != 0:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads}): "
                "each head gets d_model / n_heads dimensions"
            )
        if not isinstance(self.dropout, (int, float)) or not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {self.activation!r}")
        for name in ("pad_id", "bos_id", "eos_id", "unk_id"):  # pad in both vocabularies, the others in the target's
            value, size = getattr(self, name), self.tgt_vocab_size
            if name == "pad_id":
                size = min(size, self.src_vocab_size)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < size:
                where = "both vocabularies" if name == "pad_id" else "the target vocabulary"
                raise ValueError(f"{name} must be a valid id in {where}, got {value!r}")
        if self.eos_id == self.pad_id and not self.decoder_only:  # a decoder-only model's padding is its attention
            # mask (GPT-2 has no pad id: generate pads with the EOS id, and so do we)
            raise ValueError(f"eos_id and pad_id must differ (both {self.eos_id}): decoding pads finished rows")
        if self.positional not in POSITIONAL_LAYOUTS:
            raise ValueError(f"positional must be one of {POSITIONAL_LAYOUTS}, got {self.positional!r}")
        if self.norm not in NORMS:
            raise ValueError(f"norm must be one of {NORMS}, got {self.norm!r}")
        for name in ("position_offset", "relative_buckets", "relative_max_distance"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "position_offset" else 2):
                raise ValueError(f"{name} must be an integer >= {0 if name == 'position_offset' else 2}, got {value!r}")
        if self.tying not in TYINGS:
            raise ValueError(f"tying must be one of {TYINGS}, got {self.tying!r}")
        if self.rescale_output and not self.final_norm:
            raise ValueError("rescale_output scales the decoder's final norm: it needs final_norm")
        for name in ("scale_embedding", "final_norm", "norm_first", "embedding_norm", "gated_ff", "scale_attention",
                     "bias", "rescale_output"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if self.shared_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(
                f"tying {self.tying!r} needs one shared vocabulary, but src_vocab_size "
                f"({self.src_vocab_size}) != tgt_vocab_size ({self.tgt_vocab_size})"
            )
        eps = self.layer_norm_eps
        if isinstance(eps, bool) or not isinstance(eps, int | float) or not 0 < eps < float("inf"):
            raise ValueError(f"layer_norm_eps must be a positive finite number, got {eps!r}")
        if self.positional == "relative":  # else relative_bucket divides by zero or indexes past the table
            if self.relative_buckets < 4:  # the encoder's half per direction, and half of that exact: >= 1 each
                raise ValueError(f"relative_buckets must be >= 4 (half per direction, half of those exact), got "
                                 f"{self.relative_buckets}")
            if self.relative_max_distance <= self.relative_buckets // 2:  # the decoder's exact buckets
                raise ValueError(f"relative_max_distance ({self.relative_max_distance}) must be more than the exact "
                                 f"buckets, relative_buckets // 2 ({self.relative_buckets // 2})")
        self._validate_decoder_switches()

    def _validate_decoder_switches(self) -> None:
        """The decoder-only switches: types, ranges, and the combinations that mean something."""
        for name in ("decoder_only", "qk_norm", "qkv_bias", "sandwich_norm", "softmax_float32",
                     "embedding_scale_rounded"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        for name in ("n_kv_heads", "sliding_window", "rope_original_max_len"):
            value = getattr(self, name)
            if (value is not None or name == "rope_original_max_len") and (
                    isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name in ("rope_theta", "rope_factor", "rope_low_freq_factor", "rope_high_freq_factor", "rope_local_theta",
                     "attn_softcap", "logit_softcap", "query_pre_attn_scalar"):
            value = getattr(self, name)
            if (value is not None or name.startswith("rope_") and name != "rope_local_theta") and (
                    isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        if self.rope_scaling == "llama3" and not self.rope_high_freq_factor > self.rope_low_freq_factor:
            raise ValueError("llama3 rope scaling needs rope_high_freq_factor > rope_low_freq_factor")
        if self.decoder_only and self.n_encoder_layers != 0:
            raise ValueError(f"a decoder-only model has no encoder: n_encoder_layers is {self.n_encoder_layers}")
        if self.decoder_only and self.tying not in ("none", "generator"):
            raise ValueError(f"a decoder-only model has one embedding: tying must be 'none' or 'generator', "
                             f"got {self.tying!r}")
        if self.sliding_window is not None and not self.decoder_only:
            raise ValueError("sliding windows are built for decoder-only models here (decoder_only)")
        if self.positional == "rotary" and not self.decoder_only:
            raise ValueError("rotary positions are built for decoder-only models here (decoder_only)")
        if self.decoder_only and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError("a decoder-only model has one vocabulary: src_vocab_size must equal tgt_vocab_size")
        if self.n_heads % self.kv_heads != 0:
            raise ValueError(f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({self.kv_heads}): each "
                             "key/value head serves a group of query heads")
        if self.rope_scaling not in ROPE_SCALINGS:
            raise ValueError(f"rope_scaling must be one of {ROPE_SCALINGS}, got {self.rope_scaling!r}")
        if self.layer_types is not None:
            if len(self.layer_types) != self.n_decoder_layers or any(t not in LAYER_TYPES for t in self.layer_types):
                raise ValueError(f"layer_types must give one of {LAYER_TYPES} per decoder layer "
                                 f"({self.n_decoder_layers}), got {list(self.layer_types)!r}")
            if "sliding" in self.layer_types and self.sliding_window is None:
                raise ValueError("layer_types has sliding layers but sliding_window is null")
        if self.sandwich_norm and not self.norm_first:
            raise ValueError("sandwich_norm adds a norm after each sub-layer to the one before it: it needs norm_first")
        if self.positional == "rotary" and self.d_k % 2:
            raise ValueError(f"rotary positions turn pairs of dimensions: d_k must be even, got {self.d_k}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TransformerConfig:
        """Build a config from JSON data, rejecting unknown keys with a clear message."""
        if not isinstance(data, dict):
            raise ValueError(f"a config must be a JSON object, got {type(data).__name__}")
        data = _read_old_tying(data)
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


def _read_old_tying(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with the booleans of older config.json files (``tie_embeddings``, ``tie_generator``,
    ``untied_generator``) as the one field ``tying`` that replaced them."""
    old = {name: data[name] for name in _OLD_TYING if name in data}
    if not old:
        return data
    if "tying" in data:
        raise ValueError(f"a config has tying or the older {', '.join(old)}, not both")
    for name, value in old.items():
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be true or false, got {value!r}")
    shared, generator, untied = (old.get(name, False) for name in _OLD_TYING)
    if generator and untied:
        raise ValueError("tie_generator and untied_generator contradict each other")
    tying = ("embeddings" if untied else "all") if shared else "generator" if generator else "none"
    return {k: v for k, v in data.items() if k not in old} | {"tying": tying}
