"""A Hugging Face ``tokenizer.json`` behind this package's ``Tokenizer`` interface, giving the ids ``AutoTokenizer``
gives for T5 / Flan-T5, BART, mBART-50 and NLLB.

``tokenizer.json`` is the serialised pipeline of the ``tokenizers`` library (normaliser, pre-tokeniser, model,
decoder, added tokens). ``transformers`` 5 does not run that pipeline as written for these families: each
tokenizer class keeps the file's vocabulary (and merges) but rebuilds the rest as its ``__init__`` says, so a
file written by an older ``transformers`` still tokenizes the way the class does now. This module does the
same, family by family (``_PIPELINES``):

| family | model | normaliser | pre-tokeniser / decoder | source ids |
|---|---|---|---|---|
| t5 | Unigram | the file's SentencePiece charsmap | whitespace split, then Metaspace | tokens ``</s>`` |
| bart | byte-level BPE | none | ByteLevel | ``<s>`` tokens ``</s>`` |
| mbart50 | Unigram | charsmap, then runs of spaces -> one | Metaspace | ``[src_lang]`` tokens ``</s>`` |
| nllb | BPE | charsmap and runs of spaces, if a charsmap | Metaspace | ``[src_lang]`` tokens ``</s>`` |

(NLLB as ``transformers`` does it now, not ``legacy_behaviour``'s tokens ``</s> [src_lang]``.) ``encode`` gives
the tokens alone, as every tokenizer of this package does; ``source_prefix`` gives what goes before them (the
pipeline appends ``</s>``). ``decode`` is ``decode(ids, skip_special_tokens=True)``: the special tokens (language
codes included) are dropped, an id past the tokenizer's own vocabulary is skipped, and the clean-up of spaces runs
only where ``tokenizer_config.json`` asks and the model is not BPE, as in ``transformers`` 5.

``vocab_size`` is the model's embedding size, which may exceed the tokenizer's (Flan-T5: 32,128 rows, 32,100
pieces; NLLB-200: 256,206 and 256,204); ``id_to_piece`` names such an id ``<unused N>``. ``bos_id`` is the decoder's
start id from ``config.json`` (T5: the pad id; BART, mBART-50, NLLB: ``</s>``). Only JSON is read, size-capped,
its entries counted against the model's vocabulary before it is parsed, and without the file's padding and
truncation (``tokenizer_json``).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tokenizers import Regex, decoders, normalizers, pre_tokenizers
from tokenizers import Tokenizer as Backend

from ..checkpoints.file_caps import read_json_object
from ..text.tokenizers import Tokenizer
from .tokenizer_json import backend_from_document, check_entries, read_tokenizer_json, rust_errors

TOKENIZER_JSON = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
LAYOUTS = ("t5", "bart", "mbart50", "nllb")
# A language code among the added tokens: mBART-50's en_XX, NLLB's eng_Latn.
_LANGUAGE_CODE = {"mbart50": re.compile(r"[a-z]{2}_[A-Z]{2}"), "nllb": re.compile(r"[a-z]{3}_[A-Z][a-z]{3}")}
MAX_LANGUAGE_CODES = 1024  # each is a menu entry; NLLB-200 has 202, mBART-50 52
_METASPACE = {"replacement": "▁", "prepend_scheme": "always", "split": True}


def _charsmap(document: dict[str, Any]) -> bytes | None:
    """The SentencePiece normalisation table (``Precompiled``) the file's normaliser holds, if any."""
    normalizer = document.get("normalizer") or {}
    parts = normalizer.get("normalizers", [normalizer]) if normalizer.get("type") == "Sequence" else [normalizer]
    for part in parts:
        if isinstance(part, dict) and part.get("type") == "Precompiled" and part.get("precompiled_charsmap"):
            return base64.b64decode(part["precompiled_charsmap"])
    return None


