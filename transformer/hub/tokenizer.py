"""One side of a Marian (opus-mt) tokenizer, computing what ``transformers.MarianTokenizer`` computes.

A Marian folder tokenizes each side with its own SentencePiece model (source.spm, target.spm), but the ids
are not SentencePiece's: every piece is looked up in vocab.json (target_vocab.json for the target when
tokenizer_config.json says ``separate_vocabs``), and a piece the vocabulary lacks becomes ``<unk>``. So a
side here is a SentencePiece model plus a piece -> id table.

What MarianTokenizer (transformers 5) does, and so what this does:

- the literal strings "</s>", "<unk>", "<pad>" in a text are those tokens, never split by SentencePiece;
- a segment starting with ">>" keeps everything up to the first "<<" as one piece: the language tag of a
  multilingual model (">>de<< Hallo" -> ">>de<<", "▁Hallo");
- no text normalisation: ``MarianTokenizer.normalize`` (Moses punctuation, when sacremoses is installed)
  is never called on the way to ids;
- ``decode`` drops every special id (``<unk>`` too), joins the pieces with SentencePiece, turns "▁" into
  spaces and strips the ends; with a shared vocabulary it decodes with the *source* model, as
  MarianTokenizer does, and it applies ``clean_up_tokenization_spaces`` when tokenizer_config.json asks.

Marian's special ids come from the vocabulary ("</s>" is usually 0, "<unk>" 1, "<pad>" the last id) and
the decoder starts with the pad id: there is no ``<s>``. ``encode`` adds no ``</s>`` (``ids.source_ids``
appends it). Only JSON and SentencePiece protos are read: nothing is unpickled.

Every file is read through ``file_caps.read_capped`` (its size checked before it is read), and when the
caller knows the vocabulary sizes (``load_marian`` takes them from config.json) a vocabulary's pieces are
counted on its raw bytes and compared with them before any table is built (``count_pieces``); a vocabulary
shared by both sides is read and parsed once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import sentencepiece as spm

from ..checkpoints.file_caps import MAX_SPM_BYTES, MAX_VOCAB_BYTES, parse_json, read_capped, read_json_object
from ..text.tokenizers import Tokenizer, _model_type, count_spm_pieces
from .folder import TOKENIZER_FILES

EOS_PIECE, UNK_PIECE, PAD_PIECE = "</s>", "<unk>", "<pad>"
SPECIAL_PIECES = (EOS_PIECE, UNK_PIECE, PAD_PIECE)
TARGET_VOCAB_FILE = "target_vocab.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
WORD_START = "▁"

# The three never overlap, so splitting on the alternation is what transformers' added-token trie does.
_SPECIAL_SPLIT = re.compile("(" + "|".join(re.escape(p) for p in SPECIAL_PIECES) + ")")


def split_language_code(text: str) -> tuple[list[str], str]:
    """(["<tag>"], rest) when text starts with ">>" and has a "<<" (the tag ends at the first one), else ([], text):
    ``MarianTokenizer.remove_language_code``."""
    if text.startswith(">>") and (end := text.find("<<")) != -1:
        return [text[: end + 2]], text[end + 2 :]
    return [], text


def clean_up_spaces(text: str) -> str:
    """transformers' ``clean_up_tokenization``: no space before punctuation and English contractions."""
    for before, after in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                          (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        text = text.replace(before, after)
    return text


def check_vocab(vocab: object) -> dict[str, int]:
    """``vocab`` as a dict if it is a Marian vocabulary: str -> int, the ids exactly 0..n-1, the three special
    pieces present; ValueError saying what is wrong otherwise."""
    if not isinstance(vocab, Mapping) or not vocab:
        raise ValueError("the vocabulary must be a non-empty JSON object of piece -> id")
    bad = [(k, v) for k, v in vocab.items() if not isinstance(k, str) or type(v) is not int]
    if bad:
        raise ValueError(f"the vocabulary must map strings to integers, not {bad[0][0]!r} -> {bad[0][1]!r}")
    if sorted(vocab.values()) != list(range(len(vocab))):
        raise ValueError(f"the vocabulary's ids must be 0..{len(vocab) - 1}, each once")
    missing = [p for p in SPECIAL_PIECES if p not in vocab]
    if missing:
        raise ValueError(f"the vocabulary lacks the special piece(s) {', '.join(missing)}")
    return dict(vocab)


def count_pieces(data: bytes) -> int:
    """The number of JSON strings in ``data``: for a vocabulary (an object of piece -> integer id) its number of
    pieces, counted on the raw bytes without building anything: its quotes less the escaped ones (after the
    escaped backslashes are dropped, so that ``\\\\"`` still ends a string), halved. A malformed file gives some
    count; parsing it later says what is wrong."""
    if b"\\" in data:
        data = data.replace(b"\\\\", b"")
        return (data.count(b'"') - data.count(b'\\"')) // 2
    return data.count(b'"') // 2


def _processor(proto: bytes) -> spm.SentencePieceProcessor:
    try:
        processor = spm.SentencePieceProcessor(model_proto=proto)
    except Exception:  # sentencepiece raises a bare RuntimeError with C++ internals
        processor = None
    if processor is None or processor.get_piece_size() == 0:  # an empty proto loads as a model of no pieces
        raise ValueError("not a valid SentencePiece model")
    return processor


class MarianSide(Tokenizer):
    """The source or the target side of a Marian tokenizer: its SentencePiece model and its vocabulary."""

    def __init__(self, spm_proto: bytes, vocab: Mapping[str, int], *, decode_proto: bytes | None = None,
                 clean_up_tokenization_spaces: bool = False) -> None:
        """``spm_proto``: the side's SentencePiece model (bytes of source.spm / target.spm); ``vocab``: piece -> id.
        ``decode_proto``: the model ``decode`` joins pieces with when it is not this one (MarianTokenizer
        decodes a shared vocabulary with source.spm). ValueError if either is invalid."""
        self._vocab = check_vocab(vocab)
        self._sp = _processor(spm_proto)
        self._decode_sp = self._sp if decode_proto is None else _processor(decode_proto)
        self._proto = bytes(spm_proto)
        self._pieces = [""] * len(self._vocab)
        for piece, i in self._vocab.items():
            self._pieces[i] = piece
        self.kind = _model_type(self._proto)
        self.eos_id = self._vocab[EOS_PIECE]
        self.unk_id = self._vocab[UNK_PIECE]
        self.pad_id = self._vocab[PAD_PIECE]
        self.bos_id = self.pad_id  # Marian has no <s>: the decoder starts with the pad id
        self._special_ids = frozenset((self.eos_id, self.unk_id, self.pad_id))
        self.clean_up_tokenization_spaces = clean_up_tokenization_spaces

    @classmethod
    def from_files(cls, spm_path: str | Path, vocab: str | Path | Mapping[str, int], *,
                   decode_spm_path: str | Path | None = None, clean_up_tokenization_spaces: bool = False,
                   vocab_size: int | None = None) -> MarianSide:
        """Read a side from its files (what ``save`` writes, or a Marian folder's); ValueError naming a bad file.
        ``vocab``: the vocabulary's path, or the vocabulary already read; ``vocab_size``: how many pieces it must
        hold (compared before it is parsed)."""
        if not isinstance(vocab, Mapping):
            vocab = _read_vocab(Path(vocab), vocab_size)
        proto = _read_spm(Path(spm_path))
        decode_proto = None if decode_spm_path is None else _read_spm(Path(decode_spm_path))
        return cls(proto, vocab, decode_proto=decode_proto, clean_up_tokenization_spaces=clean_up_tokenization_spaces)

    @property
    def vocab_size(self) -> int:
        return len(self._pieces)

    @property
    def language_codes(self) -> list[str]:
        """The vocabulary's ">>xx<<" tags, in id order: a multilingual model's target languages."""
        return [p for p in self._pieces if p.startswith(">>") and p.endswith("<<")]

    def special_tokens(self) -> dict[int, str]:
        """``</s>``, ``<unk>``, ``<pad>`` (the decoder's start) and the language tags (">>deu<<": ``encode`` keeps one
        whole, as it does a special piece), id -> piece, in id order."""
        tags = {i: p for i, p in enumerate(self._pieces) if p.startswith(">>") and p.endswith("<<")}
        return dict(sorted({**tags, **{i: self._pieces[i] for i in self._special_ids}}.items()))

    def encode(self, text: str) -> list[int]:
        """Ids of a text as ``MarianTokenizer`` gives them, without the final "</s>"."""
        ids: list[int] = []
        for segment in _SPECIAL_SPLIT.split(text):
            if segment in SPECIAL_PIECES:
                ids.append(self._vocab[segment])
            elif segment:
                code, rest = split_language_code(segment)
                pieces = code + self._sp.encode(rest, out_type=str)
                ids.extend(self._vocab.get(piece, self.unk_id) for piece in pieces)
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        """``MarianTokenizer.decode(ids, skip_special_tokens=True)``: "</s>", "<pad>" and "<unk>" are dropped."""
        kept = [self._check_id(int(i)) for i in ids]
        pieces = [self._pieces[i] for i in kept if i not in self._special_ids]
        text = self._decode_sp.decode_pieces(pieces).replace(WORD_START, " ").strip()
        return clean_up_spaces(text) if self.clean_up_tokenization_spaces else text

    def id_to_piece(self, i: int) -> str:
        return self._pieces[self._check_id(i)]

    def piece_to_id(self, piece: str) -> int:
        return self._vocab.get(piece, self.unk_id)

    def score(self, i: int) -> float:
        """The SentencePiece score of the id's piece, 0.0 for a piece the side's model does not have."""
        piece = self.id_to_piece(i)
        sp_id = self._sp.piece_to_id(piece)
        if self._sp.id_to_piece(sp_id) != piece:  # an unknown piece maps to <unk>'s id
            return 0.0
        return float(self._sp.get_score(sp_id)) + 0.0  # BPE's first score is -0.0

    def save(self, folder: Path, name: str) -> list[Path]:
        """Write ``{name}.spm`` (this side's SentencePiece model) and ``{name}.vocab.json`` (piece -> id, in id
        order). ``from_files`` reads them back; the decode model and the clean-up flag are not written."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        spm_path, vocab_path = folder / f"{name}.spm", folder / f"{name}.vocab.json"
        spm_path.write_bytes(self._proto)
        vocab = {piece: i for i, piece in enumerate(self._pieces)}
        vocab_path.write_text(json.dumps(vocab, ensure_ascii=False, indent=0), encoding="utf-8")
        return [spm_path, vocab_path]


def load_marian_tokenizers(folder: str | Path, vocab_sizes: tuple[int, int] | None = None,
                           settings: dict | None = None) -> tuple[MarianSide, MarianSide]:
    """(source, target) sides of the Marian tokenizer in ``folder``; ValueError naming a missing or broken file.
    ``vocab_sizes``: the (source, target) pieces config.json says; a vocabulary of another size is refused by its
    piece count, before it is parsed. ``settings``: tokenizer_config.json as the caller read it
    (``folder.read_folder``); None: read here."""
    folder = Path(folder)
    missing = [name for name in TOKENIZER_FILES if not (folder / name).is_file()]
    if missing:
        raise ValueError(f"{folder} lacks the tokenizer file(s) {', '.join(missing)}")
    if settings is None:
        settings = read_json_object(folder / TOKENIZER_CONFIG_FILE)
    separate = bool(settings.get("separate_vocabs", False))
    clean_up = settings.get("clean_up_tokenization_spaces", False) is True
    source_spm, target_spm, vocab = (folder / name for name in TOKENIZER_FILES)
    target_vocab = folder / TARGET_VOCAB_FILE
    if separate and not target_vocab.is_file():
        raise ValueError(f"{folder / TOKENIZER_CONFIG_FILE} sets separate_vocabs but {TARGET_VOCAB_FILE} is missing")
    src_size, tgt_size = vocab_sizes or (None, None)
    source_pieces = _read_vocab(vocab, src_size)
    target_pieces = _read_vocab(target_vocab, tgt_size) if separate else source_pieces  # parsed once when shared
    if not separate and tgt_size is not None and tgt_size != len(source_pieces):
        raise ValueError(f"{vocab}: holds {len(source_pieces):,} pieces but config.json says {tgt_size:,} for the "
                         "target side, which shares it")
    for spm_path, pieces in ((source_spm, source_pieces), (target_spm, target_pieces)):
        _check_spm_pieces(spm_path, len(pieces))  # counted on the bytes, before sentencepiece parses them
    source = MarianSide.from_files(source_spm, source_pieces, clean_up_tokenization_spaces=clean_up)
    target = MarianSide.from_files(target_spm, target_pieces, decode_spm_path=None if separate else source_spm,
                                   clean_up_tokenization_spaces=clean_up)
    return source, target


SPM_PIECES_PER_VOCAB = 2  # a side's SentencePiece model holds at most this many pieces per vocabulary entry


def _check_spm_pieces(path: Path, vocab_size: int) -> None:
    """ValueError when the SentencePiece model in ``path`` holds more than ``SPM_PIECES_PER_VOCAB`` times the
    pieces of the vocabulary its pieces are looked up in, counted on its bytes (``count_spm_pieces``). Marian's
    ids are the vocabulary's, not the model's: a side's model need not hold every vocabulary entry (a shared
    vocabulary is both sides' union) nor the vocabulary every piece of the model (one never seen in training
    becomes ``<unk>``), so only a model far larger than the vocabulary, which no converted model is, is refused."""
    limit = SPM_PIECES_PER_VOCAB * vocab_size
    try:
        found = count_spm_pieces(read_capped(path, MAX_SPM_BYTES), stop_after=limit)
    except (OSError, ValueError) as error:
        raise ValueError(f"{path}: {_reason(error)}") from None
    if found > limit:
        raise ValueError(f"{path}: holds more than {limit:,} pieces, over {SPM_PIECES_PER_VOCAB} times the "
                         f"{vocab_size:,} of its vocabulary")


def _read_spm(path: Path) -> bytes:
    try:
        proto = read_capped(path, MAX_SPM_BYTES)
        _processor(proto)
    except (OSError, ValueError) as error:
        raise ValueError(f"{path}: {_reason(error)}") from None
    return proto


def _read_vocab(path: Path, size: int | None = None) -> dict[str, int]:
    """The vocabulary in ``path``; ValueError when it is over ``MAX_VOCAB_BYTES``, holds other than ``size``
    pieces (counted before parsing) or is not a vocabulary."""
    try:
        data = read_capped(path, MAX_VOCAB_BYTES)
        if size is not None and (found := count_pieces(data)) != size:
            raise ValueError(f"holds {found:,} pieces but config.json says {size:,}")
        return check_vocab(parse_json(data, path.name))  # JSONFileError: not UTF-8 JSON, or nested too deep
    except (OSError, ValueError) as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ValueError(f"{path}: {_reason(error)}") from None


def _reason(error: Exception) -> str:
    if isinstance(error, json.JSONDecodeError):
        return f"not valid JSON ({error.msg} at line {error.lineno})"
    if isinstance(error, UnicodeDecodeError):
        return "not UTF-8 text"
    if isinstance(error, OSError):
        return f"cannot be read ({error.strerror or error})"
    return str(error)
