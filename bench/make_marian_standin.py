"""Write a stand-in for Helsinki-NLP/opus-mt-en-de: a Marian folder of the real size with random weights.

Real opus-mt weights cannot be downloaded on the benchmark machine, but time and memory depend on the sizes,
not the values: d_model 512, 6 + 6 layers, 8 heads, d_ff 2048, a shared vocabulary of 58,101 pieces, SiLU,
Marian's positions, scaled embeddings, tied generator. The folder is what ``save_pretrained`` writes
(config.json with model_type "marian", model.safetensors under transformers' names, source.spm, target.spm,
vocab.json), so the app and ``load_pretrained`` open it through ``transformer.hub`` like the real one. The
SentencePiece models are small ones (BPE) trained on the sentences task and the app's English examples, which
they cut into about as many pieces as opus-mt's does; vocab.json lists their pieces and then filler pieces up
to 58,101, as many ids as the real model has. A random model never writes </s>: every output runs to the app's
bound (3 tokens per source token + 10), about 3x a real translation's length.

    python bench/make_marian_standin.py /tmp/models        # writes /tmp/models/opus-mt-standin
    python bench/bench_app.py --models-dir /tmp/models --model opus-mt-standin
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

import sentencepiece as spm
import torch
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from transformer.hub.families import marian  # noqa: E402
from transformer.hub.mapping import to_theirs  # noqa: E402
from transformer.network.config import TransformerConfig  # noqa: E402
from transformer.network.model import Transformer  # noqa: E402
from transformer.text.tasks import make_task  # noqa: E402
from ui.compute.analysis import ENGLISH_EXAMPLES  # noqa: E402

VOCAB = 58_101


def write_standin(folder: Path, vocab: int = VOCAB, seed: int = 0) -> Path:
    # The app's English inputs weigh in, so that their words are single pieces as in opus-mt's 58k-piece
    # SentencePiece ("Where is the train station?": 9 ids here, 7 there; trained on the sentences task alone,
    # 19 ids of single letters): sequence lengths, which set most costs in the app, are then about a real model's.
    texts = [s for s, _ in make_task("sentences", n_train=3000, n_valid=0, n_test=0, seed=seed).train]
    texts += ENGLISH_EXAMPLES * 50
    model_bytes = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_writer=model_bytes, vocab_size=1000,
                                   model_type="bpe", character_coverage=1.0, unk_id=0, bos_id=-1, eos_id=1, pad_id=-1,
                                   unk_piece="<unk>", eos_piece="</s>", hard_vocab_limit=False, num_threads=1,
                                   minloglevel=2)
    sp = spm.SentencePieceProcessor(model_proto=model_bytes.getvalue())
    pieces = ["</s>", "<unk>", *(p for p in (sp.id_to_piece(i) for i in range(sp.get_piece_size()))
                                 if p not in ("</s>", "<unk>"))]
    pieces += [f"▁filler{i}" for i in range(vocab - 1 - len(pieces))]
    pieces.append("<pad>")
    config = TransformerConfig(src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=512, n_heads=8, n_layers=6,
                               d_ff=2048, dropout=0.1, max_len=512, pad_id=vocab - 1, eos_id=0, unk_id=1,
                               bos_id=vocab - 1, activation="silu", positional="marian", final_norm=False,
                               tying="all")
    torch.manual_seed(seed)
    model = Transformer(config).eval()
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.contiguous().clone() for k, v in to_theirs(marian.FAMILY, model.state_dict(), config).items()}
    for name in ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight"):
        tensors.pop(name)  # save_pretrained keeps one name of a tied group
    save_file(tensors, folder / "model.safetensors")
    (folder / "config.json").write_text(json.dumps({
        "model_type": "marian", "vocab_size": vocab, "decoder_vocab_size": vocab, "d_model": 512,
        "encoder_layers": 6, "decoder_layers": 6, "encoder_attention_heads": 8, "decoder_attention_heads": 8,
        "encoder_ffn_dim": 2048, "decoder_ffn_dim": 2048, "max_position_embeddings": 512,
        "activation_function": "swish", "scale_embedding": True, "pad_token_id": vocab - 1, "eos_token_id": 0,
        "decoder_start_token_id": vocab - 1, "share_encoder_decoder_embeddings": True, "dropout": 0.1,
        "architectures": ["MarianMTModel"]}, indent=2))
    (folder / "generation_config.json").write_text(json.dumps({"max_length": 512, "num_beams": 4,
                                                               "bad_words_ids": [[vocab - 1]]}))
    for name in ("source.spm", "target.spm"):
        (folder / name).write_bytes(model_bytes.getvalue())
    (folder / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(pieces)}, ensure_ascii=False))
    (folder / "tokenizer_config.json").write_text(json.dumps({"source_lang": "en", "target_lang": "de",
                                                              "separate_vocabs": False}))
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the models folder to write opus-mt-standin into")
    args = parser.parse_args()
    folder = write_standin(args.out / "opus-mt-standin")
    print(f"wrote {folder}")


if __name__ == "__main__":
    main()
