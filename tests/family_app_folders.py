"""Tiny real model folders of the T5, BART, mBART-50 and NLLB families, as ``save_pretrained`` writes them.

Each is a ``transformers`` model of the family (random weights from a private seed, tiny sizes: d_model 16, 2 heads,
1 + 2 layers, a vocabulary of the family's tokenizer from ``family_helpers``), saved with ``save_pretrained`` next to
the tokenizer's files and a ``generation_config.json`` with the family's usual decoding settings. The package opens
them through the real network mappings (``hub/t5.py``, ``bart.py``, ``m2m100.py``); ``transformers`` is the
test-only writer.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

# tokenizer layout (family_helpers) -> (model_type, (pad, eos, decoder start), generation_config.json)
FAMILY_FOLDERS = {
    "t5": ("t5", (0, 1, 0), {"decoder_start_token_id": 0, "max_length": 9}),
    "bart": ("bart", (1, 2, 2), {"forced_bos_token_id": 0, "forced_eos_token_id": 2, "max_length": 9,
                                 "num_beams": 2}),
    "mbart50": ("mbart", (1, 2, 2), {"forced_eos_token_id": 2, "max_length": 9, "num_beams": 2}),
    "nllb": ("m2m_100", (1, 2, 2), {"max_length": 9}),
}


def vocabulary_size(tokenizer_folder: Path) -> int:
    """The ids of a tokenizer.json: its model's pieces and the added tokens that are not among them."""
    document = json.loads((tokenizer_folder / "tokenizer.json").read_text(encoding="utf-8"))
    pieces = document["model"]["vocab"]
    return len(pieces) + len([t for t in document["added_tokens"] if t["content"] not in pieces])


def family_config(layout: str, vocab_size: int):  # noqa: ANN201  (a transformers config)
    """The tiny ``transformers`` config of ``layout``'s family (T5: v1.1's gated-gelu, heads of d_kv 4)."""
    from transformers import BartConfig, M2M100Config, MBartConfig, T5Config

    model_type, (pad, eos, start), _ = FAMILY_FOLDERS[layout]
    if model_type == "t5":
        return T5Config(vocab_size=vocab_size, d_model=16, d_kv=4, d_ff=24, num_layers=1, num_decoder_layers=2,
                        num_heads=2, relative_attention_num_buckets=8, relative_attention_max_distance=16,
                        feed_forward_proj="gated-gelu", tie_word_embeddings=False, dropout_rate=0.0,
                        pad_token_id=pad, eos_token_id=eos, decoder_start_token_id=start)
    common = dict(vocab_size=vocab_size, d_model=16, encoder_layers=1, decoder_layers=2, encoder_attention_heads=2,
                  decoder_attention_heads=2, encoder_ffn_dim=24, decoder_ffn_dim=24, max_position_embeddings=64,
                  pad_token_id=pad, bos_token_id=0, eos_token_id=eos, decoder_start_token_id=start, dropout=0.0)
    kind = {"bart": BartConfig, "mbart": MBartConfig, "m2m_100": M2M100Config}[model_type]
    return kind(**common, scale_embedding=model_type != "bart")


def build_family_folder(root: Path, layout: str, tokenizer_folder: Path, name: str | None = None,
                        seed: int = 0) -> Path:
    """``root/name`` (default: ``layout``): a saved model of ``layout``'s family with its tokenizer's files."""
    from transformers import AutoModelForSeq2SeqLM

    folder = root / (name or layout)
    config = family_config(layout, vocabulary_size(tokenizer_folder))
    model_type = FAMILY_FOLDERS[layout][0]
    with torch.random.fork_rng():  # transformers initialises from the global generator: keep it unchanged
        torch.manual_seed(seed)
        model = AutoModelForSeq2SeqLM.from_config(config)
    if model_type == "t5":  # as training leaves a real T5 (PAD's label positions are ignored), PAD never wins: its
        with torch.no_grad():  # output row, shared with the embedding, shrunk 20-fold (logit about 0, below the best
            model.shared.weight[config.pad_token_id] *= 0.05  # of ~100); its embedding stays far from zero (the
            # integrated-gradients baseline). Random weights echo the decoder start, which is PAD.
    model.save_pretrained(folder, safe_serialization=True)
    for path in tokenizer_folder.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    (folder / "generation_config.json").write_text(json.dumps(FAMILY_FOLDERS[layout][2]), encoding="utf-8")
    return folder
