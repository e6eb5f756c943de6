"""Tiny Hugging Face Marian folders built inside the tests, as ``save_pretrained`` writes them (no network).

``make_marian_folder`` trains two small SentencePiece models on a generated corpus, writes vocab.json the
way MarianTokenizer's conversion does ("</s>" 0, "<unk>" 1, the pieces, "<pad>" last), and saves a
``transformers.MarianMTModel`` of the asked configuration with every parameter drawn at random (so a
mis-mapped weight cannot hide behind an initialisation of ones or zeros).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import sentencepiece as spm
import torch

from transformer.text.tasks import make_task


def corpus(n: int = 300, seed: int = 0) -> list[tuple[str, str]]:
    """(source, target) pairs of the reverse task: short strings of letters and their reversal."""
    return make_task("reverse", n_train=n, n_valid=0, n_test=0, seed=seed).train


def train_spm(texts: list[str], vocab_size: int) -> bytes:
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_writer=model, vocab_size=vocab_size,
                                   model_type="unigram", character_coverage=1.0, hard_vocab_limit=False,
                                   unk_id=0, bos_id=-1, eos_id=1, pad_id=-1, unk_piece="<unk>", eos_piece="</s>",
                                   num_threads=1, minloglevel=2)
    return model.getvalue()


def vocabulary(*protos: bytes, extra: tuple[str, ...] = ()) -> dict[str, int]:
    """Marian's vocab.json: "</s>" 0, "<unk>" 1, every piece of the given models, ``extra`` pieces, "<pad>" last."""
    pieces = ["</s>", "<unk>"]
    for proto in protos:
        sp = spm.SentencePieceProcessor(model_proto=proto)
        pieces += [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if sp.id_to_piece(i) not in pieces]
    pieces += [p for p in extra if p not in pieces]
    pieces.append("<pad>")
    return {piece: i for i, piece in enumerate(pieces)}


def make_marian_folder(folder: Path, *, activation: str = "swish", scale_embedding: bool = True,
                       encoder_layers: int = 2, decoder_layers: int = 2, shared: bool = True,
                       safetensors: bool = True, d_model: int = 16, heads: int = 2, ffn: int = 32,
                       max_positions: int = 64, seed: int = 0, randomize: bool = True) -> Path:
    """Write a tiny MarianMTModel folder (config, weights, tokenizer files); returns the folder."""
    from transformers import MarianConfig, MarianMTModel

    pairs = corpus(seed=seed)
    source_spm = train_spm([s for s, _ in pairs], 48)
    target_spm = train_spm([t.upper() for _, t in pairs] if not shared else [t for _, t in pairs], 48)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "source.spm").write_bytes(source_spm)
    (folder / "target.spm").write_bytes(target_spm)
    if shared:
        vocab = vocabulary(source_spm, target_spm, extra=(">>de<<",))
        target_vocab = vocab
    else:
        # Two vocabularies of one size, so that "<pad>" (the last id) is one id on both sides, as this package
        # needs (one pad id per model); the matrices stay separate.
        vocab = vocabulary(source_spm, extra=(">>de<<",))
        target_vocab = vocabulary(target_spm)
        size = max(len(vocab), len(target_vocab)) + 3
        vocab = vocabulary(source_spm, extra=(">>de<<", *(f"▁src{i}" for i in range(size - len(vocab)))))
        target_vocab = vocabulary(target_spm, extra=tuple(f"▁tgt{i}" for i in range(size - len(target_vocab))))
        (folder / "target_vocab.json").write_text(json.dumps(target_vocab), encoding="utf-8")
    (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps({"separate_vocabs": not shared,
                                                              "source_lang": "xx", "target_lang": "yy"}))
    pad = len(vocab) - 1
    config = MarianConfig(
        vocab_size=len(vocab), decoder_vocab_size=len(target_vocab), d_model=d_model,
        encoder_layers=encoder_layers, decoder_layers=decoder_layers, encoder_attention_heads=heads,
        decoder_attention_heads=heads, encoder_ffn_dim=ffn, decoder_ffn_dim=ffn, max_position_embeddings=max_positions,
        activation_function=activation, scale_embedding=scale_embedding, pad_token_id=pad, eos_token_id=0,
        decoder_start_token_id=len(target_vocab) - 1 if not shared else pad, forced_eos_token_id=0,
        share_encoder_decoder_embeddings=shared, dropout=0.1, max_length=40, num_beams=2,
    )
    torch.manual_seed(seed)
    model = MarianMTModel(config).eval()
    if randomize:
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if "embed_positions" not in name:
                    parameter.normal_(0.0, 0.3)
            model.final_logits_bias.normal_(0.0, 0.3)
    model.save_pretrained(folder, safe_serialization=safetensors)
    if not safetensors:  # transformers 5 may write safetensors regardless: keep the .bin the opus-mt repos hold
        for path in folder.glob("model*.safetensors*"):
            path.unlink()
        if not (folder / "pytorch_model.bin").exists():
            torch.save(model.state_dict(), folder / "pytorch_model.bin")
    return folder
