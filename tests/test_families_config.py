"""Each family's config.json read as ``transformers`` reads it, or refused by name; the tables that are functions
of the sizes (fairseq's sinusoid, T5's buckets) equal ``transformers``' bit for bit."""

from __future__ import annotations

import pytest
import torch
from family_models import reference_config

from transformer.checkpoints.errors import CheckpointError
from transformer.hub import mapping
from transformer.hub.families import bart, m2m_100, marian, mbart, t5
from transformer.network.positional import fairseq_table
from transformer.network.relative_position import relative_bucket

pytest.importorskip("transformers")


def test_t5_versions_are_told_apart_in_both_spellings_of_transformers() -> None:
    v10 = t5.config_of(reference_config("t5").to_dict())
    assert v10.rescale_output and v10.generator_tied and not v10.gated_ff and v10.activation == "relu"
    v11 = t5.config_of(reference_config("t5-v1.1").to_dict())  # transformers 5: scale_decoder_outputs false
    assert not v11.rescale_output and not v11.generator_tied and v11.gated_ff and v11.activation == "gelu_new"
    flan_file = {k: v for k, v in reference_config("t5-v1.1").to_dict().items() if k != "scale_decoder_outputs"}
    flan_file["tie_word_embeddings"] = False  # what a Flan-T5 config.json written by transformers 4 says
    assert t5.config_of(flan_file) == v11
    assert (v10.d_k, v10.d_inner, v10.d_model, v10.n_decoder_layers) == (4, 12, 16, 3)
    assert (v10.pad_id, v10.eos_id, v10.bos_id, v10.unk_id) == (0, 1, 0, 2)
    assert v10.norm == "rms" and v10.layer_norm_eps == 1e-6 and not v10.bias and not v10.scale_attention


def test_bart_mbart_m2m100_switches_and_special_ids() -> None:
    b, mb, m = (module.config_of(reference_config(name).to_dict())
                for module, name in ((bart, "bart"), (mbart, "mbart"), (m2m_100, "m2m100")))
    assert (b.norm_first, b.final_norm, b.embedding_norm, b.positional, b.position_offset) == \
        (False, False, True, "learned", 2)
    assert (mb.norm_first, mb.final_norm, mb.embedding_norm, mb.scale_embedding) == (True, True, True, True)
    assert (m.norm_first, m.final_norm, m.embedding_norm, m.positional, m.activation) == \
        (True, True, False, "fairseq", "relu")
    for config in (b, mb, m):
        assert (config.pad_id, config.eos_id, config.bos_id, config.unk_id) == (1, 2, 2, 3)
        assert config.tying == "all" and not b.scale_embedding


@pytest.mark.parametrize(("module", "name", "change", "message"), [
    (t5, "t5", {"model_type": "bart"}, "is not T5"),
    (t5, "t5", {"feed_forward_proj": "gated-gelu-fast"}, "neither"),
    (t5, "t5", {"feed_forward_proj": "gated-tanh"}, "'tanh' of feed_forward_proj is not supported"),
    (t5, "t5", {"eos_token_id": [1, 5]}, "eos_token_id must be one id"),
    (t5, "t5", {"is_encoder_decoder": False}, "encoder-decoder"),
    (bart, "bart", {"decoder_attention_heads": 4}, "encoder_attention_heads .2. differs from decoder_attention_heads"),
    (mbart, "mbart", {"decoder_ffn_dim": 8}, "encoder_ffn_dim .24. differs"),
    (bart, "bart", {"activation_function": "tanh"}, "activation_function 'tanh' is not supported"),
    (bart, "bart", {"d_model": 15}, "does not describe a valid model.*divisible"),
    (m2m_100, "m2m100", {"model_type": "nllb_moe"}, "is not M2M100"),
    (m2m_100, "m2m100", {"vocab_size": None}, "has no 'vocab_size'"),
])
def test_settings_the_network_lacks_are_refused_by_name(module, name: str, change: dict, message: str) -> None:
    document = reference_config(name).to_dict() | change
    with pytest.raises(CheckpointError, match=message):
        module.config_of(document)