def _build_backend(document: dict[str, Any], layout: str, settings: dict[str, Any]) -> Backend:
    """The file's model and added tokens with the rest of the pipeline as ``transformers`` 5's class builds it
    (T5Tokenizer, RobertaTokenizer for BART, MBart50Tokenizer, NllbTokenizer)."""
    model = dict(document.get("model") or {})
    if layout == "nllb" and model.get("type") == "BPE":  # NllbTokenizer's BPE(fuse_unk=True, byte_fallback=False)
        model.update(fuse_unk=True, byte_fallback=False, unk_token=str(settings.get("unk_token", "<unk>")))
    elif model.get("type") == "Unigram":
        model["byte_fallback"] = False
    backend = backend_from_document({**document, "model": model})  # without the file's padding and truncation
    charsmap = _charsmap(document)
    spaces = normalizers.Replace(Regex(" {2,}"), " ")
    if layout == "bart":
        backend.normalizer = None
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=bool(settings.get("add_prefix_space")))
        backend.decoder = decoders.ByteLevel()
        return backend
    if layout == "t5":
        backend.normalizer = normalizers.Precompiled(charsmap) if charsmap else None
        backend.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                         pre_tokenizers.Metaspace(**_METASPACE)])
    else:
        steps = [normalizers.Precompiled(charsmap)] if charsmap else []
        if layout == "mbart50" or charsmap:
            steps.append(spaces)
        backend.normalizer = normalizers.Sequence(steps) if steps else None
        backend.pre_tokenizer = pre_tokenizers.Metaspace(**_METASPACE)
    backend.decoder = decoders.Metaspace(**_METASPACE)
    return backend


def clean_up_tokenization(text: str) -> str:
    """``transformers``' ``clean_up_tokenization``: no space before punctuation and English contractions."""
    for before, after in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                          (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        text = text.replace(before, after)
    return text


class FastTokenizer(Tokenizer):
    """One ``tokenizer.json`` as the ``AutoTokenizer`` of its family uses it; the same object serves both sides."""

    def __init__(self, document: dict[str, Any], layout: str, *, decoder_start_id: int, vocab_size: int | None = None,
                 settings: dict[str, Any] | None = None) -> None:
        """``document``: tokenizer.json's object; ``layout``: one of ``LAYOUTS``; ``decoder_start_id``: config.json's
        decoder_start_token_id; ``vocab_size``: the model's embedding rows (default: the tokenizer's own size);
        ``settings``: tokenizer_config.json. ValueError when the file cannot be read as that family's tokenizer."""
        if layout not in LAYOUTS:
            raise ValueError(f"unknown tokenizer layout {layout!r} (known: {', '.join(LAYOUTS)})")
        self.settings = dict(settings or {})
        self.layout = layout
        check_entries(document, vocab_size)  # before the Rust side parses anything
        with rust_errors("not a valid tokenizer.json"):  # its own exception types, and its panics
            self._backend = _build_backend(document, layout, self.settings)
        model_type = str((document.get("model") or {}).get("type", "")).lower()
        self.kind = "bpe" if model_type == "bpe" else "unigram"
        self._own_size = self._backend.get_vocab_size(with_added_tokens=True)
        self._size = self._own_size if vocab_size is None else int(vocab_size)
        if self._size < self._own_size:
            raise ValueError(f"the tokenizer has {self._own_size:,} pieces but the model embeds only {self._size:,}")
        self.pad_id = self._special("pad_token", "<pad>")
        self.unk_id = self._special("unk_token", "<unk>")
        self.eos_id = self._special("eos_token", "</s>")
        self.bos_id = self._check_id(int(decoder_start_id))
        self._first = [self._special("bos_token", "<s>")] if layout == "bart" else []
        pattern = _LANGUAGE_CODE.get(layout)
        added = self._backend.get_added_tokens_decoder()
        self.lang_code_ids: dict[str, int] = {} if pattern is None else {
            token.content: i for i, token in sorted(added.items()) if pattern.fullmatch(token.content)}
        if pattern is not None and not self.lang_code_ids:
            raise ValueError(f"a {layout} tokenizer.json must list its language codes among its added tokens")
        if len(self.lang_code_ids) > MAX_LANGUAGE_CODES:
            raise ValueError(f"added_tokens holds {len(self.lang_code_ids):,} language codes; a model has at most "
                             f"{MAX_LANGUAGE_CODES:,}")
        self._clean_up = self.settings.get("clean_up_tokenization_spaces") is True and self.kind != "bpe"
        self._scores: list[float] | None = None
        vocab = (document.get("model") or {}).get("vocab")
        if model_type == "unigram" and isinstance(vocab, list):
            self._scores = [float(entry[1]) for entry in vocab]

    def _special(self, key: str, default: str) -> int:
        value = self.settings.get(key, default)
        piece = value.get("content", default) if isinstance(value, dict) else str(value or default)
        found = self._backend.token_to_id(piece)
        if found is None:
            raise ValueError(f"the tokenizer has no {piece!r} ({key})")
        return found

    @property
    def vocab_size(self) -> int:
        return self._size

    @property
    def language_codes(self) -> list[str]:
        """The language codes a multilingual model knows (mBART-50: en_XX, de_DE, ...; NLLB: eng_Latn, ...)."""
        return list(self.lang_code_ids)

    def special_tokens(self) -> dict[int, str]:
        """Every token the file marks special (``AutoTokenizer``'s ``all_special_ids``: pad, unk, ``</s>``, ``<s>``,
        the language codes, T5's sentinels, ...) and the decoder's start id, id -> piece, in id order."""
        special = {i: token.content for i, token in self._backend.get_added_tokens_decoder().items() if token.special}
        for i in (self.pad_id, self.unk_id, self.eos_id, self.bos_id, *self._first):
            special.setdefault(i, self.id_to_piece(i))
        return dict(sorted(special.items()))

    def source_prefix(self, lang: str | None = None) -> list[int]:
        """The ids before a source's tokens: BART's ``<s>``; mBART-50's and NLLB's source language code (``lang``,
        one of ``language_codes``); nothing for T5. ValueError for a code the tokenizer does not know."""
        if not self.lang_code_ids:
            return list(self._first)
        if lang not in self.lang_code_ids:
            raise ValueError(f"unknown language code {lang!r}; choose one of {', '.join(self.lang_code_ids)}")
        return [self.lang_code_ids[lang]]

    def encode(self, text: str) -> list[int]:
        """The token ids of ``text`` without special tokens (``AutoTokenizer``'s with ``add_special_tokens=False``)."""
        with rust_errors("the tokenizer failed", library_errors=False):
            return self._backend.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Sequence[int]) -> str:
        """``AutoTokenizer.decode(ids, skip_special_tokens=True)``."""
        kept = [i for i in (self._check_id(int(i)) for i in ids) if i < self._own_size]
        with rust_errors("the tokenizer failed", library_errors=False):
            text = self._backend.decode(kept, skip_special_tokens=True)
        return clean_up_tokenization(text) if self._clean_up else text

    def id_to_piece(self, i: int) -> str:
        piece = self._backend.id_to_token(self._check_id(i))
        return f"<unused {i}>" if piece is None else piece

    def piece_to_id(self, piece: str) -> int:
        found = self._backend.token_to_id(piece)
        return self.unk_id if found is None else found

    def score(self, i: int) -> float:
        """The Unigram model's score of the piece (its log-probability); 0.0 for BPE and for added tokens."""
        self._check_id(i)
        return self._scores[i] + 0.0 if self._scores is not None and i < len(self._scores) else 0.0

    def save(self, folder: Path, name: str) -> list[Path]:
        """Write ``{name}.tokenizer.json``: the pipeline as rebuilt here (the ``tokenizers`` library reads it)."""
        path = Path(folder) / f"{name}.tokenizer.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self._backend.to_str(), encoding="utf-8")
        return [path]


