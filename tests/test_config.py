"""TransformerConfig: the paper's defaults, and clear errors for configs that cannot work."""

from __future__ import annotations

import pytest

from transformer import TransformerConfig


def test_defaults_are_the_base_model_of_table_3() -> None:
    c = TransformerConfig(src_vocab_size=100, tgt_vocab_size=100)
    assert (c.d_model, c.n_heads, c.d_ff, c.dropout) == (512, 8, 2048, 0.1)
    assert c.n_encoder_layers == c.n_decoder_layers == 6
    assert c.d_k == 64
    assert c.norm_first is False and c.activation == "relu"


def test_separate_depths_override_n_layers() -> None:
    c = TransformerConfig(src_vocab_size=10, tgt_vocab_size=10, n_layers=2, n_decoder_layers=3)
    assert (c.n_encoder_layers, c.n_decoder_layers) == (2, 3)


def test_json_round_trip() -> None:
    c = TransformerConfig(src_vocab_size=10, tgt_vocab_size=12, d_model=16, n_heads=2, norm_first=True)
    assert TransformerConfig.from_dict(c.to_dict()) == c


def test_config_is_frozen() -> None:
    c = TransformerConfig(src_vocab_size=10, tgt_vocab_size=10)
    with pytest.raises(AttributeError):
        c.d_model = 8


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"d_model": 100, "n_heads": 8}, "divisible by n_heads"),
        ({"d_model": 0}, "d_model must be a positive integer"),
        ({"n_heads": -1}, "n_heads must be a positive integer"),
        ({"n_layers": 0}, "n_layers must be a positive integer"),
        ({"n_decoder_layers": 0}, "n_decoder_layers must be a positive integer"),
        ({"d_ff": 2.5}, "d_ff must be a positive integer"),
        ({"src_vocab_size": 0}, "src_vocab_size must be a positive integer"),
        ({"max_len": True}, "max_len must be a positive integer"),
        ({"dropout": 1.0}, r"dropout must be in \[0, 1\)"),
        ({"dropout": -0.1}, r"dropout must be in \[0, 1\)"),
        ({"activation": "tanh"}, "activation must be one of"),
        ({"pad_id": 10}, "pad_id"),
        ({"tying": "all", "tgt_vocab_size": 11}, "tying 'all' needs one shared vocabulary"),
        ({"tying": "embeddings", "tgt_vocab_size": 11}, "tying 'embeddings' needs one shared vocabulary"),
        ({"tying": True}, "tying must be one of"),
        ({"layer_norm_eps": 0.0}, "layer_norm_eps"),
        ({"norm": "batch"}, "norm must be one of"),
        ({"positional": "spiral"}, "positional must be one of"),
        ({"positional": "rotary"}, "rotary positions are built for decoder-only models"),
        ({"decoder_only": True, "n_encoder_layers": 2}, "a decoder-only model has no encoder"),
        ({"decoder_only": True, "tgt_vocab_size": 11}, "one vocabulary"),
        ({"decoder_only": True, "tying": "all"}, "tying must be 'none' or 'generator'"),
        ({"n_kv_heads": 3, "n_heads": 4}, "multiple of n_kv_heads"),
        ({"n_kv_heads": 0}, "n_kv_heads must be a positive integer"),
        ({"decoder_only": True, "sliding_window": 0}, "sliding_window must be a positive integer"),
        ({"sliding_window": 4}, "sliding windows are built for decoder-only models"),
        ({"decoder_only": True, "n_layers": 2, "layer_types": ["full"]}, "one of .* per decoder layer"),
        ({"decoder_only": True, "n_layers": 1, "layer_types": ["sliding"]}, "sliding_window is null"),
        ({"rope_scaling": "yarn"}, "rope_scaling must be one of"),
        ({"rope_scaling": "llama3", "rope_high_freq_factor": 1.0}, "rope_high_freq_factor > rope_low_freq_factor"),
        ({"rope_theta": 0}, "rope_theta must be a positive number"),
        ({"attn_softcap": -1.0}, "attn_softcap must be a positive number"),
        ({"sandwich_norm": True}, "needs norm_first"),
        ({"qk_norm": "yes"}, "qk_norm must be true or false"),
        ({"d_head": 0}, "d_head must be a positive integer or null"),
        ({"position_offset": -1}, "position_offset must be an integer >= 0"),
        ({"relative_buckets": 1}, "relative_buckets must be an integer >= 2"),
        ({"rescale_output": True, "final_norm": False}, "needs final_norm"),
        ({"gated_ff": 1}, "gated_ff must be true or false"),
    ],
)
def test_bad_configs_raise_a_clear_value_error(changes: dict, message: str) -> None:
    args = {"src_vocab_size": 10, "tgt_vocab_size": 10, "d_model": 16, "n_heads": 2} | changes
    with pytest.raises(ValueError, match=message):
        TransformerConfig(**args)


def test_from_dict_rejects_unknown_and_missing_keys() -> None:
    with pytest.raises(ValueError, match="unknown config keys: colour"):
        TransformerConfig.from_dict({"src_vocab_size": 10, "tgt_vocab_size": 10, "colour": "red"})
    with pytest.raises(ValueError, match="incomplete config"):
        TransformerConfig.from_dict({"src_vocab_size": 10})
    with pytest.raises(ValueError, match="JSON object"):
        TransformerConfig.from_dict([1, 2])


def test_a_head_of_its_own_width_needs_no_divisibility() -> None:
    """T5's d_kv: heads of 64 in d_model 512 for 6 heads (Flan-T5-small), 384 rows of W^Q."""
    c = TransformerConfig(src_vocab_size=10, tgt_vocab_size=10, d_model=512, n_heads=6, d_head=64)
    assert (c.d_k, c.d_inner) == (64, 384)



@pytest.mark.parametrize(("old", "tying"), [
    ({}, "none"), ({"tie_embeddings": False}, "none"), ({"tie_embeddings": True}, "all"),
    ({"tie_generator": True}, "generator"), ({"tie_embeddings": True, "tie_generator": True}, "all"),
    ({"tie_embeddings": True, "untied_generator": True}, "embeddings"), ({"untied_generator": True}, "none"),
])
def test_config_json_of_older_versions_reads_its_tying_booleans(old: dict, tying: str) -> None:
    """config.json files written before ``tying`` carry three booleans (pretrained/*/config.json among them)."""
    assert TransformerConfig.from_dict({"src_vocab_size": 10, "tgt_vocab_size": 10} | old).tying == tying


@pytest.mark.parametrize(("data", "message"), [
    ({"tie_generator": True, "untied_generator": True}, "contradict each other"),
    ({"tie_embeddings": True, "tying": "all"}, "not both"),
    ({"tie_embeddings": 1}, "tie_embeddings must be true or false"),
])
def test_older_tying_booleans_that_cannot_be_read(data: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TransformerConfig.from_dict({"src_vocab_size": 10, "tgt_vocab_size": 10} | data)
