"""``hub.fast_tokenizer``: the ids and texts ``AutoTokenizer`` gives, for T5, BART, mBART-50 and NLLB folders.

The folders are written by ``transformers``' own classes (``family_helpers``); the reference is ``AutoTokenizer``
on the same folder, with its special tokens (``tokens </s>``, ``<s> tokens </s>``, ``[src_lang] tokens </s>``).
"""

from __future__ import annotations

import json
import random
import warnings

import pytest
from family_helpers import SENTENCES, tokenizer_document

from transformer.hub.fast_tokenizer import LAYOUTS, FastTokenizer, load_fast_tokenizer

STARTS = {"t5": 0, "bart": 2, "mbart50": 2, "nllb": 2}  # config.json's decoder_start_token_id per family
LANGUAGES = {"mbart50": ("en_XX", "de_DE", "fr_XX"), "nllb": ("eng_Latn", "deu_Latn", "fra_Latn")}


def reference(folder, **options):
    from transformers import AutoTokenizer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return AutoTokenizer.from_pretrained(folder, **options)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_source_ids_equal_autotokenizers(family_tokenizers, layout):
    folder = family_tokenizers[layout]
    ours = load_fast_tokenizer(folder, layout, decoder_start_id=STARTS[layout])
    assert len(SENTENCES) >= 30
    for lang in LANGUAGES.get(layout, (None,)):
        theirs = reference(folder, **({"src_lang": lang} if lang else {}))
        for text in SENTENCES:
            assert [*ours.source_prefix(lang), *ours.encode(text), ours.eos_id] == theirs(text)["input_ids"], text
            assert ours.encode(text) == theirs(text, add_special_tokens=False)["input_ids"], text


@pytest.mark.parametrize("layout", LAYOUTS)
def test_special_tokens_are_autotokenizers_special_tokens(family_tokenizers, layout):
    """``special_tokens`` (what the head statistics call special) is AutoTokenizer's ``all_special_ids`` (language
    codes included) and whatever else the file marks special, each with its piece, plus the decoder's start."""
    folder = family_tokenizers[layout]
    ours, theirs = load_fast_tokenizer(folder, layout, decoder_start_id=STARTS[layout]), reference(folder)
    special = ours.special_tokens()
    marked = {i for i, token in theirs.added_tokens_decoder.items() if token.special}
    assert set(special) == set(theirs.all_special_ids) | marked | {STARTS[layout]}
    assert all(special[i] == theirs.convert_ids_to_tokens(i) for i in special)
    for code in LANGUAGES.get(layout, ()):
        assert theirs.convert_tokens_to_ids(code) in special


@pytest.mark.parametrize("layout", LAYOUTS)
def test_decode_equals_autotokenizers(family_tokenizers, layout):
    folder = family_tokenizers[layout]
    ours, theirs = load_fast_tokenizer(folder, layout, decoder_start_id=STARTS[layout]), reference(folder)
    rng = random.Random(0)
    rows = [theirs(text)["input_ids"] for text in SENTENCES]
    rows += [[rng.randrange(len(theirs)) for _ in range(rng.randint(0, 12))] for _ in range(100)]
    for ids in rows:
        assert ours.decode(ids) == theirs.decode(ids, skip_special_tokens=True), ids


@pytest.mark.parametrize("layout", LAYOUTS)
def test_an_older_pipeline_in_the_file_is_rebuilt_as_transformers_does(family_tokenizers, layout, tmp_path):
    """transformers 5 keeps a tokenizer.json's vocabulary but rebuilds its normaliser, pre-tokeniser and decoder; a
    file whose pipeline says otherwise (as older files may) still tokenizes the class's way."""
    document = tokenizer_document(family_tokenizers[layout])
    document["pre_tokenizer"] = {"type": "Whitespace"}
    document["decoder"] = {"type": "Fuse"}
    if layout != "bart":  # keep the charsmap, drop the rest
        document["normalizer"] = {"type": "Sequence", "normalizers": [
            *[n for n in document["normalizer"].get("normalizers", []) if n["type"] == "Precompiled"],
            {"type": "Lowercase"}]}
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        if (family_tokenizers[layout] / name).is_file():
            (tmp_path / name).write_bytes((family_tokenizers[layout] / name).read_bytes())
    (tmp_path / "tokenizer.json").write_text(json.dumps(document), encoding="utf-8")
    ours, theirs = load_fast_tokenizer(tmp_path, layout, decoder_start_id=STARTS[layout]), reference(tmp_path)
    for text in SENTENCES:
        ids = theirs(text, add_special_tokens=False)["input_ids"]
        assert ours.encode(text) == ids, text
        assert ours.decode(ids) == theirs.decode(ids, skip_special_tokens=True), text


