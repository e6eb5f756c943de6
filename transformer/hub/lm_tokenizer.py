"""The tokenizer of a decoder-only folder (GPT-2, Llama 2 and 3, Mistral, Qwen2/3, Gemma 2/3, SmolLM2), giving the
ids ``AutoTokenizer`` gives, and its chat template.

``encode(text)`` is ``AutoTokenizer.from_pretrained(folder)(text)["input_ids"]``: the family's BOS is the file's
post-processor's (GPT-2 and Qwen add none; Llama, Mistral and Gemma add theirs; see ``lm_pipelines``, which
rebuilds the pipeline as ``transformers`` 5's class for the folder does). ``chat(messages)`` is
``apply_chat_template(messages, add_generation_prompt=True)``: the template rendered (``chat_template``, in the
sandbox and on a budget), then encoded without the post-processor's tokens (a template that wants a BOS writes
``{{ bos_token }}``, so it is never added twice). ``decode(ids)`` is ``decode(ids, skip_special_tokens=True)``
(BPE: no clean-up of spaces), the text a user is shown; ``display_pieces(ids)`` the pieces a chart shows.

"Special" is what the tokenizer says: every added token flagged special, and the named ones (``special_ids``).
``eos_ids`` are where ``generate`` stops: generation_config.json's ``eos_token_id`` (an id or a list), else
config.json's, else the tokenizer's ``eos_token``.

Every file is read under caps: tokenizer.json and tokenizer_config.json through ``tokenizer_json`` (sizes, and
their entries counted against the model's vocabulary before they are parsed; padding and truncation dropped),
chat_template.jinja and generation_config.json by size. A file that cannot be read gives a ``CheckpointError``
naming the file and the field.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..checkpoints.errors import CheckpointError
from ..checkpoints.file_caps import MAX_CONFIG_BYTES, FileTooLargeError, read_capped
from ..text.tokenizers import Tokenizer
from . import lm_pipelines as pipelines
from .chat_template import MAX_TEMPLATE_CHARS, ChatTemplate, ChatTemplateError
from .families import family_or_none
from .tokenizer_json import entry_caps, read_counted, read_tokenizer_json, rust_errors

TOKENIZER_JSON, TOKENIZER_CONFIG = "tokenizer.json", "tokenizer_config.json"
CHAT_TEMPLATE_FILE, GENERATION_CONFIG = "chat_template.jinja", "generation_config.json"
MAX_TEXT_CHARS = 2**20  # a text encoded at once; the app's inputs are far shorter


def _byte_table() -> dict[str, int]:
    """GPT-2's ``bytes_to_unicode`` inverted: the character a byte-level piece writes for each byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[chr(b)] = b
        else:
            table[chr(256 + extra)] = b
            extra += 1
    return table


_BYTE_LEVEL = _byte_table()
_MARKS = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}


def _readable(data: bytes) -> str:
    """Bytes as text where they are UTF-8, each other byte as <0xNN>; spaces and line breaks as visible marks."""
    out, at = [], 0
    while at < len(data):
        for end in range(min(len(data), at + 4), at, -1):
            try:
                out.append(data[at:end].decode("utf-8"))
            except UnicodeDecodeError:
                continue
            at = end
            break
        else:
            out.append(f"<0x{data[at]:02X}>")
            at += 1
    return "".join(_MARKS.get(c, c) for c in "".join(out))


