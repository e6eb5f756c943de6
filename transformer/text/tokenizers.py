"""Text <-> token ids: one interface over SentencePiece (BPE, unigram) and characters.

The model only ever sees integers. A tokenizer fixes which integers: every kind here
reserves the same four ids (``ids.py``: 0 pad, 1 unk, 2 bos, 3 eos), so the model, the masks
and the decoding loop never ask which tokenizer they were given.

``encode`` adds neither BOS nor EOS (the batching code does), and ``decode`` drops
pad/bos/eos and shows an unknown token as "⁇"; cutting at EOS is the caller's job.
Files are SentencePiece's own model proto or JSON, never pickle, so loading a
downloaded tokenizer cannot run code.
"""

from __future__ import annotations

import io
import json
import re
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import pandas as pd
import sentencepiece as spm

from ..checkpoints.file_caps import MAX_SPM_BYTES, MAX_VOCAB_BYTES, FileTooLargeError, parse_json, read_capped
from ..checks import check_choice
from .ids import BOS_ID, BOS_PIECE, EOS_ID, EOS_PIECE, PAD_ID, PAD_PIECE, SPECIAL_PIECES, UNK_ID, UNK_PIECE

if TYPE_CHECKING:
    from .tasks import Pair, Splits

UNK_SURFACE = "⁇"  # what decode writes for UNK_ID, as SentencePiece does
KINDS: tuple[str, ...] = ("bpe", "unigram", "char")

_CHAR_FORMAT = "transformer-char-tokenizer"


class Tokenizer(ABC):
    """What the rest of the package needs from a tokenizer, whatever its kind."""

    pad_id: int = PAD_ID
    unk_id: int = UNK_ID
    bos_id: int = BOS_ID
    eos_id: int = EOS_ID
    kind: str  # "bpe", "unigram" or "char"

    @property
    @abstractmethod
    def vocab_size(self) -> int:
        """Number of ids, the four reserved ones included: the embedding table's rows."""

    @abstractmethod
    def encode(self, text: str) -> list[int]:
        """Token ids of a text, without BOS/EOS; unseen characters become UNK_ID."""

    @abstractmethod
    def decode(self, ids: Sequence[int]) -> str:
        """The text of some ids, skipping pad/bos/eos (it does not stop at EOS)."""

    @abstractmethod
    def id_to_piece(self, i: int) -> str:
        """The piece an id stands for, e.g. "▁hundred" or "ü"."""

    @abstractmethod
    def piece_to_id(self, piece: str) -> int:
        """The id of a piece, UNK_ID for a piece not in the vocabulary."""

    @abstractmethod
    def score(self, i: int) -> float:
        """SentencePiece's score of a piece, or a character's count in training."""

    @abstractmethod
    def save(self, folder: Path, name: str) -> list[Path]:
        """Write this tokenizer's file(s) into folder, named after name; return their paths."""

    def special_tokens(self) -> dict[int, str]:
        """Every special token of this vocabulary, id -> piece, in id order: what the tokenizer treats as no text
        (pad, unk, the start and end ids here; a Hugging Face tokenizer adds its language codes and other special
        tokens). The explanations ask this rather than keep a list of their own."""
        ids = sorted({self.pad_id, self.unk_id, self.bos_id, self.eos_id})
        return {i: self.id_to_piece(i) for i in ids}

    @cached_property
    def special_ids(self) -> frozenset[int]:
        """The ids of ``special_tokens()`` (a Hugging Face tokenizer may set its own: ``LMTokenizer``)."""
        return frozenset(self.special_tokens())

    def display_pieces(self, ids: Sequence[int]) -> list[str]:
        """One label per id, as the app labels a decoder-only model's positions: the pieces as stored here (a
        Hugging Face byte-level tokenizer, ``hub.lm_tokenizer.LMTokenizer``, writes its bytes readably instead)."""
        return [self.id_to_piece(int(i)) for i in ids]

    def pieces(self, text: str) -> list[str]:
        """The pieces of ``encode(text)``, one per id ("<unk>" for an unknown one)."""
        return [self.id_to_piece(i) for i in self.encode(text)]

    def vocab(self) -> pd.DataFrame:
        """The whole vocabulary, one row per id, with columns id, piece, score."""
        ids = range(self.vocab_size)
        return pd.DataFrame(
            {"id": list(ids), "piece": [self.id_to_piece(i) for i in ids], "score": [self.score(i) for i in ids]}
        )

    def _check_id(self, i: int) -> int:
        if not 0 <= i < self.vocab_size:
            raise ValueError(f"token id {i} is out of range for a vocabulary of {self.vocab_size}")
        return i

    def __repr__(self) -> str:
        return f"{type(self).__name__}(kind={self.kind!r}, vocab_size={self.vocab_size})"