def test_special_ids_and_the_decoder_start(family_tokenizers):
    expected = {"t5": (0, 2, 1), "bart": (1, 3, 2), "mbart50": (1, 3, 2), "nllb": (1, 3, 2)}
    for layout, (pad, unk, eos) in expected.items():
        tokenizer = load_fast_tokenizer(family_tokenizers[layout], layout, decoder_start_id=STARTS[layout])
        assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.eos_id, tokenizer.bos_id) == (pad, unk, eos,
                                                                                          STARTS[layout])
    bart = load_fast_tokenizer(family_tokenizers["bart"], "bart", decoder_start_id=2)
    assert bart.source_prefix() == [bart.piece_to_id("<s>")] == [0]


@pytest.mark.parametrize("layout", ["mbart50", "nllb"])
def test_language_codes(family_tokenizers, layout):
    tokenizer = load_fast_tokenizer(family_tokenizers[layout], layout, decoder_start_id=2)
    codes = tokenizer.language_codes
    assert set(LANGUAGES[layout]) <= set(codes) and len(codes) == (52 if layout == "mbart50" else 202)
    theirs = reference(family_tokenizers[layout])
    assert all(theirs.convert_tokens_to_ids(code) == tokenizer.lang_code_ids[code] for code in codes)
    with pytest.raises(ValueError, match="unknown language code 'xx_YY'; choose one of .*de_DE|deu_Latn"):
        tokenizer.source_prefix("xx_YY")
    assert tokenizer.decode([tokenizer.lang_code_ids[codes[0]]]) == ""  # a code is a special token: dropped


def test_model_rows_past_the_tokenizer(family_tokenizers):
    """Flan-T5 embeds 32,128 ids with 32,100 pieces: the extra ids have a name and decode to nothing."""
    folder = family_tokenizers["t5"]
    own = load_fast_tokenizer(folder, "t5", decoder_start_id=0).vocab_size
    tokenizer = load_fast_tokenizer(folder, "t5", decoder_start_id=0, vocab_size=own + 3)
    assert tokenizer.vocab_size == own + 3 and tokenizer.id_to_piece(own + 1) == f"<unused {own + 1}>"
    ids = reference(folder)("the house.")["input_ids"]
    assert tokenizer.decode([*ids, own + 2]) == tokenizer.decode(ids) == "the house."
    with pytest.raises(ValueError, match="out of range"):
        tokenizer.decode([own + 3])
    with pytest.raises(ValueError, match="embeds only"):
        load_fast_tokenizer(folder, "t5", decoder_start_id=0, vocab_size=own - 1)


def test_scores_and_save(family_tokenizers, tmp_path):
    t5 = load_fast_tokenizer(family_tokenizers["t5"], "t5", decoder_start_id=0)
    vocab = tokenizer_document(family_tokenizers["t5"])["model"]["vocab"]
    assert [t5.score(i) for i in range(len(vocab))] == [float(score) for _, score in vocab]
    assert t5.kind == "unigram" and load_fast_tokenizer(family_tokenizers["nllb"], "nllb",
                                                        decoder_start_id=2).kind == "bpe"
    (path,) = t5.save(tmp_path, "source")
    again = FastTokenizer(json.loads(path.read_text(encoding="utf-8")), "t5", decoder_start_id=0)
    assert all(again.encode(text) == t5.encode(text) for text in SENTENCES)


def test_broken_folders_are_named(family_tokenizers, tmp_path):
    with pytest.raises(ValueError, match="no tokenizer.json.*save_pretrained"):
        load_fast_tokenizer(tmp_path, "t5", decoder_start_id=0)
    (tmp_path / "tokenizer.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="tokenizer.json"):
        load_fast_tokenizer(tmp_path, "t5", decoder_start_id=0)
    document = tokenizer_document(family_tokenizers["t5"])
    (tmp_path / "tokenizer.json").write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(ValueError, match="language codes"):  # a T5 file read as mBART-50's
        load_fast_tokenizer(tmp_path, "mbart50", decoder_start_id=2)
    with pytest.raises(ValueError, match="unknown tokenizer layout"):
        FastTokenizer(document, "gpt2", decoder_start_id=0)