class LMTokenizer(Tokenizer):
    """A decoder-only folder's tokenizer as ``AutoTokenizer`` builds it, with its chat template."""

    kind = "bpe"

    def __init__(self, document: dict[str, Any], model_type: str, *, settings: Mapping[str, Any] | None = None,
                 vocab_size: int | None = None, chat_template: str | None = None,
                 eos_ids: Sequence[int] | None = None) -> None:
        """``document``: tokenizer.json's object (entries already counted: ``tokenizer_json``); ``model_type``:
        config.json's; ``settings``: tokenizer_config.json; ``vocab_size``: the model's embedding rows (default:
        the tokenizer's size); ``chat_template``: the template's text; ``eos_ids``: where generation stops
        (default: the ``eos_token``). ValueError saying what does not fit."""
        self.settings = dict(settings or {})
        byte_level = pipelines.is_byte_level(document)
        declared = self.settings.get("tokenizer_class")
        family = family_or_none(model_type)
        registered = family.registered_tokenizer if family is not None else None
        self.tokenizer_class = pipelines.tokenizer_class_of(registered, declared, byte_level)
        named, extra = pipelines.named_specials(self.settings, self.tokenizer_class)
        with rust_errors("not a valid tokenizer.json"):
            backend = pipelines.build_pipeline(document, self.tokenizer_class, self.settings,
                                               {k: t.content for k, t in named.items()})
            pipelines.add_tokens(backend, self._declared(document), named, extra, self.tokenizer_class)
            backend.encode_special_tokens = self.settings.get("split_special_tokens") is True
        self._backend = backend
        self._own_size = backend.get_vocab_size(with_added_tokens=True)
        self._size = self._own_size if vocab_size is None else int(vocab_size)
        if self._size < self._own_size:
            raise ValueError(f"the tokenizer has {self._own_size:,} ids but the model embeds only {self._size:,}")
        self.special_tokens = {key: token.content for key, token in named.items()}  # bos_token: "<s>", ...
        ids = {key: backend.token_to_id(content) for key, content in self.special_tokens.items()}
        self.bos_id: int | None = ids.get("bos_token")
        self.eos_id: int | None = ids.get("eos_token")
        self.pad_id: int | None = ids.get("pad_token")
        self.unk_id: int | None = ids.get("unk_token")
        flagged = {i for i, token in backend.get_added_tokens_decoder().items() if token.special}
        extras = {backend.token_to_id(token.content) for token in extra}
        self.special_ids = frozenset(i for i in flagged | set(ids.values()) | extras if i is not None)
        eos = list(eos_ids) if eos_ids else ([] if self.eos_id is None else [self.eos_id])
        self.eos_ids = tuple(dict.fromkeys(self._check_id(int(i)) for i in eos))
        # the pipeline as rebuilt: GPT-2's and Qwen's are byte-level, the file's is what it says
        self._byte_level = self.tokenizer_class in (pipelines.GPT2, pipelines.QWEN2) or (
            self.tokenizer_class == pipelines.FILE and byte_level)
        self._added = backend.get_added_tokens_decoder()  # id -> AddedToken, read once (thousands for Gemma 3)
        self._template_source = chat_template
        self._template: ChatTemplate | None = None

    def _declared(self, document: Mapping[str, Any]) -> list[tuple[int, Any]]:
        """(id, AddedToken) of tokenizer_config.json's ``added_tokens_decoder``, else of the file's
        ``added_tokens``, in id order (what ``from_pretrained`` hands the class)."""
        source = self.settings.get("added_tokens_decoder")
        if isinstance(source, Mapping):
            entries = [(key, value) for key, value in source.items()]
            field = "added_tokens_decoder"
        else:
            raw = document.get("added_tokens") or []
            entries = [(entry.get("id") if isinstance(entry, Mapping) else None, entry) for entry in raw]
            field = "added_tokens"
        declared = []
        for key, entry in entries:
            try:
                i = int(key)
            except (TypeError, ValueError):
                raise ValueError(f"{field} holds the id {key!r}, not an integer") from None
            declared.append((i, pipelines.added_token(entry, field)))
        return sorted(declared, key=lambda pair: pair[0])

    @property
    def vocab_size(self) -> int:
        return self._size

    @property
    def own_size(self) -> int:
        """The ids the tokenizer itself has (``vocab_size`` may be larger: rows the model embeds past them)."""
        return self._own_size

    @property
    def has_chat_template(self) -> bool:
        """Whether the folder has a chat template (an instruct model's prompt format)."""
        return self._template_source is not None

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """``AutoTokenizer(text)["input_ids"]``: the family's BOS first where its post-processor adds one
        (``add_special_tokens=False``: the tokens alone). As there, a special token written in the text is that
        token (``split_special_tokens`` in tokenizer_config.json turns this off). ValueError for a text over
        ``MAX_TEXT_CHARS``."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a string, not {type(text).__name__}")
        if len(text) > MAX_TEXT_CHARS:
            raise ValueError(f"the text has {len(text):,} characters; at most {MAX_TEXT_CHARS:,} are encoded at once")
        with rust_errors("the tokenizer failed", library_errors=False):
            return self._backend.encode(text, add_special_tokens=add_special_tokens).ids

    def chat_template(self) -> ChatTemplate:
        """The folder's compiled chat template; CheckpointError naming the file when it has none or it is bad."""
        if self._template is None:
            if self._template_source is None:
                raise CheckpointError(f"this model has no chat template ({TOKENIZER_CONFIG} has no chat_template "
                                      f"and there is no {CHAT_TEMPLATE_FILE}); use it without chat")
            try:
                self._template = ChatTemplate(self._template_source, self.special_tokens)
            except ChatTemplateError as error:
                raise CheckpointError(f"chat_template: {error}") from None
        return self._template

    def render_chat(self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = True,
                    **variables: Any) -> str:
        """The prompt text of ``messages``: ``apply_chat_template(..., tokenize=False)``."""
        return self.chat_template().render(messages, add_generation_prompt=add_generation_prompt, **variables)

    def chat(self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = True,
             **variables: Any) -> list[int]:
        """``apply_chat_template(messages, add_generation_prompt=...)``'s ids: the rendered text encoded without
        the post-processor's tokens. ChatTemplateError when the template refuses the messages."""
        return self.encode(self.render_chat(messages, add_generation_prompt, **variables), add_special_tokens=False)

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """``AutoTokenizer.decode(ids, skip_special_tokens=...)``; an id past the tokenizer's own (an embedding
        row it does not use) is skipped, as the library does."""
        kept = [i for i in (self._check_id(int(i)) for i in ids) if i < self._own_size]
        with rust_errors("the tokenizer failed", library_errors=False):
            return self._backend.decode(kept, skip_special_tokens=skip_special_tokens)

    def id_to_piece(self, i: int) -> str:
        piece = self._backend.id_to_token(self._check_id(i))
        return f"<unused {i}>" if piece is None else piece

    def piece_to_id(self, piece: str) -> int:
        found = self._backend.token_to_id(piece)
        if found is None and self.unk_id is None:
            raise ValueError(f"{piece!r} is not a piece of this tokenizer, and it has no unknown token")
        return self.unk_id if found is None else found

    def display_pieces(self, ids: Sequence[int]) -> list[str]:
        """One readable label per id: a byte-level piece ("Ġworld", "ĊĊ") as its text with spaces and line
        breaks marked ("␣world", "↵↵"), a SentencePiece one the same ("▁world" -> "␣world"), a byte that is not
        text on its own as <0xNN>; special tokens as they are."""
        labels = []
        for i in ids:
            piece = self.id_to_piece(int(i))
            if int(i) in self._added or piece.startswith("<unused "):
                labels.append(piece)
            elif self._byte_level and all(c in _BYTE_LEVEL for c in piece):
                labels.append(_readable(bytes(_BYTE_LEVEL[c] for c in piece)))
            elif len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
                labels.append(_readable(bytes([int(piece[3:5], 16)])))
            else:
                labels.append(_readable(piece.replace("▁", " ").encode("utf-8")))
        return labels

    def score(self, i: int) -> float:
        """0.0: a BPE piece has no score (its merge rank orders it)."""
        self._check_id(i)
        return 0.0

    def save(self, folder: Path, name: str) -> list[Path]:
        """Write ``{name}.tokenizer.json``: the pipeline as rebuilt here (the ``tokenizers`` library reads it)."""
        path = Path(folder) / f"{name}.tokenizer.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self._backend.to_str(), encoding="utf-8")
        return [path]