def test_a_t5_v11_file_without_lm_head_uses_the_shared_matrix_as_transformers_5_does() -> None:
    config = t5.config_of(reference_config("t5-v1.1").to_dict())
    state = {name: torch.randn(shape) for name, shape in mapping.expected_shapes(t5.FAMILY, config).items()}
    del state["lm_head.weight"]
    ours = mapping.weights_of(t5.FAMILY, state, config)
    assert ours["generator.weight"] is state["shared.weight"]
    tied = t5.config_of(reference_config("t5").to_dict())
    state = {name: torch.randn(shape) for name, shape in mapping.expected_shapes(t5.FAMILY, tied).items()}
    with pytest.raises(CheckpointError, match="lm_head.weight differs from the shared embedding"):
        mapping.weights_of(t5.FAMILY, state, tied)  # a tied config with an lm_head of its own: the versions disagree


def test_missing_tensors_are_named() -> None:
    config = bart.config_of(reference_config("bart").to_dict())
    state = {name: torch.randn(shape) for name, shape in mapping.expected_shapes(bart.FAMILY, config).items()}
    del state["model.decoder.layers.1.encoder_attn.k_proj.weight"]
    with pytest.raises(CheckpointError, match="lack 1 tensors.*decoder.layers.1.encoder_attn.k_proj.weight"):
        mapping.weights_of(bart.FAMILY, state, config)


def test_marian_is_registered_under_the_same_three_names() -> None:
    from transformers import MarianConfig

    document = MarianConfig(vocab_size=30, d_model=8, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                            decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16, pad_token_id=29,
                            eos_token_id=0, decoder_start_token_id=29).to_dict()
    config = marian.config_of(document)
    assert config.positional == "marian" and config.unk_id == 1
    state = {name: torch.randn(shape) for name, shape in mapping.expected_shapes(marian.FAMILY, config).items()}
    assert set(mapping.weights_of(marian.FAMILY, state, config)) >= {"src_embed.weight", "generator.bias"}



def test_every_family_reads_its_config_through_the_torch_free_reader() -> None:
    """One reader per model_type, its family file's (which the app's early diagram uses too, through
    ``families.config_of``): the registry's and the family modules' are the same functions, and a type no family
    reads is refused by name."""
    from transformer.hub.families import config_of, registry

    assert list(registry()) == ["marian", "t5", "bart", "mbart", "m2m_100", "gpt2", "llama", "mistral", "qwen2",
                                "qwen3", "gemma2", "gemma3_text"]
    assert all(registry()[module.FAMILY.model_type].config_of is module.config_of
               for module in (marian, t5, bart, mbart, m2m_100))
    assert config_of(reference_config("bart").to_dict()) == bart.config_of(reference_config("bart").to_dict())
    with pytest.raises(ValueError, match="model_type 'phi3' is not one of marian, t5"):
        config_of({"model_type": "phi3"})


@pytest.mark.parametrize(("rows", "width", "pad"), [(42, 16, 1), (70, 10, 1), (20, 7, 0), (30, 12, 5)])
def test_fairseq_table_is_m2m100s_bit_for_bit(rows: int, width: int, pad: int) -> None:
    from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding as Theirs

    assert torch.equal(fairseq_table(rows, width, pad), Theirs.get_embedding(rows, width, pad))


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize(("buckets", "distance"), [(32, 128), (8, 12), (6, 7)])
def test_relative_buckets_are_t5s(bidirectional: bool, buckets: int, distance: int) -> None:
    from transformers.models.t5.modeling_t5 import T5Attention

    relative = torch.arange(-300, 301)[None, :] - torch.zeros(3, 1, dtype=torch.long)
    theirs = T5Attention._relative_position_bucket(relative, bidirectional, buckets, distance)
    assert torch.equal(relative_bucket(relative, bidirectional, buckets, distance), theirs)