read_json = read_json_object  # the name the tokenizer readers import: file_caps's one reader of a small JSON file


def load_fast_tokenizer(folder: str | Path, layout: str, *, decoder_start_id: int,
                        vocab_size: int | None = None, settings: dict[str, Any] | None = None) -> FastTokenizer:
    """The tokenizer of a T5 / BART / mBART-50 / NLLB folder (its tokenizer.json and tokenizer_config.json);
    ValueError naming a missing or broken file. ``vocab_size``: the model's ids, which cap the file's pieces, merges
    and added tokens (``tokenizer_json.entry_caps``), counted before it is parsed. ``settings``: tokenizer_config.json
    as the caller read it (``folder.read_folder``); None: read here."""
    folder = Path(folder)
    path = folder / TOKENIZER_JSON
    if not path.is_file():
        raise ValueError(f"{folder} has no {TOKENIZER_JSON}; with transformers installed, "
                         f"`AutoTokenizer.from_pretrained(folder).save_pretrained(folder)` writes one")
    try:
        document = read_tokenizer_json(path, vocab_size)  # its entries counted before it is parsed
    except (OSError, ValueError) as error:
        raise ValueError(f"{path}: {error}") from None
    if settings is None:
        settings = read_json_object(folder / TOKENIZER_CONFIG)
    try:
        return FastTokenizer(document, layout, decoder_start_id=decoder_start_id, vocab_size=vocab_size,
                             settings=settings)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