def _read_file(path: Path, reader: Callable[[Path], Any]) -> Any:
    """``reader(path)``, its errors as a CheckpointError that names the file (not the folder's path)."""
    try:
        return reader(path)
    except FileTooLargeError as error:  # names the file, its size and the cap
        raise CheckpointError(str(error)) from None
    except OSError as error:
        raise CheckpointError(f"{path.name}: cannot be read ({error.strerror or type(error).__name__})") from None
    except UnicodeDecodeError:
        raise CheckpointError(f"{path.name}: not UTF-8 text") from None
    except ValueError as error:
        raise CheckpointError(f"{path.name}: {error}") from None


def _read_json_file(path: Path, reader: Callable[[Path], bytes]) -> dict[str, Any]:
    """The JSON object in ``path`` read by ``reader`` (which caps it); CheckpointError naming the file."""
    data = _read_file(path, reader)
    try:
        document = json.loads(data)
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError
        raise CheckpointError(f"{path.name}: not valid JSON ({error})") from None
    if not isinstance(document, dict):
        raise CheckpointError(f"{path.name}: not a JSON object")
    return document


def _eos_ids(folder: Path, eos_token_id: object, vocab_size: int | None) -> list[int] | None:
    """generation_config.json's eos_token_id (an id or a list of ids), else config.json's; None when neither."""
    path, field = folder / GENERATION_CONFIG, "eos_token_id"
    found = eos_token_id
    if path.is_file():
        document = _read_json_file(path, lambda p: read_capped(p, MAX_CONFIG_BYTES))
        found = document.get(field, eos_token_id)
    else:
        path = folder / "config.json"
    values = found if isinstance(found, list) else [] if found is None else [found]
    if any(isinstance(v, bool) or not isinstance(v, int) or v < 0 or (vocab_size and v >= vocab_size)
           for v in values) or len(values) > 64:
        raise CheckpointError(f"{path.name}: {field} must be an id or a list of ids below the vocabulary's "
                              f"{vocab_size or 'size'}, not {str(found)[:80]}")
    return values or None