class SentencePieceTokenizer(Tokenizer):
    """Subword pieces learned by SentencePiece, BPE or unigram; "▁" marks a word start."""

    def __init__(self, model_proto: bytes) -> None:
        """Wrap a serialized SentencePiece model (the bytes of a ``.model`` file)."""
        try:
            self._sp = spm.SentencePieceProcessor(model_proto=model_proto)
        except Exception:  # sentencepiece raises a bare RuntimeError with C++ internals
            raise ValueError("not a valid SentencePiece model") from None
        got = tuple(self._sp.id_to_piece(i) for i in range(min(4, self._sp.get_piece_size())))
        if got != SPECIAL_PIECES:
            raise ValueError(f"SentencePiece model has reserved pieces {got}, expected {SPECIAL_PIECES} at ids 0..3")
        self._proto = bytes(model_proto)
        self.kind = _model_type(self._proto)

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        *,
        vocab_size: int,
        model_type: Literal["bpe", "unigram"] = "bpe",
        character_coverage: float = 1.0,
        seed: int = 0,
    ) -> SentencePieceTokenizer:
        """Learn a vocabulary of about vocab_size pieces from texts, in memory.

        vocab_size is an upper bound: a small corpus may give fewer pieces (hard_vocab_limit
        off), but it must leave room for every character plus the four reserved ids.
        One thread and a fixed seed make the same texts give the same model.
        """
        check_choice("model_type", model_type, ("bpe", "unigram"))
        texts = [t for t in texts if t.strip()]
        if not texts:
            raise ValueError("cannot train a tokenizer on no text")
        if not isinstance(vocab_size, int) or vocab_size < 5:
            raise ValueError(f"vocab_size must be an integer >= 5, got {vocab_size!r}")
        # No spm.set_random_generator_seed: it is process-wide, and with every sentence used
        # (no input_sentence_size sampling) and one thread, training is deterministic without it.
        model = io.BytesIO()
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(texts),
                model_writer=model,
                vocab_size=vocab_size,
                model_type=model_type,
                character_coverage=character_coverage,
                hard_vocab_limit=False,
                pad_id=PAD_ID,
                unk_id=UNK_ID,
                bos_id=BOS_ID,
                eos_id=EOS_ID,
                pad_piece=PAD_PIECE,
                unk_piece=UNK_PIECE,
                bos_piece=BOS_PIECE,
                eos_piece=EOS_PIECE,
                unk_surface=UNK_SURFACE,
                num_threads=1,
                minloglevel=2,  # no progress log on stderr
            )
        except RuntimeError as err:
            raise ValueError(_explain_training_error(str(err), vocab_size)) from None
        return cls(model.getvalue())

    @property
    def vocab_size(self) -> int:
        return self._sp.get_piece_size()

    def encode(self, text: str) -> list[int]:
        return self._sp.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self._sp.decode([self._check_id(int(i)) for i in ids])

    def id_to_piece(self, i: int) -> str:
        return self._sp.id_to_piece(self._check_id(i))

    def piece_to_id(self, piece: str) -> int:
        return self._sp.piece_to_id(piece)

    def score(self, i: int) -> float:
        return float(self._sp.get_score(self._check_id(i))) + 0.0  # BPE's first score is -0.0

    def save(self, folder: Path, name: str) -> list[Path]:
        """Write ``{name}.model``: SentencePiece's own file, usable by any of its tools."""
        path = Path(folder) / f"{name}.model"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self._proto)
        return [path]


