"""How ``transformers`` 5 builds the tokenizer of a decoder-only folder from its tokenizer.json, rebuilt here.

``AutoTokenizer`` picks a class from config.json's ``model_type`` and tokenizer_config.json's ``tokenizer_class``
(``tokenizer_class_of``, mirroring ``AutoTokenizer.from_pretrained``), and the class decides how much of the file
it runs as written:

- ``FILE`` (``TokenizersBackend``; Llama 3, whose folder names ``PreTrainedTokenizerFast`` or names
  ``LlamaTokenizer`` over a byte-level file; Mistral): the file as written;
- ``GPT2`` (``GPT2Tokenizer``; GPT-2, SmolLM2): the file's vocabulary, merges and post-processor, with a ByteLevel
  pre-tokeniser (GPT-2's regex) and decoder;
- ``QWEN2`` (``Qwen2Tokenizer``; Qwen2, Qwen2.5, Qwen3): the same with NFC and Qwen's regex split before ByteLevel;
- ``LLAMA`` (``LlamaTokenizer``; Llama 2, TinyLlama): the same with Metaspace (a "▁" prepended to the first
  section only, unless ``legacy``) and byte fallback, and no normaliser;
- ``GEMMA`` (``GemmaTokenizer``; Gemma 1-3): the same with spaces replaced by "▁", no dummy prefix, byte fallback.

So a file written by an older ``transformers`` tokenizes as the class does now. Then (``add_tokens``) the added
tokens of tokenizer_config.json's ``added_tokens_decoder`` (else the file's) are added in id order, the named
special tokens (``bos_token``, ``eos_token``, ..., a family's own ``*_token`` keys such as Gemma 3's
``image_token``, then ``additional_special_tokens``) that are not among them are added as special, and a named one
listed as not special becomes special; ``Qwen2Tokenizer`` adds all of them as special once more.

The BOS rule follows: with a tokenizer.json, ``transformers`` 5 drops tokenizer_config.json's ``add_bos_token``
and ``add_eos_token`` and encodes with the file's post-processor (a ``TemplateProcessing`` with ``<s> $A`` for
Llama 2, Mistral and Gemma, ``<|begin_of_text|> $A`` for Llama 3; a ``ByteLevel`` one or none for GPT-2 and
Qwen, which add nothing). With ``mistral_common`` installed, ``transformers`` reads a Mistral folder with a
``tekken.json`` through that library instead; this module follows ``transformers`` without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tokenizers import AddedToken, Regex, decoders, normalizers, pre_tokenizers
from tokenizers import Tokenizer as Backend

from .tokenizer_json import backend_from_document

FILE, GPT2, QWEN2, LLAMA, GEMMA = ("TokenizersBackend", "GPT2Tokenizer", "Qwen2Tokenizer", "LlamaTokenizer",
                                   "GemmaTokenizer")
CLASSES = (FILE, GPT2, QWEN2, LLAMA, GEMMA)
# tokenizer_config.json's tokenizer_class (less a "Fast" suffix) -> how transformers 5 builds it
_DECLARED = {"GPT2Tokenizer": GPT2, "Qwen2Tokenizer": QWEN2, "LlamaTokenizer": LLAMA, "GemmaTokenizer": GEMMA,
             "TokenizersBackend": FILE, "PreTrainedTokenizer": FILE, "PreTrainedTokenizerFast": FILE}
# each class's special tokens where tokenizer_config.json names none (its __init__'s defaults)
DEFAULT_SPECIALS: dict[str, dict[str, str]] = {
    FILE: {},
    GPT2: {"unk_token": "<|endoftext|>", "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"},
    QWEN2: {"unk_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"},
    LLAMA: {"unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>"},
    GEMMA: {"unk_token": "<unk>", "bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>",
            "mask_token": "<mask>"},
}
SPECIAL_ATTRIBUTES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
QWEN_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
              r"\s+(?!\S)|\s+")  # Qwen2Tokenizer's PRETOKENIZE_REGEX
_BPE_DEFAULTS = {"dropout": None, "unk_token": None, "continuing_subword_prefix": None, "end_of_word_suffix": None,
                 "fuse_unk": False, "byte_fallback": False, "ignore_merges": False}


def is_byte_level(document: Mapping[str, Any]) -> bool:
    """Whether the file's pipeline has a ByteLevel step (what ``transformers`` looks for in the file's text)."""
    import json

    parts = {key: document.get(key) for key in ("normalizer", "pre_tokenizer", "post_processor", "decoder")}
    return '"ByteLevel"' in json.dumps(parts)


def tokenizer_class_of(registered: str | None, declared: object, byte_level: bool) -> str:
    """Which of ``CLASSES`` ``AutoTokenizer`` 5 builds for a folder whose family registers the class
    ``registered`` (``Family.registered_tokenizer``: transformers' TOKENIZER_MAPPING_NAMES; None for Llama, which
    has no entry there) and whose tokenizer_config.json names ``declared`` (None when it names none); ValueError
    for a class this module does not reproduce."""
    if declared is None:
        return registered or FILE
    if not isinstance(declared, str):
        raise ValueError(f"tokenizer_class must be a string, not {type(declared).__name__}")
    name = declared.removesuffix("Fast") if declared != "PreTrainedTokenizerFast" else declared
    if name == "LlamaTokenizer" and byte_level:  # a Llama 3 folder that names the old class
        return FILE
    if registered == FILE:  # Mistral: transformers' registered class wins over the folder's
        return FILE
    if name not in _DECLARED:
        raise ValueError(f"tokenizer_class {declared!r} is not one this package reproduces (it reads "
                         f"{', '.join(sorted(k for k in _DECLARED if k.endswith('Tokenizer')))} and "
                         "PreTrainedTokenizerFast)")
    return _DECLARED[name]


def _bpe(document: Mapping[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """The file's BPE vocabulary and merges with ``options`` as the class's constructor passes them."""
    model = document.get("model")
    if not isinstance(model, Mapping) or model.get("type", "BPE") != "BPE":
        kind = model.get("type") if isinstance(model, Mapping) else None
        raise ValueError(f"model.type is {kind!r}; this tokenizer class reads a BPE model")
    vocab = model.get("vocab")
    if isinstance(vocab, list):  # transformers turns a list into piece -> position
        vocab = {entry[0] if isinstance(entry, list) else entry: i for i, entry in enumerate(vocab)}
    if not isinstance(vocab, Mapping):
        raise ValueError("model.vocab must be an object of piece -> id")
    return {"type": "BPE", **_BPE_DEFAULTS, **options, "vocab": vocab, "merges": model.get("merges") or []}


def build_pipeline(document: Mapping[str, Any], kind: str, settings: Mapping[str, Any],
                   named: Mapping[str, str]) -> Backend:
    """The ``tokenizers`` pipeline ``kind`` (one of ``CLASSES``) builds from the file, before its added tokens
    (``add_tokens``) for a rebuilt class; with them (the file's) for ``FILE``. ValueError on a bad file."""
    if kind == FILE:
        return backend_from_document(dict(document))
    prefix_space = settings.get("add_prefix_space")
    if kind in (GPT2, QWEN2):
        model = _bpe(document, {"continuing_subword_prefix": "", "end_of_word_suffix": ""})
    else:
        model = _bpe(document, {"fuse_unk": True, "byte_fallback": True})
        if kind == GEMMA:
            model["unk_token"] = named.get("unk_token")
    bare = {**document, "model": model, "added_tokens": [], "normalizer": None, "pre_tokenizer": None,
            "decoder": None}
    backend = backend_from_document(bare)  # the file's post-processor kept
    if kind == GPT2:
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=bool(prefix_space))
        backend.decoder = decoders.ByteLevel()
    elif kind == QWEN2:
        backend.normalizer = normalizers.NFC()
        backend.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=bool(prefix_space), use_regex=False)])
        backend.decoder = decoders.ByteLevel()
    elif kind == LLAMA:
        prefix = True if prefix_space is None else bool(prefix_space)
        scheme = ("always" if settings.get("legacy") else "first") if prefix else "never"
        backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme=scheme, split=False)
        steps = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
        backend.decoder = decoders.Sequence([*steps, decoders.Strip(content=" ", left=1)] if prefix else steps)
    else:  # GEMMA
        backend.normalizer = normalizers.Replace(" ", "▁")
        backend.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous", invert=False)
        backend.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    return backend


