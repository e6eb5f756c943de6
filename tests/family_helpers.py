"""Tokenizer folders of the T5, BART, mBART-50 and NLLB families, built in seconds without a download.

A SentencePiece model is trained on a small generated corpus and handed to ``transformers``' own tokenizer classes
(``T5TokenizerFast``, ``MBart50TokenizerFast``, ``NllbTokenizerFast``), which convert it and write a folder with
``tokenizer.json`` as ``save_pretrained`` writes it for a real model; BART's byte-level BPE is trained with the
``tokenizers`` library and handed to ``BartTokenizerFast``. ``transformers`` is the test-only reference: a test
that needs these folders is skipped without it.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

WORDS = ("the house is small big dog cat über straße café naïve résumé garçon 12 345 2024 3.14 hello world ¿qué? "
         "¡hola! déjà vu 😀 🚀 Zürich München Köln ça Ελλάδα Москва 東京 don't it's we're (yes) [no] "
         "e-mail 50% $20 #1 @home a/b x+y").split()

# At least 30 texts with punctuation, digits, accents and emoji, and the awkward cases: runs of spaces, leading and
# trailing spaces, characters no piece covers, literal special tokens, an empty string.
SENTENCES = [
    "The house is small.", "The  house   is big!", " leading and trailing ", "Über 12 Straßen, 345 Häuser?",
    "café, naïve, résumé: déjà vu.", "¿Qué tal? ¡Hola!", "Numbers: 0 1 2 3 4 5 6 7 8 9 10 100 1000 3.14 -7",
    "Emoji 😀🚀 and more 😀 here.", "Zürich–München–Köln", "Ελλάδα και Москва и 東京", "don't, it's, we're.",
    "(brackets) [square] {curly}", "e-mail: a@b.c, 50% off, $20, #1", "x+y=z; a/b\\c", "Tab\tand\nnewline",
    "UPPER lower MiXeD", "ça va? oui.", "A sentence with a very long word: Donaudampfschifffahrtsgesellschaft.",
    "1st 2nd 3rd 4th", "'quotes' \"double\" «guillemets» „German“", "..., !!! ???", "half½ quarter¼ ², ³",
    "ﬁ ligature and Ａ fullwidth", "the </s> end <pad> and <unk>", "<s> start", "a  b   c    d",
    "hello world 2024", "Straße in Köln, Zürich und München.", "naïve café 😀", "  ", "",
    "Ünïcödé ëvërÿwhërë!", "Price: 12,50 € or £9.99", "Date 2024-05-17 at 10:30", "中文 and 日本語 mixed",
]


def corpus(n: int = 3000, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))) + rng.choice([".", "!", "?", ",", ""])
            for _ in range(n)]


def train_spm(**options) -> bytes:
    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus()), model_writer=model, vocab_size=300,
                                   hard_vocab_limit=False, character_coverage=0.98, num_threads=1, minloglevel=2,
                                   **options)
    return model.getvalue()


def build_family_tokenizers(root: Path) -> dict[str, Path]:
    """Folders ``root/<layout>`` (t5, bart, mbart50, nllb), each with tokenizer.json and tokenizer_config.json as
    ``save_pretrained`` writes them."""
    import transformers
    from tokenizers import ByteLevelBPETokenizer
    from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES

    folders = {name: root / name for name in ("t5", "bart", "mbart50", "nllb")}
    sources = root / "sources"
    (sources / "t5").mkdir(parents=True)
    (sources / "t5" / "spiece.model").write_bytes(train_spm(model_type="unigram", pad_id=0, eos_id=1, unk_id=2,
                                                            bos_id=-1))
    transformers.T5TokenizerFast.from_pretrained(str(sources / "t5"), extra_ids=5).save_pretrained(folders["t5"])
    (sources / "fairseq").mkdir()
    (sources / "fairseq" / "sentencepiece.bpe.model").write_bytes(train_spm(model_type="bpe"))
    transformers.MBart50TokenizerFast.from_pretrained(str(sources / "fairseq"), src_lang="en_XX", tgt_lang="de_DE"
                                                      ).save_pretrained(folders["mbart50"])
    transformers.NllbTokenizerFast.from_pretrained(
        str(sources / "fairseq"), additional_special_tokens=list(FAIRSEQ_LANGUAGE_CODES), src_lang="eng_Latn",
    ).save_pretrained(folders["nllb"])
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(corpus(), vocab_size=400, min_frequency=2,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"], show_progress=False)
    (sources / "bart").mkdir()
    bpe.save_model(str(sources / "bart"))
    transformers.BartTokenizerFast.from_pretrained(str(sources / "bart")).save_pretrained(folders["bart"])
    return folders


def tokenizer_document(folder: Path) -> dict:
    return json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