class CharTokenizer(Tokenizer):
    """One id per character: the simplest tokenizer, and the easiest to read in a chart."""

    kind = "char"

    def __init__(self, chars: Sequence[str], counts: Sequence[int] | None = None) -> None:
        """chars get ids 4, 5, ... in the order given; counts are their training frequencies."""
        if any(not isinstance(c, str) or len(c) != 1 for c in chars) or len(set(chars)) != len(chars):
            raise ValueError("chars must be distinct single characters")
        counts = [0] * len(chars) if counts is None else list(counts)
        if len(counts) != len(chars):
            raise ValueError("need one count per character")
        self._pieces = [*SPECIAL_PIECES, *chars]
        self._counts = [0] * len(SPECIAL_PIECES) + counts
        self._ids = {c: i for i, c in enumerate(chars, start=len(SPECIAL_PIECES))}

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> CharTokenizer:
        """Every character seen in texts, sorted, after the four reserved ids."""
        counts = Counter(c for text in texts for c in text)
        chars = sorted(counts)
        return cls(chars, [counts[c] for c in chars])

    @property
    def vocab_size(self) -> int:
        return len(self._pieces)

    def encode(self, text: str) -> list[int]:
        return [self._ids.get(c, UNK_ID) for c in text]

    def decode(self, ids: Sequence[int]) -> str:
        out = []
        for i in ids:
            i = self._check_id(int(i))
            if i == UNK_ID:
                out.append(UNK_SURFACE)
            elif i >= len(SPECIAL_PIECES):
                out.append(self._pieces[i])
        return "".join(out)

    def id_to_piece(self, i: int) -> str:
        return self._pieces[self._check_id(i)]

    def piece_to_id(self, piece: str) -> int:
        return SPECIAL_PIECES.index(piece) if piece in SPECIAL_PIECES else self._ids.get(piece, UNK_ID)

    def score(self, i: int) -> float:
        return float(self._counts[self._check_id(i)])

    def save(self, folder: Path, name: str) -> list[Path]:
        """Write ``{name}.chars.json``: the characters in id order and their counts."""
        path = Path(folder) / f"{name}.chars.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        n = len(SPECIAL_PIECES)
        doc = {
            "format": _CHAR_FORMAT,
            "version": 1,
            "special": list(SPECIAL_PIECES),
            "chars": self._pieces[n:],
            "counts": self._counts[n:],
        }
        path.write_text(json.dumps(doc, ensure_ascii=False, indent=1), encoding="utf-8")
        return [path]


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """The protobuf varint at ``data[at:]`` and the offset after it; ValueError past the end or over 10 bytes."""
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise ValueError("not a valid SentencePiece model (a truncated or overlong varint)")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if byte < 0x80:
            return value, at


def count_spm_pieces(proto: bytes, stop_after: int | None = None) -> int:
    """How many pieces a serialized SentencePiece ``ModelProto`` holds, without parsing it: its top-level fields
    are walked by their wire types and the length-delimited field 1 (``repeated SentencePiece pieces``) counted;
    the others (trainer and normalizer specs) are skipped by their lengths. With ``stop_after``, the walk stops
    once the count exceeds it (a model of a million pieces is refused after ``stop_after + 1`` steps).
    ValueError when the bytes are not a protobuf message."""
    count = at = 0
    while at < len(proto):
        tag, at = _varint(proto, at)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            _, at = _varint(proto, at)
        elif wire == 1 or wire == 5:
            at += 8 if wire == 1 else 4
        elif wire == 2:
            length, at = _varint(proto, at)
            at += length
            count += field == 1
            if stop_after is not None and count > stop_after:
                return count
        else:  # groups (3, 4) and 6, 7 are not in SentencePiece's proto
            raise ValueError(f"not a valid SentencePiece model (wire type {wire} at byte {at})")
        if at > len(proto):
            raise ValueError("not a valid SentencePiece model (a field runs past the end)")
    return count