_FLAGS = ("single_word", "lstrip", "rstrip", "normalized", "special")


def added_token(entry: object, field: str) -> AddedToken:
    """An added token as tokenizer_config.json or tokenizer.json writes one: a string (special) or an object."""
    if isinstance(entry, str):
        return AddedToken(entry, special=True)
    if not isinstance(entry, Mapping) or not isinstance(entry.get("content"), str):
        raise ValueError(f"{field} holds {type(entry).__name__} where an added token (an object with a "
                         "'content' string) belongs")
    flags = {key: entry[key] for key in _FLAGS if isinstance(entry.get(key), bool)}
    return AddedToken(entry["content"], **flags)


def _key(token: AddedToken) -> tuple:
    return (token.content, *(getattr(token, flag) for flag in _FLAGS))


def named_specials(settings: Mapping[str, Any], kind: str) -> tuple[dict[str, AddedToken], list[AddedToken]]:
    """(named, extra): the special tokens by name (the class's defaults, then tokenizer_config.json's
    ``*_token`` keys; a null removes a default) and the further ones (``additional_special_tokens`` or
    ``extra_special_tokens``), as ``PreTrainedTokenizerBase.__init__`` reads them."""
    named: dict[str, AddedToken | None] = dict.fromkeys(SPECIAL_ATTRIBUTES)
    named.update({key: AddedToken(value, special=True) for key, value in DEFAULT_SPECIALS[kind].items()})
    for key, value in settings.items():
        if key in SPECIAL_ATTRIBUTES and value is None:
            named[key] = None
        elif key in SPECIAL_ATTRIBUTES or (key.endswith("_token") and (
                isinstance(value, str) or isinstance(value, Mapping) and isinstance(value.get("content"), str))):
            named[key] = added_token(value, key)
    extra_value = settings.get("additional_special_tokens") or settings.get("extra_special_tokens") or []
    extra: list[AddedToken] = []
    if isinstance(extra_value, Mapping):  # a family's named tokens
        named.update({str(k): added_token(v, f"extra_special_tokens.{k}") for k, v in extra_value.items()})
    elif isinstance(extra_value, list):
        extra = [added_token(v, "additional_special_tokens") for v in extra_value]
    else:
        raise ValueError("additional_special_tokens must be a list of tokens")
    return {key: token for key, token in named.items() if token is not None}, extra


def add_tokens(backend: Backend, declared: list[tuple[int, AddedToken]], named: Mapping[str, AddedToken],
               extra: list[AddedToken], kind: str) -> None:
    """Add the folder's added tokens and its special ones to ``backend`` as ``TokenizersBackend.__init__`` does
    (see the module's docstring); ``declared``: (id, token) in id order."""
    present = {_key(token) for token in backend.get_added_tokens_decoder().values()}
    to_add = [token for _, token in declared if _key(token) not in present]
    known = {token.content for token in backend.get_added_tokens_decoder().values()}
    known |= {token.content for token in to_add}
    for token in [*named.values(), *extra]:
        if token.content not in known and all(token is not t for t in to_add):
            to_add.append(token)
            known.add(token.content)
    named_contents = {token.content for token in named.values()}
    for token in to_add:
        if not token.special and token.content in named_contents:
            token.special = True
    if to_add:
        backend.add_tokens(to_add)
    if kind == QWEN2:  # Qwen2Tokenizer.__init__'s last line
        contents = list(dict.fromkeys([*(t.content for t in named.values()), *(t.content for t in extra)]))
        backend.add_tokens([AddedToken(content, special=True) for content in contents])
