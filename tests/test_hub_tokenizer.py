"""``transformer.hub.tokenizer`` gives the ids and texts ``transformers.MarianTokenizer`` gives, on tiny folders.

Each folder is built here: two small SentencePiece models trained in memory on generated sentences (a
unigram source, a BPE target with a control symbol), and a vocab.json written the way Marian's conversion
writes it ("</s>" 0, "<unk>" 1, the pieces, language tags, "<pad>" last). A few pieces are left out of the
vocabulary on purpose, so that "a piece the vocabulary lacks becomes <unk>" is exercised too.
"""

from __future__ import annotations

import io
import json
import random
import warnings
from pathlib import Path

import pytest
import sentencepiece as spm

from transformer.hub.tokenizer import MarianSide, load_marian_tokenizers, split_language_code
from transformer.text.ids import source_ids

SOURCE_WORDS = "the a cat dog sees runs small big house tree red blue walks under over near river old new".split()
TARGET_WORDS = "der die das Katze Hund sieht läuft klein groß Haus Baum rot blau geht unter über nahe Fluss".split()
LEFT_OUT = 3  # every LEFT_OUT-th ordinary piece of each model stays out of the vocabulary

TEXTS = [
    "the cat sees a dog .",
    "a small red house near the river",
    "der Hund sieht die Katze",
    "Zürich ☃ 123 qxz",  # characters neither model has
    ">>de<< the cat runs",
    ">>de<<the cat",
    ">>fr<< the dog",
    ">>xx<< unknown tag",  # a tag the vocabulary lacks
    "  >>de<< leading spaces: no tag",
    "the >>de<< tag in the middle",
    ">>de and no end",
    ">><< empty tag",
    ">>de<< first <<second<<",
    "the   cat    runs   ",
    "\tthe cat\n",
    "",
    " ",
    "</s>",
    "the cat </s> the dog",
    "<unk><pad>the<pad>",
    "</s>>>de<< a tag after a special piece",
    "a ▁ b ▁▁",
    "the cat , sees . a dog ! ?",
    "don't walk 're 's",
]


def sentences(words: list[str], n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(2, 7))) + rng.choice(["", " .", " !"])
            for _ in range(n)]


def train(texts: list[str], vocab_size: int, model_type: str, **options) -> bytes:
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_writer=model, vocab_size=vocab_size,
                                   model_type=model_type, character_coverage=1.0, hard_vocab_limit=False,
                                   num_threads=1, minloglevel=2, **options)
    return model.getvalue()


def vocabulary(*protos: bytes, tags: tuple[str, ...] = ()) -> dict[str, int]:
    """Marian's layout: "</s>" 0, "<unk>" 1, the models' pieces (some left out), tags, "<pad>" last."""
    pieces = ["</s>", "<unk>"]
    for proto in protos:
        sp = spm.SentencePieceProcessor(model_proto=proto)
        ordinary = [sp.id_to_piece(i) for i in range(sp.get_piece_size())
                    if not (sp.is_unknown(i) or sp.id_to_piece(i) in ("<s>", "</s>"))]
        pieces += [p for k, p in enumerate(ordinary) if k % LEFT_OUT != 1 and p not in pieces]
    pieces += [*(t for t in tags if t not in pieces), "<pad>"]
    return {piece: i for i, piece in enumerate(pieces)}