def load_tokenizer(folder: Path, name: str, vocab_size: int | None = None) -> Tokenizer:
    """Load what ``save(folder, name)`` wrote: ``{name}.model`` or ``{name}.chars.json``; each file's size is
    checked before it is read (``file_caps``: ``MAX_SPM_BYTES``, ``MAX_VOCAB_BYTES``), and with ``vocab_size``
    (the config's) a SentencePiece model's pieces are counted on its bytes (``count_spm_pieces``) and compared
    with it before the model is parsed: a 16 MB file of a million pieces is refused, not loaded."""
    folder = Path(folder)
    found = [p for p in (folder / f"{name}.model", folder / f"{name}.chars.json") if p.is_file()]
    if not found:
        raise ValueError(f"no tokenizer {name!r} in {folder}: expected {name}.model or {name}.chars.json")
    if len(found) > 1:
        raise ValueError(f"both {found[0].name} and {found[1].name} are in {folder}; remove the stale one")
    path = found[0]
    if path.suffix == ".model":
        try:
            proto = read_capped(path, MAX_SPM_BYTES)
            if vocab_size is not None and (found := count_spm_pieces(proto, vocab_size)) != vocab_size:
                more = "more than " if found > vocab_size else ""
                raise ValueError(f"holds {more}{found:,} pieces but config.json says {vocab_size:,}")
            return SentencePieceTokenizer(proto)
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None
    try:
        data = read_capped(path, MAX_VOCAB_BYTES)
    except FileTooLargeError as err:
        raise ValueError(f"{path.parent}: {err}") from None
    try:
        doc = parse_json(data, path.name)  # RecursionError, UnicodeDecodeError: a JSONFileError naming the file
        if doc.get("format") != _CHAR_FORMAT or tuple(doc["special"]) != SPECIAL_PIECES:
            raise ValueError("not a character tokenizer file of this version")
        return CharTokenizer(doc["chars"], doc["counts"])
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not a valid character tokenizer file: {err}") from None


def build_tokenizers(
    data: Splits | Sequence[Pair],
    *,
    kind: str = "bpe",
    vocab_size: int = 1000,
    shared: bool = True,
    seed: int = 0,
) -> tuple[Tokenizer, Tokenizer]:
    """Train (source, target) tokenizers on a ``Splits`` (its train pairs) or a list of pairs.

    With shared=True one tokenizer learns from sources and targets together and is
    returned twice, so both sides share ids (and could share an embedding table).
    vocab_size is ignored for kind="char".
    """
    check_choice("tokenizer kind", kind, KINDS)
    pairs = getattr(data, "train", data)  # only train: valid/test stay unseen, like real data
    sources = [src for src, _ in pairs]
    targets = [tgt for _, tgt in pairs]

    def train(texts: list[str]) -> Tokenizer:
        if kind == "char":
            return CharTokenizer.from_texts(texts)
        return SentencePieceTokenizer.train(texts, vocab_size=vocab_size, model_type=kind, seed=seed)

    if shared:
        tok = train(sources + targets)
        return tok, tok
    return train(sources), train(targets)


def _model_type(proto: bytes) -> str:
    """ "bpe" or "unigram", read from the model's TrainerSpec."""
    from sentencepiece import sentencepiece_model_pb2  # protobuf, only needed here

    model = sentencepiece_model_pb2.ModelProto()
    model.ParseFromString(proto)
    return sentencepiece_model_pb2.TrainerSpec.ModelType.Name(model.trainer_spec.model_type).lower()


def _explain_training_error(message: str, vocab_size: int) -> str:
    """Turn SentencePiece's C++ check failure into a sentence a user can act on."""
    m = re.search(r"smaller than required_chars\. \d+ vs (\d+)", message)
    if m:
        return (
            f"vocab_size={vocab_size} is too small: the texts need {m.group(1)} ids for their characters "
            "and the 4 reserved tokens; raise vocab_size or use kind='char'"
        )
    m = re.search(r"\[(.+)\]\s*(.*)$", message, re.DOTALL)  # "file.cc(94) [condition] explanation"
    detail = (m.group(2).strip() or f"the check {m.group(1)} failed") if m else message
    return f"SentencePiece training failed: {detail}"