def load_lm_tokenizer(folder: str | Path, model_type: str, *, vocab_size: int | None = None,
                      eos_token_id: object = None) -> LMTokenizer:
    """The tokenizer of the decoder-only folder ``folder`` (config.json's ``model_type``, ``vocab_size`` and
    ``eos_token_id`` given by the caller, who read config.json); CheckpointError naming the file and field."""
    folder = Path(folder)
    path = folder / TOKENIZER_JSON
    if not path.is_file():
        raise CheckpointError(f"the folder has no {TOKENIZER_JSON}; with transformers installed, "
                              "`AutoTokenizer.from_pretrained(folder).save_pretrained(folder)` writes one")
    document = _read_file(path, lambda p: read_tokenizer_json(p, vocab_size))  # entries counted before parsing
    settings: dict[str, Any] = {}
    config_path = folder / TOKENIZER_CONFIG
    if config_path.is_file():  # it lists every added token (thousands for Gemma 3): capped by the model's
        # vocabulary as tokenizer.json is, not by MAX_CONFIG_BYTES
        settings = _read_json_file(config_path, lambda p: bytes(read_counted(p, vocab_size)))
        added = settings.get("added_tokens_decoder")
        cap = entry_caps(vocab_size)["added_tokens"] if vocab_size else None
        if isinstance(added, dict) and cap is not None and len(added) > cap:
            raise CheckpointError(f"{TOKENIZER_CONFIG}: added_tokens_decoder holds {len(added):,} entries; a model "
                                  f"of {vocab_size:,} ids has at most {cap:,}")
    template = _chat_template(folder, settings)
    try:
        return LMTokenizer(document, model_type, settings=settings, vocab_size=vocab_size, chat_template=template,
                           eos_ids=_eos_ids(folder, eos_token_id, vocab_size))
    except CheckpointError:
        raise
    except ValueError as error:
        raise CheckpointError(f"{TOKENIZER_JSON} / {TOKENIZER_CONFIG}: {error}") from None


def _chat_template(folder: Path, settings: Mapping[str, Any]) -> str | None:
    """The folder's chat template: chat_template.jinja (which transformers prefers), else tokenizer_config.json's
    ``chat_template`` (a string, or a list of named ones: the "default"); None when it has none."""
    path = folder / CHAT_TEMPLATE_FILE
    if path.is_file():
        return _read_file(path, lambda p: read_capped(p, 4 * MAX_TEMPLATE_CHARS).decode("utf-8"))
    value = settings.get("chat_template")
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(t, Mapping) for t in value):
        named = {t.get("name"): t.get("template") for t in value}
        if isinstance(named.get("default"), str):
            return named["default"]
        names = ", ".join(str(name) for name in named)[:200]
        raise CheckpointError(f"{TOKENIZER_CONFIG}: chat_template lists templates ({names}) but no 'default'")
    raise CheckpointError(f"{TOKENIZER_CONFIG}: chat_template must be a string or a list of named templates")