def write_folder(folder: Path, *, separate: bool = False, clean_up: bool | None = None) -> Path:
    source = train(sentences(SOURCE_WORDS, 300, seed=1), 60, "unigram")
    target = train(sentences(TARGET_WORDS, 300, seed=2), 70, "bpe", control_symbols=["<ctl>"])
    folder.mkdir(parents=True)
    (folder / "source.spm").write_bytes(source)
    (folder / "target.spm").write_bytes(target)
    settings: dict = {"source_lang": "en", "target_lang": "de", "separate_vocabs": separate}
    if clean_up is not None:
        settings["clean_up_tokenization_spaces"] = clean_up
    (folder / "tokenizer_config.json").write_text(json.dumps(settings), encoding="utf-8")
    if separate:
        (folder / "vocab.json").write_text(json.dumps(vocabulary(source, tags=(">>de<<",))), encoding="utf-8")
        (folder / "target_vocab.json").write_text(json.dumps(vocabulary(target)), encoding="utf-8")
    else:
        vocab = vocabulary(source, target, tags=(">>de<<", ">>fr<<", "<ctl>"))
        (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("marian-tokenizers")
    return {"shared": write_folder(root / "shared"), "separate": write_folder(root / "separate", separate=True),
            "clean-up": write_folder(root / "clean-up", clean_up=True)}


def reference(folder: Path):
    transformers = pytest.importorskip("transformers")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Recommended: pip install sacremoses."
        return transformers.MarianTokenizer.from_pretrained(str(folder))


def all_texts() -> list[str]:
    return TEXTS + sentences(SOURCE_WORDS + TARGET_WORDS + ["xyz", "Ω", ">>de<<"], 60, seed=3)


@pytest.mark.parametrize("case", ["shared", "separate", "clean-up"])
def test_encode_matches_marian_tokenizer(folders, case):
    hf = reference(folders[case])
    source, target = load_marian_tokenizers(folders[case])
    for text in all_texts():
        assert source_ids(source, text) == hf(text)["input_ids"], text
        if case == "separate" and "<pad>" in text:
            # MarianTokenizer gives a literal "<pad>" the source vocabulary's id, on the target side too; the
            # two differ here, and the target side's own id is the one its embedding table has.
            assert hf(text_target=text)["input_ids"][1] == source.pad_id != target.pad_id == target.encode(text)[1]
            continue
        assert source_ids(target, text) == hf(text_target=text)["input_ids"], text


@pytest.mark.parametrize("case", ["shared", "separate", "clean-up"])
def test_decode_matches_marian_tokenizer(folders, case):
    hf = reference(folders[case])
    source, target = load_marian_tokenizers(folders[case])
    sequences = [source_ids(target, text) for text in all_texts()]
    rng = random.Random(0)
    sequences += [[rng.randrange(target.vocab_size) for _ in range(rng.randint(0, 12))] for _ in range(300)]
    if case == "separate":
        # MarianTokenizer skips the *source* vocabulary's special ids on the target side too: with vocabularies
        # of different sizes it drops the target piece at the source's "<pad>" id, and writes the target's own
        # "<pad>" out as text. The target side here uses its own ids; those two ids are left out of the comparison.
        divergent = {hf.pad_token_id, target.pad_id}
        assert len(divergent) == 2 and hf.decode([hf.pad_token_id], skip_special_tokens=True) == ""
        assert target.decode([hf.pad_token_id]) == target.id_to_piece(hf.pad_token_id).replace("▁", " ").strip()
        sequences = [[i for i in sequence if i not in divergent] for sequence in sequences]
    for sequence in sequences:
        assert target.decode(sequence) == hf.decode(sequence, skip_special_tokens=True), sequence


def test_a_shared_vocabulary_decodes_with_the_source_model(folders):
    """MarianTokenizer (transformers 5) joins target pieces with source.spm when the vocabulary is shared: a
    control symbol of target.spm, which target.spm would hide, comes out as text."""
    hf = reference(folders["shared"])
    _, target = load_marian_tokenizers(folders["shared"])
    word = next(i for i in range(2, target.vocab_size) if target.id_to_piece(i).startswith("▁") and
                len(target.id_to_piece(i)) > 2)
    ids = [target.piece_to_id("<ctl>"), word]
    assert target.id_to_piece(ids[0]) == "<ctl>"
    expected = "<ctl> " + target.id_to_piece(word)[1:]
    assert target.decode(ids) == hf.decode(ids, skip_special_tokens=True) == expected


def test_special_ids_come_from_the_vocabulary(folders):
    source, target = load_marian_tokenizers(folders["shared"])
    vocab = json.loads((folders["shared"] / "vocab.json").read_text(encoding="utf-8"))
    for side in (source, target):
        assert (side.eos_id, side.unk_id, side.pad_id) == (0, 1, len(vocab) - 1)
        assert side.bos_id == side.pad_id
        assert side.vocab_size == len(vocab)
        assert side.id_to_piece(0) == "</s>" and side.piece_to_id("<pad>") == len(vocab) - 1
        assert side.piece_to_id("never-a-piece") == side.unk_id
    assert source.kind == "unigram" and target.kind == "bpe"
    assert source.language_codes == [">>de<<", ">>fr<<"]

    _, separate_target = load_marian_tokenizers(folders["separate"])
    target_vocab = json.loads((folders["separate"] / "target_vocab.json").read_text(encoding="utf-8"))
    assert separate_target.vocab_size == len(target_vocab)
    assert separate_target.pad_id == separate_target.bos_id == len(target_vocab) - 1


def test_language_tag_is_one_piece(folders):
    source, _ = load_marian_tokenizers(folders["shared"])
    assert split_language_code(">>de<< x") == ([">>de<<"], " x")
    assert split_language_code(" >>de<< x") == ([], " >>de<< x")
    assert source.pieces(">>de<< the cat")[0] == ">>de<<"
    assert source.encode(">>de<<the cat") == source.encode(">>de<< the cat")
    assert source.encode(">>xx<< the")[0] == source.unk_id


def test_scores_are_the_sentencepiece_scores(folders):
    source, _ = load_marian_tokenizers(folders["shared"])
    sp = spm.SentencePieceProcessor(model_file=str(folders["shared"] / "source.spm"))
    frame = source.vocab()
    assert len(frame) == source.vocab_size
    for i, piece in zip(frame["id"], frame["piece"], strict=True):
        known = sp.id_to_piece(sp.piece_to_id(piece)) == piece
        assert source.score(i) == (sp.get_score(sp.piece_to_id(piece)) if known else 0.0)
    assert source.score(source.piece_to_id(">>de<<")) == 0.0
    assert any(source.score(i) != 0.0 for i in range(source.vocab_size))
    with pytest.raises(ValueError, match="out of range"):
        source.decode([source.vocab_size])


def test_save_and_read_back(folders, tmp_path):
    source, _ = load_marian_tokenizers(folders["shared"])
    paths = source.save(tmp_path, "src")
    assert [p.name for p in paths] == ["src.spm", "src.vocab.json"]
    again = MarianSide.from_files(*paths)
    for text in TEXTS:
        assert again.encode(text) == source.encode(text)
    assert again.vocab().equals(source.vocab())


def break_file(folder: Path, name: str, content: str | bytes | None) -> None:
    path = folder / name
    if content is None:
        path.unlink()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")


@pytest.mark.parametrize(("name", "content", "message"), [
    ("vocab.json", None, "lacks the tokenizer file.*vocab.json"),
    ("source.spm", None, "lacks the tokenizer file.*source.spm"),
    ("target.spm", b"not a model", "target.spm: not a valid SentencePiece model"),
    ("source.spm", b"", "source.spm: not a valid SentencePiece model"),
    ("vocab.json", "{not json", "vocab.json.*not valid JSON"),
    ("vocab.json", "[1, 2]", "vocab.json: the vocabulary must be a non-empty JSON object"),
    ("vocab.json", '{"</s>": 0, "<unk>": "1", "<pad>": 2}', "vocab.json: .*strings to integers"),
    ("vocab.json", '{"</s>": 0, "<unk>": true, "<pad>": 2}', "vocab.json: .*strings to integers"),
    ("vocab.json", '{"</s>": 0, "<unk>": 1, "<pad>": 3}', r"vocab.json: .*ids must be 0\.\.2"),
    ("vocab.json", '{"</s>": 0, "<unk>": 0, "<pad>": 1}', r"vocab.json: .*ids must be 0\.\.2"),
    ("vocab.json", '{"</s>": 0, "<unk>": 1, "x": 2}', "vocab.json: .*lacks the special piece.*<pad>"),
    ("tokenizer_config.json", "[]", "tokenizer_config.json: not a JSON object"),
    ("tokenizer_config.json", '{"separate_vocabs": true}', "separate_vocabs but target_vocab.json is missing"),
])
def test_bad_files_are_named(folders, tmp_path, name, content, message):
    folder = tmp_path / "broken"
    folder.mkdir()
    for path in folders["shared"].iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    break_file(folder, name, content)
    with pytest.raises(ValueError, match=message):
        load_marian_tokenizers(folder)


def test_broken_target_vocab_is_named(folders, tmp_path):
    folder = tmp_path / "broken"
    folder.mkdir()
    for path in folders["separate"].iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    break_file(folder, "target_vocab.json", '{"</s>": 0}')
    with pytest.raises(ValueError, match="target_vocab.json: .*lacks the special piece"):
        load_marian_tokenizers(folder)


@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_pieces_are_counted_on_the_raw_bytes_escapes_included(ensure_ascii):
    from transformer.hub.tokenizer import count_pieces

    tricky = {"a": 0, "\\": 1, '"': 2, 'x\\"y': 3, "▁": 4, "a\\": 5, "\\\\": 6, '\\"\\': 7}
    for vocab in ({"</s>": 0}, tricky, {f'p{i}▁"\\': i for i in range(500)}):
        assert count_pieces(json.dumps(vocab, ensure_ascii=ensure_ascii, indent=1).encode()) == len(vocab)


def test_a_side_model_far_larger_than_its_vocabulary_is_refused_before_parsing(folders, tmp_path, monkeypatch):
    """A source.spm under the 16 MB cap but of 100,000 pieces more (appended field-1 entries) is refused on its
    byte count, before sentencepiece parses it; the folder's own models load as before."""
    import shutil

    import transformer.hub.tokenizer as hub_tokenizer

    folder = shutil.copytree(folders["shared"], tmp_path / "big")
    path = folder / "source.spm"
    path.write_bytes(path.read_bytes() + b"\x0a\x08\x0a\x01x\x15\x00\x00\x80\xbf" * 100_000)
    parsed = []
    real = hub_tokenizer._processor
    monkeypatch.setattr(hub_tokenizer, "_processor", lambda proto: parsed.append(proto) or real(proto))
    with pytest.raises(ValueError, match="source.spm: holds more than .* pieces, over 2 times the"):
        load_marian_tokenizers(folder)
    assert not parsed
    load_marian_tokenizers(folders["shared"])
